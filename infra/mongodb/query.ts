// The MongoDB read store's query language, pure so that an in-memory engine (mingo) runs exactly
// what the server would: the stored shape and its key codec, a Query compiled to a filter and a
// sort, the autocomplete pipeline, the version-guarded writes, checkpoints and leases. The SQLite
// store's comments define the semantics; the equivalence test replays every filtering fixture
// through both. Values only ever appear as operands of explicit operators ($eq, $in, $regex, …,
// $literal in expressions); field paths come from validated column paths only.
//
// LIKE here is a case-insensitive regular expression, and community MongoDB has no index that
// serves one: an index on the field lets the server test the regex against index keys instead of
// documents, but it still reads every key, anchored or not (only a case-sensitive `^literal` gets
// index bounds). There is no trigram index; a text index matches whole words (stemmed, with stop
// words), not substrings, so it cannot decide LIKE. What is used:
//   - contains (`%abc%`) and every other LIKE: the regex over the index keys or the documents,
//     bounded by QUERY_TIME_LIMIT_MS in the store;
//   - a pattern starting with literal text: the leading run of that text made of ASCII characters
//     that have no case (digits, punctuation, space: `2024-01%`, `100-%`) also becomes a range
//     `$gte`/`$lt` on the field, which the field's index serves; the regex still decides. Letters
//     would need a range per case variant, or a stored lowercase copy of each text path with its
//     own index (what the SQLite store's lower() index is). That copy is not kept: it would change
//     the stored shape, every write and the version-guarded replacement, and its folding would have
//     to equal the regex's case-insensitivity character by character. So a prefix with letters
//     and autocomplete read keys or documents as contains does.

import type { Document, DocumentWrite, Position, VersionedDocument } from '../../domain/ports.ts';
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
  type LikeToken,
  type Operands,
  type Operator,
  type OperatorShape,
  type PositiveOperator,
  type Query,
  type Scalar,
} from '../../domain/shared/filtering.ts';

/** A query document, update document or pipeline stage. */
export type MongoFilter = Record<string, unknown>;

export type SortPair = readonly [field: string, direction: 1 | -1];

/** One document of a read model collection. `doc` holds the document with its keys encoded (see
 * encodeKey), so internal fields never meet document fields; a tombstone has `doc: null`. */
export type StoredDocument = { _id: string; v: number; deleted: boolean; doc: Record<string, unknown> | null };

export type Checkpoint = { _id: string; position: string };

export type Lease = { _id: string; owner: string; expiresAt: Date };

export const CHECKPOINTS = 'checkpoints';
export const LEASES = 'leases';

const COLLECTION = /^[A-Za-z][A-Za-z0-9_]{0,62}$/;
const SEGMENT = /^[A-Za-z0-9_-]+$/;

/** Only live documents: every query, count and index filters on it. */
export const LIVE: MongoFilter = Object.freeze({ deleted: false });

export function collectionName(collection: string): string {
  if (!COLLECTION.test(collection)) throw new RangeError(`invalid collection name ${JSON.stringify(collection)}`);
  return `rm_${collection}`;
}

// ---------------------------------------------------------------------------------------------
// Key codec

/**
 * A document key as MongoDB accepts it: `%`, `.` and NUL percent-encoded, a leading `$` too, the
 * empty key as a lone `%`, and `_bsontype` (which the BSON serializer reads as a type tag) with its
 * underscore encoded. Every `%` of an encoded key starts an escape, so decoding is unambiguous; a
 * path segment (`[A-Za-z0-9_-]+`) other than `_bsontype` encodes to itself.
 */
export function encodeKey(key: string): string {
  if (key === '') return '%';
  if (key === '_bsontype') return '%5Fbsontype';
  const escaped = key.replace(/[%.\0]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0').toUpperCase()}`);
  return escaped.startsWith('$') ? `%24${escaped.slice(1)}` : escaped;
}

export function decodeKey(key: string): string {
  if (key === '%') return '';
  return key.replace(/%([0-9A-F]{2})/g, (_escape, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

type Ancestors = Set<object>;

function encodeArray(values: readonly unknown[], ancestors: Ancestors): unknown[] {
  // As JSON: a value without a JSON form is null inside an array.
  return values.map((v) => encodeValue(v, ancestors) ?? null);
}

function encodeObject(value: object, ancestors: Ancestors): Record<string, unknown> {
  const entries: [string, unknown][] = [];
  for (const [key, v] of Object.entries(value)) {
    const encoded = encodeValue(v, ancestors);
    if (encoded !== undefined) entries.push([encodeKey(key), encoded]);
  }
  // fromEntries defines own properties, so a `__proto__` key stays a key.
  return Object.fromEntries(entries);
}

function jsonForm(value: unknown): unknown {
  if (typeof value !== 'object' || value === null || !('toJSON' in value)) return value;
  const toJSON = value.toJSON;
  return typeof toJSON === 'function' ? (toJSON as (this: object) => unknown).call(value) : value;
}

/** The stored form of a JSON value, read as JSON.stringify would (toJSON first, non-finite numbers
 * as null); undefined when it has no JSON form. */
function encodeValue(value: unknown, ancestors: Ancestors): unknown {
  const json = jsonForm(value);
  if (json === null || typeof json === 'string' || typeof json === 'boolean') return json;
  if (typeof json === 'number') return Number.isFinite(json) ? json : null;
  if (typeof json === 'bigint') throw new TypeError('cannot store a bigint in a document');
  if (typeof json !== 'object') return undefined;
  if (ancestors.has(json)) throw new TypeError('cannot store a circular structure');
  ancestors.add(json);
  try {
    return Array.isArray(json) ? encodeArray(json, ancestors) : encodeObject(json, ancestors);
  } finally {
    ancestors.delete(json);
  }
}

/** The document as stored: keys encoded, as JSON would read it; throws on a circular structure. */
export function encodeDocument(doc: Document): Record<string, unknown> {
  return encodeValue(doc, new Set()) as Record<string, unknown>;
}

function decodeValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(decodeValue);
  if (value === null || typeof value !== 'object' || value instanceof Date) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [decodeKey(k), decodeValue(v)]));
}

export function decodeDocument(stored: Record<string, unknown>): Document {
  return decodeValue(stored) as Document;
}

// ---------------------------------------------------------------------------------------------
// Paths

function encodedSegments(path: string): string[] {
  const segments = path.split('.');
  if (!segments.every((s) => SEGMENT.test(s))) throw new RangeError(`invalid document path ${JSON.stringify(path)}`);
  return segments.map(encodeKey);
}

/** The stored field of a document path, as pipelines read it. */
export function fieldOf(path: string): string {
  return `doc.${encodedSegments(path).join('.')}`;
}

/** Where a condition reads a column: `id` at the document root is the stored `_id`. */
type Target = {
  field: string;
  /** The fields above it (`doc.a`, `doc.a.b` for `doc.a.b.c`). */
  parents: string[];
};

function targetOf(path: string, atDocumentRoot: boolean): Target {
  if (atDocumentRoot && path === 'id') return { field: '_id', parents: [] };
  const prefix = atDocumentRoot ? ['doc'] : [];
  const segments = [...prefix, ...encodedSegments(path)];
  const parents = segments.slice(prefix.length, -1).map((_s, i) => segments.slice(0, prefix.length + i + 1).join('.'));
  return { field: segments.join('.'), parents };
}

// ---------------------------------------------------------------------------------------------
// Values

const REGEX_META = /[\\^$.|?*+()[\]{}\0]/g;

/** Text matched literally by a regular expression, in PCRE (the server) and JavaScript alike. */
export function regexLiteral(text: string): string {
  return text.replace(REGEX_META, (c) => (c === '\0' ? '\\x00' : `\\${c}`));
}

/** Case-insensitive, and `.` also matches a line break, as `_` does in LIKE. */
export const REGEX_OPTIONS = 'is';

const ANY_CHAR = '[\\s\\S]';

/** Text and `_` between two `%` (or an end): a fixed number of characters. */
const segmentRegex = (tokens: readonly LikeToken[]): string =>
  tokens.map((t) => (t.kind === 'text' ? regexLiteral(t.text) : ANY_CHAR)).join('');

/**
 * LIKE as a regular expression matched against the whole value, that no engine can make
 * backtrack more than linearly (`.*a.*a.*a…$` takes exponential time on a long run of `a`s). The
 * pattern splits at its `%` into fixed-length segments: the first is matched at the start; each
 * middle one at its leftmost occurrence, committed by a lookahead (atomic in PCRE and JavaScript
 * alike) captured and consumed by a backreference, so a later failure never retries it elsewhere;
 * leftmost is enough because a segment of fixed length found earlier leaves more room to the
 * rest. The last, unless a `%` ends the pattern, must end the value: `(?![\s\S])` rather than `$`,
 * which in PCRE also matches before a final line break. A backreference is always followed by `(`,
 * `[` or the end, never by a digit that would extend its number.
 */
export function likeRegex(pattern: LikePattern): string {
  const segments: LikeToken[][] = [[]];
  for (const token of pattern) {
    if (token.kind === 'any') segments.push([]);
    else segments[segments.length - 1]?.push(token);
  }
  const [first = '', ...rest] = segments.map(segmentRegex);
  const last = rest.pop();
  // Contains (`%text%`): the text alone, unanchored. The engine tries it at each start as the lazy
  // lookahead would, and every engine accepts it, FerretDB's too (Go's RE2 has no lookahead).
  if (first === '' && rest.length === 1 && last === '') return rest[0] ?? '';
  const middle = rest.map((segment, i) => `(?=(${ANY_CHAR}*?${segment}))\\${String(i + 1)}`).join('');
  const end = last === undefined ? '(?![\\s\\S])' : last === '' ? '' : `${ANY_CHAR}*${last}(?![\\s\\S])`;
  return `^${first}${middle}${end}`;
}

// ---------------------------------------------------------------------------------------------
// Conditions

const COMPARISON = { GT: '$gt', GTE: '$gte', LT: '$lt', LTE: '$lte' } as const;

function membership(field: string, values: readonly unknown[]): MongoFilter {
  const [only] = values;
  return values.length === 1 ? { [field]: { $eq: only } } : { [field]: { $in: [...values] } };
}

/** A character a case-insensitive regex matches by itself alone: ASCII but letters (and not NUL). */
const isCaseless = (c: string): boolean => {
  const code = c.charCodeAt(0);
  return code > 0 && code < 0x80 && !/[A-Za-z]/.test(c);
};

/**
 * The range of strings holding every value a pattern accepts, when the pattern starts with
 * literal characters that have no case: every accepted value starts with them, and the strings
 * starting with a prefix are those from the prefix (inclusive) to the prefix with its last
 * character incremented (exclusive), in MongoDB's binary string order as in any other.
 */
export function caselessPrefixRange(pattern: LikePattern): { $gte: string; $lt: string } | undefined {
  let literal = '';
  for (const token of pattern) {
    if (token.kind !== 'text') break;
    literal += token.text;
  }
  let prefix = '';
  for (const c of literal) {
    if (!isCaseless(c)) break;
    prefix += c;
  }
  if (prefix === '') return undefined;
  return { $gte: prefix, $lt: `${prefix.slice(0, -1)}${String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1)}` };
}

function like(field: string, pattern: LikePattern | undefined): MongoFilter {
  if (pattern === undefined) throw new TypeError('a LIKE condition without its pattern');
  const regex = { [field]: { $regex: likeRegex(pattern), $options: REGEX_OPTIONS } };
  const range = caselessPrefixRange(pattern);
  // The range only narrows (an index serves it); the regex decides.
  return range === undefined ? regex : { $and: [{ [field]: range }, regex] };
}

function typedPositive(
  field: string,
  type: Exclude<ColumnType, 'any'>,
  op: PositiveOperator,
  { values, like: pattern }: Operands,
): MongoFilter {
  switch (op) {
    case 'EQ':
    case 'IN':
      return membership(
        field,
        values.map((v) => typedValue(type, v)),
      );
    case 'LIKE':
      return like(field, pattern);
    case 'GT':
    case 'GTE':
    case 'LT':
    case 'LTE':
      return { [field]: { [COMPARISON[op]]: typedValue(type, values[0] ?? '') } };
    default: {
      const _never: never = op;
      return _never;
    }
  }
}

/** The `any` type's equality: one `$in` holding each value's string, numeric and boolean reading;
 * MongoDB compares across types never, and numbers by value, as the SQLite store does. */
function anyMembership(field: string, values: readonly Scalar[]): MongoFilter {
  const readings = [
    ...values.map(String),
    ...values.map(numericReading).filter((n) => n !== undefined),
    ...values.map(booleanReading).filter((b) => b !== undefined),
  ];
  return membership(field, [...new Set(readings)]);
}

function anyPositive(field: string, op: PositiveOperator, { values, like: pattern }: Operands): MongoFilter {
  switch (op) {
    case 'EQ':
    case 'IN':
      return anyMembership(field, values);
    case 'LIKE':
      return like(field, pattern);
    case 'GT':
    case 'GTE':
    case 'LT':
    case 'LTE': {
      // A string bound only orders strings and a number only numbers, so each branch keeps to its type.
      const value = values[0] ?? '';
      const byString = { [field]: { [COMPARISON[op]]: String(value) } };
      const n = numericReading(value);
      return n === undefined ? byString : { $or: [byString, { [field]: { [COMPARISON[op]]: n } }] };
    }
    default: {
      const _never: never = op;
      return _never;
    }
  }
}

function positive(field: string, type: ColumnType, op: PositiveOperator, operands: Operands): MongoFilter {
  return type === 'any' ? anyPositive(field, op, operands) : typedPositive(field, type, op, operands);
}

const notArray = (field: string): MongoFilter => ({ [field]: { $not: { $type: 'array' } } });
const both = (...filters: MongoFilter[]): MongoFilter => ({ $and: filters });
const not = (filter: MongoFilter): MongoFilter => ({ $nor: [filter] });

/**
 * A typed column. On a scalar, negations hold for a missing or null value, as `$ne`/`$nin` do. An
 * array column holds a condition when some element does (MongoDB's implicit array traversal; a
 * scalar counts as its own single element) and a negation when none does; IS_NOT_NULL there means
 * a non-null element: an array with one, or a non-null scalar.
 */
function typedCondition(field: string, column: Column, shape: OperatorShape, operands: Operands): MongoFilter {
  switch (shape.kind) {
    case 'null': {
      if (!column.array) return { [field]: shape.isNull ? { $eq: null } : { $ne: null } };
      const nonNull = { $or: [{ [field]: { $elemMatch: { $ne: null } } }, both({ [field]: { $ne: null } }, notArray(field))] };
      return shape.isNull ? not(nonNull) : nonNull;
    }
    case 'positive':
      return positive(field, column.type, shape.op, operands);
    case 'negated':
      return not(positive(field, column.type, shape.op, operands));
    default: {
      const _never: never = shape;
      return _never;
    }
  }
}

/**
 * A path below a free-form map may meet arrays, which MongoDB would search element by element.
 * The SQLite store reads a JSON path: an array on the way makes the value null, and an array at
 * the end is a value that equals, matches and orders against no scalar (yet is not null).
 */
function anyCondition(target: Target, shape: OperatorShape, operands: Operands): MongoFilter {
  const { field, parents } = target;
  const reachable = parents.map(notArray);
  switch (shape.kind) {
    case 'null': {
      const present = both(...reachable, { $or: [{ [field]: { $type: 'array' } }, { [field]: { $ne: null } }] });
      return shape.isNull ? not(present) : present;
    }
    case 'positive':
      return both(...reachable, notArray(field), anyPositive(field, shape.op, operands));
    case 'negated':
      return not(both(...reachable, notArray(field), anyPositive(field, shape.op, operands)));
    default: {
      const _never: never = shape;
      return _never;
    }
  }
}

function fieldCondition(column: Column, atDocumentRoot: boolean, op: Operator, operands: Operands): MongoFilter {
  const target = targetOf(column.path, atDocumentRoot);
  const shape = shapeOf(op);
  if (!column.array && column.type === 'any') return anyCondition(target, shape, operands);
  return typedCondition(target.field, column, shape, operands);
}

/**
 * A nested condition holds when one element of the array matches it as a whole: `$elemMatch`,
 * which skips scalar elements as the SQLite store skips non-objects. (An element that is itself
 * an array is read by MongoDB as a document with no such property, where SQLite skips it.)
 */
function condition(c: Condition): MongoFilter {
  const operands = operandsOf(c);
  if (c.kind === 'field') return fieldCondition(c.column, true, c.op, operands);
  return { [targetOf(c.arrayPath, true).field]: { $elemMatch: fieldCondition(c.column, false, c.op, operands) } };
}

/** The filter of a find or count: live documents meeting every condition. */
export function compileFilter(query: Query): MongoFilter {
  // An empty $or is refused by MongoDB: no alternative is a filter nothing meets.
  const groups = (query.anyOf ?? []).map((group): MongoFilter =>
    group.length === 0 ? { _id: { $in: [] } } : { $or: group.map((all) => (all.length === 0 ? {} : { $and: all.map(condition) })) },
  );
  if (query.conditions.length === 0 && groups.length === 0) return LIVE;
  return { $and: [LIVE, ...query.conditions.map(condition), ...groups] };
}

/** A keyset page of a scan: live documents after `after` in `_id` order (the `_id` index), only
 * those a query's conditions select when one is given (its sort ignored). */
export function compileScan(after: string | undefined, query?: Query): { filter: MongoFilter; sort: SortPair[] } {
  const sort: SortPair[] = [['_id', 1]];
  if (query === undefined) return { filter: after === undefined ? LIVE : { deleted: false, _id: { $gt: after } }, sort };
  const selected = compileFilter(query);
  return { filter: after === undefined ? selected : { $and: [selected, { _id: { $gt: after } }] }, sort };
}

/** The sort keys in order, `_id` last unless the query sorts by id. MongoDB orders missing and
 * null first ascending and last descending, as SQLite orders NULL, then numbers, then strings
 * (binary), then booleans. Not alike: booleans mixed with numbers at one path (SQLite sorts them as
 * 0 and 1 among the numbers), and arrays or objects met at a sort path (SQLite sorts their JSON
 * text among the strings; MongoDB an array by its least or greatest element). */
export function compileSort(query: Query): SortPair[] {
  const pairs: SortPair[] = [];
  for (const key of query.sort) {
    const { field } = targetOf(key.column.path, true);
    if (!pairs.some(([f]) => f === field)) pairs.push([field, key.order === 'DESC' ? -1 : 1]);
  }
  if (!pairs.some(([f]) => f === '_id')) pairs.push(['_id', 1]);
  return pairs;
}

/** A sort spec as a document, for pipelines; field names never look like array indexes, so the
 * object keeps their order. */
export const sortDocument = (pairs: readonly SortPair[]): Record<string, 1 | -1> => Object.fromEntries(pairs);

// ---------------------------------------------------------------------------------------------
// Autocomplete

/** Upper and lower case of the 26 ASCII letters. */
const ASCII_CASES = Array.from({ length: 26 }, (_letter, i) => [String.fromCharCode(0x41 + i), String.fromCharCode(0x61 + i)]);

/** ASCII-only lower case, SQLite's NOCASE. `$toLower` leaves other characters undefined (and an
 * in-memory engine lowers them all), so the 26 letters are replaced one by one. */
function asciiLower(expression: string): MongoFilter {
  const replace = {
    $replaceAll: { input: '$$value', find: { $arrayElemAt: ['$$this', 0] }, replacement: { $arrayElemAt: ['$$this', 1] } },
  };
  return { $reduce: { input: { $literal: ASCII_CASES }, initialValue: expression, in: replace } };
}

const regexMatch = (input: string, regex: string): MongoFilter => ({
  $regexMatch: { input, regex: { $literal: regex }, options: REGEX_OPTIONS },
});

/** The path's values as an array: its elements when it is an array, else itself. */
function elementsOf(field: string): MongoFilter {
  return { $cond: { if: { $isArray: `$${field}` }, then: `$${field}`, else: [`$${field}`] } };
}

/**
 * Distinct string values of the paths (array elements one by one) containing `term`, values
 * starting with it first, then case-insensitively alphabetical (ASCII folding), then binary.
 */
export function compileAutocomplete(paths: readonly string[], term: string, limit: number): MongoFilter[] {
  const fields = [...new Set(paths)].map(fieldOf);
  const contains = regexLiteral(term);
  return [
    { $match: { $and: [LIVE, { $or: fields.map((f) => ({ [f]: { $regex: contains, $options: REGEX_OPTIONS } })) }] } },
    { $project: { _id: 0, value: { $concatArrays: fields.map(elementsOf) } } },
    { $unwind: '$value' },
    { $match: { $expr: { $cond: { if: { $eq: [{ $type: '$value' }, 'string'] }, then: regexMatch('$value', contains), else: false } } } },
    { $group: { _id: '$value' } },
    { $project: { prefix: regexMatch('$_id', `^${contains}`), folded: asciiLower('$_id') } },
    { $sort: { prefix: -1, folded: 1, _id: 1 } },
    { $limit: Math.max(1, Math.floor(limit)) },
  ];
}

// ---------------------------------------------------------------------------------------------
// Writes, checkpoints, leases

export type VersionedWrite = { filter: MongoFilter; replacement: Omit<StoredDocument, '_id'> };

/** A document of a bulk load as stored (throws on a document that cannot be stored). */
export function storedDocument({ id, version, doc }: VersionedDocument): StoredDocument {
  return { _id: id, v: version, deleted: doc === null, doc: doc === null ? null : encodeDocument(doc) };
}

/**
 * A replace-with-upsert that applies only over an older version. Over the same or a newer one the
 * filter misses and the upsert's insert of the same `_id` fails with a duplicate key (11000): a
 * replay changes nothing, not even a tombstone.
 */
export function versionedWrite(write: DocumentWrite): VersionedWrite {
  // A repair (re-folded from the log) may write the stored version again.
  const filter = { _id: { $eq: write.id }, v: write.repair === true ? { $lte: write.version } : { $lt: write.version } };
  switch (write.kind) {
    case 'upsert':
      return { filter, replacement: { v: write.version, deleted: false, doc: encodeDocument(write.doc) } };
    case 'delete':
      return { filter, replacement: { v: write.version, deleted: true, doc: null } };
    default: {
      const _never: never = write;
      throw new TypeError(`unknown write ${JSON.stringify(_never)}`);
    }
  }
}

/** Positions are bigints (KurrentDB's reach 2^128): stored as fixed-width decimal strings, whose
 * string order is their numeric order, so `$max` keeps a checkpoint monotone. */
const POSITION_DIGITS = 40;

export function encodePosition(position: Position): string {
  const digits = position.toString();
  if (position < 0n || digits.length > POSITION_DIGITS) throw new RangeError(`position out of range: ${digits}`);
  return digits.padStart(POSITION_DIGITS, '0');
}

export function decodePosition(stored: unknown): Position {
  if (typeof stored !== 'string' || !/^\d+$/.test(stored)) return 0n;
  return BigInt(stored);
}

export const checkpointUpdate = (position: Position): MongoFilter => ({ $max: { position: encodePosition(position) } });

/** Matches the lease when it is `owner`'s or has lapsed by the server's clock; with an upsert, a
 * missing lease is created and one held by another fails the insert with a duplicate key. */
export function leaseFilter(projection: string, owner: string): MongoFilter {
  return { _id: { $eq: projection }, $expr: { $or: [{ $eq: ['$owner', { $literal: owner }] }, { $lte: ['$expiresAt', '$$NOW'] }] } };
}

export function leaseUpdate(owner: string, ttlMs: number): MongoFilter[] {
  if (!Number.isFinite(ttlMs) || ttlMs < 0) throw new RangeError(`invalid lease duration ${String(ttlMs)}`);
  return [{ $set: { owner: { $literal: owner }, expiresAt: { $add: ['$$NOW', { $literal: ttlMs }] } } }];
}

/**
 * The same lease for a server that runs no update pipeline (FerretDB): the server's clock read
 * just before (`now`, its `hello.localTime`) stands in for `$$NOW`. A reading taken earlier than
 * the write only shortens the lease it grants and delays a takeover, never the reverse.
 */
export function leaseFilterAt(projection: string, owner: string, now: Date): MongoFilter {
  return { _id: { $eq: projection }, $or: [{ owner: { $eq: owner } }, { expiresAt: { $lte: now } }] };
}

export function leaseUpdateAt(owner: string, ttlMs: number, now: Date): MongoFilter {
  if (!Number.isFinite(ttlMs) || ttlMs < 0) throw new RangeError(`invalid lease duration ${String(ttlMs)}`);
  return { $set: { owner, expiresAt: new Date(now.getTime() + ttlMs) } };
}

export const leaseOwnedBy = (projection: string, owner: string): MongoFilter => ({ _id: { $eq: projection }, owner: { $eq: owner } });

// ---------------------------------------------------------------------------------------------
// Indexes

export type IndexSpec = { name: string; key: Record<string, 1>; partialFilterExpression: MongoFilter };

/** One index per declared path, with `_id` after it so that a sort on the path needs no sort step;
 * partial on live documents, which every query asks for. */
export function indexSpec(path: string): IndexSpec {
  const field = fieldOf(path);
  return { name: `${field}_1__id_1`, key: { [field]: 1, _id: 1 }, partialFilterExpression: LIVE };
}
