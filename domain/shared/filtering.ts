// The Filtering of the HTTP contract: the request body of every search, paged search and count, parsed
// against a resource's column catalogue into a typed Query that each read store compiles.
// Values are always data: they are parsed as the column's type here and bound as parameters there.

import { z } from 'zod';
import { invalidFilter } from './errors.ts';

export const Operators = ['EQ', 'NOT_EQ', 'LIKE', 'NOT_LIKE', 'IN', 'NOT_IN', 'GT', 'GTE', 'LT', 'LTE', 'IS_NULL', 'IS_NOT_NULL'] as const;
export type Operator = (typeof Operators)[number];

export type PositiveOperator = 'EQ' | 'IN' | 'LIKE' | 'GT' | 'GTE' | 'LT' | 'LTE';

/** How every read store reads an operator: a null test, a comparison, or the negation of one
 * (NOT_EQ, NOT_IN and NOT_LIKE hold where their positive does not, as MongoDB's `$ne` and `$nin`). */
export type OperatorShape =
  { kind: 'null'; isNull: boolean } | { kind: 'positive'; op: PositiveOperator } | { kind: 'negated'; op: PositiveOperator };

export function shapeOf(op: Operator): OperatorShape {
  switch (op) {
    case 'IS_NULL':
      return { kind: 'null', isNull: true };
    case 'IS_NOT_NULL':
      return { kind: 'null', isNull: false };
    case 'NOT_EQ':
      return { kind: 'negated', op: 'EQ' };
    case 'NOT_IN':
      return { kind: 'negated', op: 'IN' };
    case 'NOT_LIKE':
      return { kind: 'negated', op: 'LIKE' };
    case 'EQ':
    case 'IN':
    case 'LIKE':
    case 'GT':
    case 'GTE':
    case 'LT':
    case 'LTE':
      return { kind: 'positive', op };
    default: {
      const _never: never = op;
      return _never;
    }
  }
}

/**
 * `any` is the type of a path below a free-form map (chars, config, registry, …): a value matches
 * a stored string equal to it, a stored number equal to its numeric reading, or a stored boolean
 * equal to `true`/`false`; ordering compares numerically when the value is a number.
 */
export type ColumnType = 'string' | 'uuid' | 'number' | 'integer' | 'boolean' | 'date-time' | 'any';

export type Column = {
  /** Dotted path from the document root (or from the array element for nested properties). */
  path: string;
  type: ColumnType;
  /** The field is an array of scalars: a condition holds when any element matches it. */
  array: boolean;
};

export type ColumnCatalog = {
  columns: ReadonlyMap<string, Column>;
  /** Paths of free-form maps: any dotted sub-path below them is a column of type `any`. */
  maps: ReadonlySet<string>;
  /** Arrays of objects usable with isNested, by path, with the catalogue of their elements. */
  nested: ReadonlyMap<string, ColumnCatalog>;
};

export type Scalar = string | number | boolean;

/**
 * A LIKE value parsed once, for every store to compile: literal text, `%` (any run, consecutive
 * ones collapsed) and `_` (one character). Text is never empty and never adjacent to more text.
 */
export type LikeToken = { kind: 'text'; text: string } | { kind: 'any' } | { kind: 'one' };
export type LikePattern = readonly LikeToken[];

export type Condition =
  | { kind: 'field'; column: Column; op: Operator; value?: Scalar; values?: readonly Scalar[]; like?: LikePattern }
  | { kind: 'nested'; arrayPath: string; column: Column; op: Operator; value?: Scalar; values?: readonly Scalar[]; like?: LikePattern };

export type SortKey = { column: Column; order: 'ASC' | 'DESC' };

/** Conditions of which one set must hold: each set is ANDed, the sets ORed (an access rule's
 * coverage: the expressions of every rule that grants the caller access). No set: nothing holds. */
export type Alternatives = readonly (readonly Condition[])[];

export type Query = {
  conditions: readonly Condition[];
  sort: readonly SortKey[];
  /** Groups of alternatives, each of which must hold besides `conditions`. */
  anyOf?: readonly Alternatives[];
};

/** A query narrowed to what some alternatives cover (none: unchanged). */
export const narrowed = (query: Query, alternatives: Alternatives | undefined): Query =>
  alternatives === undefined ? query : { ...query, anyOf: [...(query.anyOf ?? []), alternatives] };

export const MAX_PAGE_SIZE = 1000;
export const DEFAULT_PAGE_SIZE = 20;
export const MAX_UNPAGED_SIZE = 10000;
export const DEFAULT_UNPAGED_SIZE = 1000;

/** Longest filter value, and longest item of `values`. */
export const MAX_FILTER_VALUE_LENGTH = 1000;
/** Longest LIKE value: a code's or a name's length. SQLite's own LIKE may take the value's length
 * times the pattern's (and refuses a pattern past 50,000 bytes with a 500). */
export const MAX_LIKE_LENGTH = 255;
/** Most unescaped `%` and `_` in one LIKE value: bounds the recursion of SQLite's LIKE and the
 * lookaheads of the MongoDB expression. */
export const MAX_LIKE_WILDCARDS = 32;
/** Most LIKE and NOT_LIKE items in one filtering: each one reads every candidate value through. */
export const MAX_LIKE_ITEMS = 4;

const filterValue = z
  .union([z.string().max(MAX_FILTER_VALUE_LENGTH), z.number(), z.boolean()])
  .transform((v) => String(v))
  .meta({ description: `A string (at most ${String(MAX_FILTER_VALUE_LENGTH)} characters), number or boolean, read as text.` });

export const FilterItemSchema = z
  .strictObject({
    key: z.string().max(255).optional(),
    column: z.string().max(255).optional(),
    operator: z.string().max(32).optional(),
    value: filterValue.nullable().optional(),
    values: z.array(filterValue).max(1000).optional(),
    isNested: z.boolean().optional(),
    nestedPath: z.string().max(255).optional(),
    nestedProperty: z.string().max(255).optional(),
  })
  .meta({
    id: 'FilterItem',
    description:
      `One condition: \`column\` (or \`key\`), \`operator\` (EQ by default) and \`value\` or \`values\`; each value at most ` +
      `${String(MAX_FILTER_VALUE_LENGTH)} characters. LIKE and NOT_LIKE are case-insensitive: \`%\` matches any run of ` +
      `characters, \`_\` exactly one, and a value with no unescaped \`%\` or \`_\` matches as a substring. \`\\%\`, \`\\_\` and \`\\\\\` stand ` +
      `for a literal \`%\`, \`_\` and backslash; a backslash before any other character is a literal backslash. A LIKE ` +
      `value is at most ${String(MAX_LIKE_LENGTH)} characters with at most ${String(MAX_LIKE_WILDCARDS)} unescaped ` +
      `\`%\` and \`_\`, and a filtering has at most ${String(MAX_LIKE_ITEMS)} LIKE and NOT_LIKE items; past any limit ` +
      `the answer is a 400 FILTER.INVALID. On the embedded store LIKE reads the first 4,000 characters of a value.`,
  });
export type FilterItem = z.infer<typeof FilterItemSchema>;

export const SortItemSchema = z.strictObject({
  column: z.string().max(255),
  order: z
    .string()
    .transform((s) => s.toUpperCase())
    .pipe(z.enum(['ASC', 'DESC']))
    .meta({ pattern: '^([Aa][Ss][Cc]|[Dd][Ee][Ss][Cc])$', description: 'ASC or DESC, in any case' })
    .default('ASC'),
});

export const FilteringSchema = z
  .strictObject({
    filter: z.array(FilterItemSchema).max(100).default([]),
    sort: z.array(SortItemSchema).max(10).default([]),
    page: z.int().min(0).max(1_000_000).default(0),
    size: z.int().min(1).max(MAX_PAGE_SIZE).optional(),
  })
  .meta({ id: 'Filtering' });
export type Filtering = z.infer<typeof FilteringSchema>;

const SEGMENT = /^[A-Za-z0-9_-]{1,64}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function resolveColumn(catalog: ColumnCatalog, path: string): Column | undefined {
  const known = catalog.columns.get(path);
  if (known) return known;
  const segments = path.split('.');
  if (!segments.every((s) => SEGMENT.test(s))) return undefined;
  for (let i = segments.length - 1; i >= 1; i--) {
    if (catalog.maps.has(segments.slice(0, i).join('.'))) return { path, type: 'any', array: false };
  }
  return undefined;
}

const isOperator = (s: string): s is Operator => (Operators as readonly string[]).includes(s);

function parseValue(type: ColumnType, raw: string): Scalar | string {
  switch (type) {
    case 'string':
    case 'any':
      return raw;
    case 'uuid':
      if (!UUID.test(raw)) throw new TypeError('a uuid');
      return raw.toLowerCase();
    case 'number': {
      const n = raw.trim() === '' ? Number.NaN : Number(raw);
      if (!Number.isFinite(n)) throw new TypeError('a number');
      return n;
    }
    case 'integer': {
      const n = raw.trim() === '' ? Number.NaN : Number(raw);
      if (!Number.isSafeInteger(n)) throw new TypeError('an integer');
      return n;
    }
    case 'boolean':
      if (raw === 'true') return true;
      if (raw === 'false') return false;
      throw new TypeError('true or false');
    case 'date-time': {
      const t = Date.parse(raw);
      if (!/^\d{4}-\d{2}-\d{2}/.test(raw) || Number.isNaN(t)) throw new TypeError('an ISO 8601 date-time');
      // Stored date-times have millisecond precision; finer digits would be dropped unseen.
      if (/\.\d{3}\d*[1-9]/.test(raw)) throw new TypeError('a date-time with at most millisecond precision');
      return new Date(t).toISOString();
    }
  }
}

type Located = { column: Column; arrayPath?: string };
type Outcome<T> = { ok: T } | { error: string };

function locate(item: FilterItem, where: string, catalog: ColumnCatalog): Outcome<Located> {
  if (item.isNested === true) {
    if (item.nestedPath === undefined || item.nestedProperty === undefined) {
      return { error: `${where}: isNested needs nestedPath and nestedProperty` };
    }
    const elements = catalog.nested.get(item.nestedPath);
    if (!elements) return { error: `${where}.nestedPath: unknown nested path ${JSON.stringify(item.nestedPath)}` };
    const column = resolveColumn(elements, item.nestedProperty);
    if (!column) return { error: `${where}.nestedProperty: unknown property ${JSON.stringify(item.nestedProperty)}` };
    return { ok: { column, arrayPath: item.nestedPath } };
  }
  const name = item.column ?? item.key;
  if (name === undefined) return { error: `${where}.column: required` };
  const column = resolveColumn(catalog, name);
  return column ? { ok: { column } } : { error: `${where}.column: unknown column ${JSON.stringify(name)}` };
}

const LIKE_TYPES: readonly ColumnType[] = ['string', 'uuid', 'any', 'date-time'];
const ORDERING: readonly Operator[] = ['GT', 'GTE', 'LT', 'LTE'];

function operatorProblem(op: Operator, column: Column): string | undefined {
  const like = op === 'LIKE' || op === 'NOT_LIKE';
  if ((like && !LIKE_TYPES.includes(column.type)) || (column.type === 'boolean' && ORDERING.includes(op))) {
    return `${op} does not apply to ${column.type} column ${JSON.stringify(column.path)}`;
  }
  return undefined;
}

type Operand = { value?: Scalar; values?: readonly Scalar[]; like?: LikePattern };

/** The bounds keep every store's matching cheap whatever the value (see likePattern). */
function likeOperand(op: Operator, value: string, where: string): Outcome<Operand> {
  if (value.length > MAX_LIKE_LENGTH) {
    return { error: `${where}.value: a ${op} value is at most ${String(MAX_LIKE_LENGTH)} characters, not ${String(value.length)}` };
  }
  const { tokens, wildcards } = scanLike(value);
  if (wildcards > MAX_LIKE_WILDCARDS) {
    return {
      error: `${where}.value: a ${op} value has at most ${String(MAX_LIKE_WILDCARDS)} unescaped % and _, not ${String(wildcards)} (\\% and \\_ are literal)`,
    };
  }
  return { ok: { value, like: tokens } };
}

function operands(item: FilterItem, op: Operator, column: Column, where: string): Outcome<Operand> {
  if (op === 'IS_NULL' || op === 'IS_NOT_NULL') return { ok: {} };
  try {
    if (op === 'IN' || op === 'NOT_IN') {
      const raw = item.values ?? item.value?.split(',');
      if (raw === undefined || raw.length === 0) return { error: `${where}.values: ${op} needs values` };
      return { ok: { values: raw.map((v) => parseValue(column.type, v)) } };
    }
    if (item.value == null) return { error: `${where}.value: ${op} needs a value` };
    if (op === 'LIKE' || op === 'NOT_LIKE') return likeOperand(op, item.value, where);
    return { ok: { value: parseValue(column.type, item.value) } };
  } catch (e) {
    const expected = e instanceof TypeError ? e.message : 'a valid value';
    return {
      error: `${where}.value: ${JSON.stringify(item.value ?? item.values)} is not ${expected} (column ${column.path} is ${column.type})`,
    };
  }
}

function condition(item: FilterItem, index: number, catalog: ColumnCatalog): Outcome<Condition> {
  const where = `filter[${String(index)}]`;
  const op = (item.operator ?? 'EQ').toUpperCase();
  if (!isOperator(op)) return { error: `${where}.operator: unknown operator ${JSON.stringify(item.operator)}` };
  const located = locate(item, where, catalog);
  if ('error' in located) return located;
  const { column, arrayPath } = located.ok;
  const problem = operatorProblem(op, column);
  if (problem !== undefined) return { error: `${where}.operator: ${problem}` };
  const values = operands(item, op, column, where);
  if ('error' in values) return values;
  return arrayPath === undefined
    ? { ok: { kind: 'field', column, op, ...values.ok } }
    : { ok: { kind: 'nested', arrayPath, column, op, ...values.ok } };
}

/** Parses a Filtering against a catalogue; every problem is one line of a single 400. */
export function toQuery(filtering: Pick<Filtering, 'filter' | 'sort'>, catalog: ColumnCatalog, defaultSort: readonly string[]): Query {
  const errors: string[] = [];
  const conditions: Condition[] = [];
  filtering.filter.forEach((item, i) => {
    const r = condition(item, i, catalog);
    if ('ok' in r) conditions.push(r.ok);
    else errors.push(r.error);
  });
  const likes = conditions.filter((c) => c.op === 'LIKE' || c.op === 'NOT_LIKE').length;
  if (likes > MAX_LIKE_ITEMS) errors.push(`filter: at most ${String(MAX_LIKE_ITEMS)} LIKE and NOT_LIKE items, not ${String(likes)}`);
  const sort: SortKey[] = [];
  filtering.sort.forEach((s, i) => {
    const column = resolveColumn(catalog, s.column);
    if (!column) errors.push(`sort[${i}].column: unknown column ${JSON.stringify(s.column)}`);
    else if (column.array) errors.push(`sort[${i}].column: cannot sort by array column ${JSON.stringify(s.column)}`);
    else sort.push({ column, order: s.order });
  });
  if (errors.length > 0) throw invalidFilter(errors);
  for (const path of [...(sort.length === 0 ? defaultSort : []), 'id']) {
    const column = catalog.columns.get(path);
    if (column && !sort.some((k) => k.column.path === path)) sort.push({ column, order: 'ASC' });
  }
  return { conditions, sort };
}

/** An escaped wildcard or backslash, a wildcard, a run of plain text, or a backslash escaping
 * nothing (which stays a backslash, as it was before the escape existed). */
const LIKE_PIECE = /\\[\\%_]|[%_]|[^\\%_]+|\\/g;
const ANY: LikeToken = Object.freeze({ kind: 'any' });
const ONE: LikeToken = Object.freeze({ kind: 'one' });

function scanLike(value: string): { tokens: LikeToken[]; wildcards: number } {
  const tokens: LikeToken[] = [];
  let text = '';
  let wildcards = 0;
  for (const [piece] of value.matchAll(LIKE_PIECE)) {
    if (piece !== '%' && piece !== '_') {
      text += piece.length === 2 && piece.startsWith('\\') ? piece.charAt(1) : piece;
      continue;
    }
    if (text !== '') tokens.push({ kind: 'text', text });
    text = '';
    wildcards += 1;
    if (piece === '_') tokens.push(ONE);
    else if (tokens.at(-1)?.kind !== 'any') tokens.push(ANY);
  }
  if (text !== '') tokens.push({ kind: 'text', text });
  if (wildcards > 0) return { tokens, wildcards };
  return { tokens: tokens.length === 0 ? [ANY] : [ANY, ...tokens, ANY], wildcards };
}

/**
 * LIKE semantics shared by every store: case-insensitive, `%` any run, `_` one character, `\%`,
 * `\_` and `\\` a literal `%`, `_` and backslash; a value without an unescaped wildcard matches
 * as a substring. toQuery bounds the value's length and wildcards before any store sees it.
 */
export function likePattern(value: string): LikePattern {
  return scanLike(value).tokens;
}

/** What a store compares a condition with: IN's values or the one value, and for LIKE and
 * NOT_LIKE the parsed pattern (parsed here for a Query built by hand rather than by toQuery). */
export type Operands = { values: readonly Scalar[]; like: LikePattern | undefined };

export function operandsOf(c: Condition): Operands {
  const single = c.value === undefined ? [] : [c.value];
  const values = c.op === 'IN' || c.op === 'NOT_IN' ? (c.values ?? single) : single;
  const like = c.op === 'LIKE' || c.op === 'NOT_LIKE' ? (c.like ?? likePattern(String(c.value ?? ''))) : undefined;
  return { values, like };
}

/** A filter value's reading as a number, as the `any` type defines it. */
export function numericReading(value: Scalar): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value : undefined;
  if (typeof value === 'boolean' || value.trim() === '') return undefined;
  const n = Number(value);
  return Number.isFinite(n) ? n : undefined;
}

/** A filter value's reading as a boolean, as the `any` type defines it. */
export function booleanReading(value: Scalar): boolean | undefined {
  if (typeof value === 'boolean') return value;
  return value === 'true' ? true : value === 'false' ? false : undefined;
}

/** A parsed filter value as a column of that type stores it in a document. */
export function typedValue(type: Exclude<ColumnType, 'any'>, value: Scalar): string | number | boolean {
  switch (type) {
    case 'string':
    case 'uuid':
    case 'date-time':
      return String(value);
    case 'number':
    case 'integer':
      return typeof value === 'number' ? value : Number(value);
    case 'boolean':
      return value === true || value === 'true';
    default: {
      const _never: never = type;
      return _never;
    }
  }
}
