// The embedded read store: one table per collection holding each document as JSONB, with
// expression indexes on the paths a resource filters and sorts by. Queries compile to SQL with every
// value bound as a parameter; document paths reach the SQL text only as validated JSON paths.

import { createHash } from 'node:crypto';
import { DatabaseSync, type SQLInputValue, type SQLOutputValue, type StatementSync } from 'node:sqlite';
import type { Document, DocumentWrite, Page, Position, ReadStore } from '../../domain/ports.ts';
import {
  booleanReading,
  likePattern,
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
import { likeMatcher, type LikeMatcher } from './likeMatcher.ts';

const COLLECTION = /^[A-Za-z][A-Za-z0-9_]{0,62}$/;
const SEGMENT = /^[A-Za-z0-9_-]+$/;
const BARE_SEGMENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
const ASCII = /^\p{ASCII}*$/u;
const STATEMENT_CACHE_SIZE = 500;
/** rm_like runs once per row: a query's few patterns are compiled once, not once per row. */
const LIKE_MATCHER_CACHE_SIZE = 64;

/** A value reachable by a condition: its SQL value and its JSON type (`json_type` vocabulary). */
type Target = { value: string; type: string };


type Compiled = { where: string; orderBy: string; params: SQLInputValue[] };

function tableName(collection: string): string {
  if (!COLLECTION.test(collection)) throw new RangeError(`invalid collection name ${JSON.stringify(collection)}`);
  return `"rm_${collection}"`;
}

/** The path as a SQL string literal of a JSON path; safe because segments cannot hold quotes. */
function jsonPath(path: string): string {
  const segments = path.split('.');
  if (!segments.every((s) => SEGMENT.test(s))) throw new RangeError(`invalid document path ${JSON.stringify(path)}`);
  return `'$${segments.map((s) => (BARE_SEGMENT.test(s) ? `.${s}` : `."${s}"`)).join('')}'`;
}

/**
 * The one spelling of a document field used by indexes and queries alike: SQLite matches an
 * expression index only against the same expression. `id` is the primary key column itself.
 */
function fieldValue(path: string): string {
  return path === 'id' ? 'id' : `json_extract(doc, ${jsonPath(path)})`;
}

function fieldTarget(root: string, atDocumentRoot: boolean, path: string): Target {
  if (atDocumentRoot && path === 'id') return { value: 'id', type: `'text'` };
  const p = jsonPath(path);
  return { value: atDocumentRoot ? fieldValue(path) : `json_extract(${root}, ${p})`, type: `json_type(${root}, ${p})` };
}

function indexName(collection: string, path: string): string {
  const hash = createHash('sha256').update(path).digest('hex').slice(0, 10);
  return `"rm_${collection}__${path.replace(/[^A-Za-z0-9_]/g, '_')}_${hash}"`;
}

/** The value as the stored JSON of a column of that type reads back from SQLite: json_extract reads
 * JSON true/false as 1/0. */
function bindable(type: Exclude<ColumnType, 'any'>, value: Scalar): string | number {
  const typed = typedValue(type, value);
  return typeof typed === 'boolean' ? Number(typed) : typed;
}

const escapeLiteral = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * A parsed pattern as the text of `LIKE … ESCAPE '\'`. That escape is the API's own for `\`, `%`
 * and `_`, and a parsed pattern always holds a wildcard, so the text is also a LIKE value that
 * likePattern reads back to the same pattern: rm_like rebuilds its matcher from it.
 */
function likeSql(pattern: LikePattern): string {
  return pattern.map((t) => (t.kind === 'text' ? escapeLiteral(t.text) : t.kind === 'any' ? '%' : '_')).join('');
}

/** Native LIKE's work per character of a value is at most this many comparisons. */
const NATIVE_LIKE_MAX_RUN = 16;

/** The longest run of characters a pattern compares after a `%` (where LIKE tries every position). */
function longestFloatingRun(pattern: LikePattern): number {
  let longest = 0;
  let run = 0;
  let floating = false;
  for (const t of pattern) {
    if (t.kind === 'any') {
      floating = true;
      run = 0;
    } else if (floating) {
      run += t.kind === 'text' ? t.text.length : 1;
      longest = Math.max(longest, run);
    }
  }
  return longest;
}

const ANYTHING: LikePattern = [{ kind: 'any' }];
const containing = (term: string): LikePattern => (term === '' ? ANYTHING : [{ kind: 'any' }, { kind: 'text', text: term }, { kind: 'any' }]);
const startingWith = (term: string): LikePattern => (term === '' ? ANYTHING : [{ kind: 'text', text: term }, { kind: 'any' }]);

class Compiler {
  readonly params: SQLInputValue[] = [];
  private aliases = 0;

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

  /**
   * SQLite's LIKE folds ASCII case only; an ASCII pattern can match other characters only through
   * wildcards, so native LIKE is exact for it, and any other pattern compares the
   * Unicode-lowercased value with the lowercased pattern instead. Native LIKE is fast for the
   * patterns toQuery lets through (its work is bounded by the value's length times the pattern's).
   */
  like(expr: string, pattern: LikePattern): string {
    const sql = likeSql(pattern);
    // SQLite's LIKE reads its pattern as a C string, so a NUL would end it early; and after each `%`
    // it tries the rest at every position, so a long run there costs the value's length times the
    // run's (a 250-character run: 50 ms per 100,000-character value): the linear matcher takes both.
    if (sql.includes('\0') || longestFloatingRun(pattern) > NATIVE_LIKE_MAX_RUN) return `rm_like(${expr}, ${this.bind(sql)})`;
    if (ASCII.test(sql)) return `${expr} LIKE ${this.bind(sql)} ESCAPE '\\'`;
    return `rm_fold(${expr}) LIKE ${this.bind(sql.toLowerCase())} ESCAPE '\\'`;
  }

  positive(t: Target, type: ColumnType, op: PositiveOperator, { values, like: pattern }: Operands): string {
    switch (op) {
      case 'EQ':
      case 'IN':
        if (type === 'any') return this.anyMembership(t, values);
        return this.membership(t.value, values.map((v) => bindable(type, v)));
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
    const positive = this.positive(t, column.type, shape.op, operands);
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

function compile(query: Query): Compiled {
  const compiler = new Compiler();
  const where = ['deleted = 0', ...query.conditions.map((c) => compiler.condition(c))].join(' AND ');
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

function parseDocument(value: SQLOutputValue | undefined): Document | null {
  if (typeof value !== 'string') return null;
  const parsed: unknown = JSON.parse(value);
  return parsed as Document;
}

/** Runs synchronous store work so that a throw becomes a rejection, as callers of the port expect. */
function settle<T>(work: () => T): Promise<T> {
  return new Promise((resolve) => {
    resolve(work());
  });
}

export class SqliteReadStore implements ReadStore {
  private readonly db: DatabaseSync;
  private readonly statements = new Map<string, StatementSync>();
  private readonly tables = new Set<string>();
  private readonly leases = new Map<string, { owner: string; expiresAt: number }>();
  private readonly likeMatchers = new Map<string, LikeMatcher>();

  constructor(path: string) {
    this.db = new DatabaseSync(path);
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec('PRAGMA synchronous = NORMAL');
    this.db.exec('PRAGMA busy_timeout = 5000');
    this.db.exec('PRAGMA optimize = 0x10002');
    this.db.exec('CREATE TABLE IF NOT EXISTS checkpoints (projection TEXT PRIMARY KEY, position INTEGER NOT NULL)');
    this.db.function('rm_fold', { deterministic: true }, (v) => (typeof v === 'string' ? v.toLowerCase() : v));
    this.db.function('rm_like', { deterministic: true }, (v, p) =>
      typeof v === 'string' && typeof p === 'string' ? Number(this.matcherOf(p)(v)) : null,
    );
  }

  /** The matcher of a pattern as likeSql writes it, most recently used kept. */
  private matcherOf(sql: string): LikeMatcher {
    let matcher = this.likeMatchers.get(sql);
    if (matcher) {
      this.likeMatchers.delete(sql);
    } else {
      matcher = likeMatcher(likePattern(sql));
      if (this.likeMatchers.size >= LIKE_MATCHER_CACHE_SIZE) {
        const oldest = this.likeMatchers.keys().next();
        if (oldest.done !== true) this.likeMatchers.delete(oldest.value);
      }
    }
    this.likeMatchers.set(sql, matcher);
    return matcher;
  }

  private statement(sql: string): StatementSync {
    let s = this.statements.get(sql);
    if (s) {
      this.statements.delete(sql);
    } else {
      s = this.db.prepare(sql);
      if (this.statements.size >= STATEMENT_CACHE_SIZE) {
        const oldest = this.statements.keys().next();
        if (oldest.done !== true) this.statements.delete(oldest.value);
      }
    }
    this.statements.set(sql, s);
    return s;
  }

  /** The collection's table, created on first use so reads of an undeclared collection are empty. */
  private table(collection: string): string {
    const table = tableName(collection);
    if (!this.tables.has(table)) {
      this.db.exec(
        `CREATE TABLE IF NOT EXISTS ${table} (id TEXT PRIMARY KEY, version INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, doc BLOB)`,
      );
      this.tables.add(table);
    }
    return table;
  }

  private transaction(work: () => void): void {
    this.db.exec('BEGIN IMMEDIATE');
    try {
      work();
      this.db.exec('COMMIT');
    } catch (e) {
      if (this.db.isTransaction) this.db.exec('ROLLBACK');
      throw e;
    }
  }

  ensureCollection(collection: string, indexedPaths: readonly string[]): Promise<void> {
    return settle(() => {
      const table = this.table(collection);
      for (const path of new Set(indexedPaths)) {
        if (path === 'id') continue;
        this.db.exec(
          `CREATE INDEX IF NOT EXISTS ${indexName(collection, path)} ON ${table} (${fieldValue(path)}, id) WHERE deleted = 0`,
        );
      }
    });
  }

  applyBatch(collection: string, writes: readonly DocumentWrite[], checkpoint: Position, projection = collection): Promise<void> {
    return settle(() => {
      const table = this.table(collection);
      // A replayed event carries a version at most the stored one and must change nothing, not
      // even a tombstone, so a deleted document is only brought back by a newer version.
      const upsert = this.statement(
        `INSERT INTO ${table} (id, version, deleted, doc) VALUES (?, ?, 0, jsonb(?))
         ON CONFLICT (id) DO UPDATE SET version = excluded.version, deleted = 0, doc = excluded.doc
         WHERE excluded.version > ${table}.version`,
      );
      const remove = this.statement(
        `INSERT INTO ${table} (id, version, deleted, doc) VALUES (?, ?, 1, NULL)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version, deleted = 1, doc = NULL
         WHERE excluded.version > ${table}.version`,
      );
      // Monotone, so a batch replayed after a crash cannot move the projector backwards.
      const advance = this.statement(
        `INSERT INTO checkpoints (projection, position) VALUES (?, ?)
         ON CONFLICT (projection) DO UPDATE SET position = excluded.position
         WHERE excluded.position > checkpoints.position`,
      );
      this.transaction(() => {
        for (const w of writes) {
          switch (w.kind) {
            case 'upsert':
              upsert.run(w.id, w.version, JSON.stringify(w.doc));
              break;
            case 'delete':
              remove.run(w.id, w.version);
              break;
            default: {
              const _never: never = w;
              throw new TypeError(`unknown write ${JSON.stringify(_never)}`);
            }
          }
        }
        advance.run(projection, checkpoint);
      });
    });
  }

  checkpoint(projection: string): Promise<Position> {
    return settle(() => {
      const s = this.statement('SELECT position FROM checkpoints WHERE projection = ?');
      s.setReadBigInts(true);
      const position = s.get(projection)?.position;
      return typeof position === 'bigint' ? position : 0n;
    });
  }

  getMany(collection: string, ids: readonly string[]): Promise<Map<string, { version: number; doc: Document | null }>> {
    return settle(() => {
      const found = new Map<string, { version: number; doc: Document | null }>();
      if (ids.length === 0) return found;
      const rows = this.statement(
        `SELECT id, version, json(doc) AS doc FROM ${this.table(collection)} WHERE id IN (SELECT value FROM json_each(?))`,
      ).all(JSON.stringify(ids));
      for (const row of rows) {
        found.set(String(row.id), { version: Number(row.version), doc: parseDocument(row.doc) });
      }
      return found;
    });
  }

  find(collection: string, query: Query, page: Page): Promise<Document[]> {
    return settle(() => {
      const { where, orderBy, params } = compile(query);
      const rows = this.statement(
        `SELECT json(doc) AS doc FROM ${this.table(collection)} WHERE ${where}${orderBy} LIMIT ? OFFSET ?`,
      ).all(...params, page.limit, page.offset);
      return rows.map((row) => parseDocument(row.doc)).filter((d): d is Document => d !== null);
    });
  }

  findIds(collection: string, query: Query, page: Page): Promise<string[]> {
    return settle(() => {
      const { where, orderBy, params } = compile(query);
      const rows = this.statement(`SELECT id FROM ${this.table(collection)} WHERE ${where}${orderBy} LIMIT ? OFFSET ?`).all(
        ...params,
        page.limit,
        page.offset,
      );
      return rows.map((row) => String(row.id));
    });
  }

  count(collection: string, query: Query): Promise<number> {
    return settle(() => {
      const { where, params } = compile(query);
      const row = this.statement(`SELECT count(*) AS n FROM ${this.table(collection)} WHERE ${where}`).get(...params);
      return Number(row?.n ?? 0);
    });
  }

  /** Prefix matches first, then substring matches, each in case-insensitive alphabetical order. */
  autocomplete(collection: string, paths: readonly string[], term: string, limit: number): Promise<string[]> {
    return settle(() => {
      if (paths.length === 0 || limit <= 0) return [];
      const table = this.table(collection);
      const compiler = new Compiler();
      // json_each reads a scalar as a single element, so array columns are searched the same way.
      const sources = [...new Set(paths)].map(
        (path) =>
          `SELECT e.value AS value FROM ${table} AS d, json_each(d.doc, ${jsonPath(path)}) AS e
           WHERE d.deleted = 0 AND e.type = 'text' AND ${compiler.like('e.value', containing(term))}`,
      );
      const prefix = compiler.like('value', startingWith(term));
      const rows = this.statement(
        `SELECT value FROM (${sources.join(' UNION ')}) ORDER BY (${prefix}) DESC, value COLLATE NOCASE, value LIMIT ?`,
      ).all(...compiler.params, limit);
      return rows.map((row) => String(row.value));
    });
  }

  size(collection: string): Promise<number> {
    return settle(() => {
      const row = this.statement(`SELECT count(*) AS n FROM ${this.table(collection)} WHERE deleted = 0`).get();
      return Number(row?.n ?? 0);
    });
  }

  reset(collection: string, projection: string): Promise<void> {
    return settle(() => {
      const table = this.table(collection);
      this.transaction(() => {
        this.statement(`DELETE FROM ${table}`).run();
        this.statement('DELETE FROM checkpoints WHERE projection = ?').run(projection);
      });
    });
  }

  /**
   * The embedded read models belong to one process (the embedded log tells only its own process of
   * appends), so leases live in memory: they arbitrate between projectors of this process, and a
   * restart after a crash does not wait for the dead process's lease to lapse.
   */
  tryLease(projection: string, owner: string, ttlMs: number): Promise<boolean> {
    const now = Date.now();
    const held = this.leases.get(projection);
    if (held !== undefined && held.owner !== owner && held.expiresAt > now) return Promise.resolve(false);
    this.leases.set(projection, { owner, expiresAt: now + ttlMs });
    return Promise.resolve(true);
  }

  releaseLease(projection: string, owner: string): Promise<void> {
    if (this.leases.get(projection)?.owner === owner) this.leases.delete(projection);
    return Promise.resolve();
  }

  close(): Promise<void> {
    return settle(() => {
      this.statements.clear();
      if (!this.db.isOpen) return;
      // Keeps the statistics fresh that let the planner choose between expression indexes.
      this.db.exec('PRAGMA optimize');
      this.db.close();
    });
  }

  /** The query plan of a find, one line per step, for checking that indexes are used. */
  explain(collection: string, query: Query, page: Page): string[] {
    const { where, orderBy, params } = compile(query);
    return this.db
      .prepare(`EXPLAIN QUERY PLAN SELECT json(doc) AS doc FROM ${this.table(collection)} WHERE ${where}${orderBy} LIMIT ? OFFSET ?`)
      .all(...params, page.limit, page.offset)
      .map((row) => String(row.detail));
  }
}

export function openSqliteReadStore(options: { path: string }): SqliteReadStore {
  return new SqliteReadStore(options.path);
}
