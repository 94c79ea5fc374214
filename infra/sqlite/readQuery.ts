// Queries of the embedded read store compiled to SQL, every value bound as a parameter; document
// paths reach the SQL text only as validated JSON paths (readSchema.ts).

import type { SQLInputValue } from 'node:sqlite';
import {
  booleanReading,
  numericReading,
  operandsOf,
  typedValue,
  shapeOf,
  type Column,
  type ColumnType,
  type Condition,
  type LikePattern,
  type Operands,
  type Operator,
  type PositiveOperator,
  type Query,
  type Scalar,
} from '../../domain/shared/filtering.ts';
import { likeCheck, likeSql, prefixRange, trigramMatch } from './likeIndex.ts';
import { NO_SEARCH_INDEXES, fieldValue, jsonPath, loweredValue, quoted, type SearchIndexes } from './readSchema.ts';

/** A value reachable by a condition: its SQL value and its JSON type (`json_type` vocabulary). */
type Target = { value: string; type: string };

export type Compiled = { where: string; orderBy: string; params: SQLInputValue[] };

function fieldTarget(root: string, atDocumentRoot: boolean, path: string): Target {
  if (atDocumentRoot && path === 'id') return { value: 'id', type: `'text'` };
  const p = jsonPath(path);
  return { value: atDocumentRoot ? fieldValue(path) : `json_extract(${root}, ${p})`, type: `json_type(${root}, ${p})` };
}

/** The value as the stored JSON of a column of that type reads back from SQLite: json_extract reads
 * JSON true/false as 1/0. */
function bindable(type: Exclude<ColumnType, 'any'>, value: Scalar): string | number {
  const typed = typedValue(type, value);
  return typeof typed === 'boolean' ? Number(typed) : typed;
}

const ANYTHING: LikePattern = [{ kind: 'any' }];
export const containing = (term: string): LikePattern =>
  term === '' ? ANYTHING : [{ kind: 'any' }, { kind: 'text', text: term }, { kind: 'any' }];
export const startingWith = (term: string): LikePattern => (term === '' ? ANYTHING : [{ kind: 'text', text: term }, { kind: 'any' }]);

/** Characters of a value a LIKE reads: a description's full length (4,000). */
export const LIKE_WINDOW = 4000;

export class Compiler {
  readonly params: SQLInputValue[] = [];
  private aliases = 0;
  private readonly indexes: SearchIndexes;

  constructor(indexes: SearchIndexes = NO_SEARCH_INDEXES) {
    this.indexes = indexes;
  }

  alias(prefix: string): string {
    this.aliases += 1;
    return `${prefix}${String(this.aliases)}`;
  }

  bind(value: SQLInputValue): string {
    this.params.push(value);
    return '?';
  }

  /** One value as `= ?`, several through one JSON array so the statement text stays the same. */
  membership(expr: string, values: readonly (string | number)[]): string {
    const [only] = values;
    if (values.length === 1 && only !== undefined) return `${expr} = ${this.bind(only)}`;
    return `${expr} IN (SELECT value FROM json_each(${this.bind(JSON.stringify(values))}))`;
  }

  /** The exact check of a pattern (see likeCheck); native LIKE is fast for the patterns toQuery lets
   * through (its work is bounded by the value's length times the pattern's). It reads the first
   * LIKE_WINDOW characters of a value: what one LIKE costs per row is then bounded whatever a
   * record holds (a template's content runs to 500,000 characters), so no filter of a viewer can
   * hold the service for seconds. */
  like(value: string, pattern: LikePattern): string {
    // substr stops at a NUL in the value; rm_like takes the whole value and cuts it itself.
    const expr = `substr(${value}, 1, ${String(LIKE_WINDOW)})`;
    const sql = likeSql(pattern);
    const check = likeCheck(pattern);
    switch (check) {
      case 'matcher':
        return `rm_like(${value}, ${this.bind(sql)})`;
      case 'native':
        return `${expr} LIKE ${this.bind(sql)} ESCAPE '\\'`;
      case 'folded':
        return `rm_fold(${expr}) LIKE ${this.bind(sql.toLowerCase())} ESCAPE '\\'`;
      default: {
        const _never: never = check;
        return _never;
      }
    }
  }

  /**
   * What a document-root path's indexes narrow a LIKE to before its exact check: a range of the
   * lowercase index for literal text at the start, else the rows of the trigram index holding the
   * pattern's trigrams. Either keeps every row the check accepts (likeIndex.ts).
   */
  narrowing(path: string, pattern: LikePattern): string[] {
    const range = this.indexes.lower(path) ? prefixRange(pattern) : undefined;
    if (range !== undefined) {
      const lowered = loweredValue(path);
      return [`${lowered} >= ${this.bind(range.from)}`, `${lowered} < ${this.bind(range.to)}`];
    }
    const trigram = this.indexes.trigram(path);
    const match = trigram === undefined ? undefined : trigramMatch(pattern);
    if (trigram === undefined || match === undefined) return [];
    return [`rowid IN (SELECT rowid FROM ${quoted(trigram)} WHERE ${quoted(trigram)} MATCH ${this.bind(match)})`];
  }

  positive(t: Target, type: ColumnType, op: PositiveOperator, { values, like: pattern }: Operands): string {
    switch (op) {
      case 'EQ':
      case 'IN':
        if (type === 'any') return this.anyMembership(t, values);
        return this.membership(
          t.value,
          values.map((v) => bindable(type, v)),
        );
      case 'LIKE': {
        if (pattern === undefined) throw new TypeError('a LIKE condition without its pattern');
        const like = this.like(t.value, pattern);
        return type === 'any' ? `(${t.type} = 'text' AND ${like})` : like;
      }
      case 'GT':
      case 'GTE':
      case 'LT':
      case 'LTE': {
        const cmp = { GT: '>', GTE: '>=', LT: '<', LTE: '<=' }[op];
        const value = values[0] ?? '';
        if (type !== 'any') return `${t.value} ${cmp} ${this.bind(bindable(type, value))}`;
        // SQLite orders every number below every string, so each branch keeps to its own type.
        const parts = [`(${t.type} = 'text' AND ${t.value} ${cmp} ${this.bind(String(value))})`];
        const n = numericReading(value);
        if (n !== undefined) parts.push(`(${t.type} IN ('integer', 'real') AND ${t.value} ${cmp} ${this.bind(n)})`);
        return `(${parts.join(' OR ')})`;
      }
      default: {
        const _never: never = op;
        return _never;
      }
    }
  }

  /** The `any` type's equality: a stored string, number or boolean each by its own reading. */
  anyMembership(t: Target, values: readonly Scalar[]): string {
    // json_extract reads an array or object as its JSON text, which must not equal a string value.
    const parts = [`(${t.type} = 'text' AND ${this.membership(t.value, values.map(String))})`];
    const numbers = values.map(numericReading).filter((n): n is number => n !== undefined);
    // A JSON boolean reads as 1/0, so only a stored JSON number may match a numeric reading.
    if (numbers.length > 0) parts.push(`(${this.membership(t.value, numbers)} AND ${t.type} IN ('integer', 'real'))`);
    const booleans = [...new Set(values.map(booleanReading).filter((b) => b !== undefined))];
    if (booleans.length > 0) parts.push(`${t.type} IN (${booleans.map((b) => `'${String(b)}'`).join(', ')})`);
    return `(${parts.join(' OR ')})`;
  }

  /**
   * A condition on a field below `root`. Negations follow MongoDB: NOT_EQ, NOT_IN and NOT_LIKE hold
   * for a missing or null scalar (as `$ne`/`$nin` do), and for an array when no element matches.
   * IS_NULL holds for a missing or null scalar, and for an array with no non-null element.
   */
  field(root: string, atDocumentRoot: boolean, column: Column, op: Operator, operands: Operands): string {
    const shape = shapeOf(op);
    if (column.array) {
      const e = this.alias('e');
      const element: Target = { value: `${e}.value`, type: `${e}.type` };
      const exists = (negated: boolean, pred: string): string =>
        `${negated ? 'NOT ' : ''}EXISTS (SELECT 1 FROM json_each(${root}, ${jsonPath(column.path)}) AS ${e} WHERE ${pred})`;
      if (shape.kind === 'null') return exists(shape.isNull, `${e}.type <> 'null'`);
      return exists(shape.kind === 'negated', this.positive(element, column.type, shape.op, operands));
    }
    const t = fieldTarget(root, atDocumentRoot, column.path);
    if (shape.kind === 'null') return `${t.value} IS ${shape.isNull ? '' : 'NOT '}NULL`;
    // Bound before the check so the parameters follow the text's order. Under a negation the
    // narrowing only lets a row skip the check: `(0 AND …) IS NOT 1` holds without it.
    const narrowing =
      atDocumentRoot && shape.op === 'LIKE' && operands.like !== undefined ? this.narrowing(column.path, operands.like) : [];
    const positive = [...narrowing, this.positive(t, column.type, shape.op, operands)].join(' AND ');
    return shape.kind === 'negated' ? `(${positive}) IS NOT 1` : positive;
  }

  /**
   * A nested condition holds when one element of the array matches it as a whole, like MongoDB's
   * `$elemMatch`; NOT_EQ therefore means "some element differs". Elements that are not objects
   * never match (and must not reach json_extract, which rejects a bare string).
   */
  condition(c: Condition): string {
    const operands = operandsOf(c);
    if (c.kind === 'field') return this.field('doc', true, c.column, c.op, operands);
    const n = this.alias('n');
    const inner = this.field(`${n}.value`, false, c.column, c.op, operands);
    return `EXISTS (SELECT 1 FROM json_each(doc, ${jsonPath(c.arrayPath)}) AS ${n} WHERE CASE WHEN ${n}.type = 'object' THEN (${inner}) END)`;
  }
}

/** A sort key is constant over the result when a typed equality pins its field; SQLite cannot see
 * that through an expression index, and dropping it lets the index deliver the id order. */
function pinnedPaths(conditions: readonly Condition[]): Set<string> {
  const pinned = new Set<string>();
  for (const c of conditions) {
    if (c.kind !== 'field' || c.column.array || c.column.type === 'any') continue;
    if (c.op === 'EQ' || (c.op === 'IN' && c.values?.length === 1)) pinned.add(c.column.path);
  }
  return pinned;
}

export function compile(query: Query, indexes: SearchIndexes = NO_SEARCH_INDEXES): Compiled {
  const compiler = new Compiler(indexes);
  // Compiled in the order of the text: each binds its parameters as it goes.
  const conditions = query.conditions.map((c) => compiler.condition(c));
  const alternatives = (query.anyOf ?? []).map((group) =>
    group.length === 0
      ? '0'
      : `(${group.map((all) => (all.length === 0 ? '1' : `(${all.map((c) => compiler.condition(c)).join(' AND ')})`)).join(' OR ')})`,
  );
  const where = ['deleted = 0', ...conditions, ...alternatives].join(' AND ');
  const pinned = pinnedPaths(query.conditions);
  const keys = query.sort.some((k) => k.column.path === 'id')
    ? query.sort
    : [...query.sort, { column: { path: 'id', type: 'string', array: false } satisfies Column, order: 'ASC' as const }];
  // SQLite puts NULLs first ascending and last descending, as MongoDB orders missing and null.
  const orderBy = keys
    .filter((k) => !pinned.has(k.column.path))
    .map((k) => `${fieldValue(k.column.path)}${k.order === 'DESC' ? ' DESC' : ''}`)
    .join(', ');
  return { where, orderBy: orderBy === '' ? '' : ` ORDER BY ${orderBy}`, params: compiler.params };
}
