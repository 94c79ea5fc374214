// The embedded read store: one table per collection holding each document as JSONB, with
// expression indexes on the paths a resource filters and sorts by, and on the paths searched as
// text a lowercase index and a trigram index (readSchema.ts). Queries compile to SQL with every
// value bound as a parameter (readQuery.ts); document paths reach the SQL text only as validated
// JSON paths.

import { setImmediate as nextTurn } from 'node:timers/promises';
import { DatabaseSync, type SQLOutputValue, type StatementSync } from 'node:sqlite';
import type {
  Clock,
  CollectionOptions,
  Document,
  DocumentWrite,
  JsonPage,
  Page,
  Position,
  ReadStore,
  VersionedDocument,
} from '../../domain/ports.ts';
import { likePattern, type Query } from '../../domain/shared/filtering.ts';
import { containerValues, containingValues, ranked, scanned, startingValues, type Statement } from './autocomplete.ts';
import { likeMatcher, type LikeMatcher } from '../../domain/shared/likeMatcher.ts';
import { compile, LIKE_WINDOW } from './readQuery.ts';
import { settle } from './settle.ts';
import {
  dropTrigramSql,
  indexSql,
  lowerIndexSql,
  namesOf,
  pathOfTrigramColumn,
  quoted,
  searchIndexes,
  tableOf,
  trigramOfTrigger,
  trigramSql,
  type SearchIndexes,
} from './readSchema.ts';

const STATEMENT_CACHE_SIZE = 500;
/** rm_like runs once per row: a query's few patterns are compiled once, not once per row. */
const LIKE_MATCHER_CACHE_SIZE = 64;
/** Documents a bulk load writes per transaction; between two the event loop serves requests. */
const BULK_LOAD_CHUNK = 50_000;
/** Page cache for a bulk load (KiB, as a negative cache_size): index builds sort in it. */
const BULK_LOAD_CACHE_KIB = 262_144;

function parseDocument(value: SQLOutputValue | undefined): Document | null {
  if (typeof value !== 'string') return null;
  const parsed: unknown = JSON.parse(value);
  return parsed as Document;
}

/** Log positions reach 2^128 (KurrentDB packs commit·2^64 + prepare): stored as text of this many
 * decimal digits, zero-padded so that text order is numeric order, as the MongoDB store keeps them. */
const POSITION_DIGITS = 40;

/** The `position` column of a write: NULL when it carries none. */
function encodePosition(position: Position | undefined): string | null {
  if (position === undefined) return null;
  const digits = position.toString();
  if (position < 0n || digits.length > POSITION_DIGITS) throw new RangeError(`position out of range: ${digits}`);
  return digits.padStart(POSITION_DIGITS, '0');
}

/** A stored row as getMany answers it: `position` only when the row holds one. */
function versioned(row: Record<string, SQLOutputValue>): Omit<VersionedDocument, 'id'> {
  const found: Omit<VersionedDocument, 'id'> = { version: Number(row.version), doc: parseDocument(row.doc) };
  if (typeof row.position === 'string') found.position = BigInt(row.position);
  return found;
}

/** The first LIKE_WINDOW characters (code points) of a value, as SQLite's substr counts them. */
function likeWindow(value: string): string {
  if (value.length <= LIKE_WINDOW) return value;
  let end = 0;
  for (let n = 0; n < LIKE_WINDOW && end < value.length; n++) end += (value.codePointAt(end) ?? 0) > 0xffff ? 2 : 1;
  return value.slice(0, end);
}

export class SqliteReadStore implements ReadStore {
  private readonly db: DatabaseSync;
  private readonly statements = new Map<string, StatementSync>();
  private readonly tables = new Set<string>();
  private readonly leases = new Map<string, { owner: string; expiresAt: number }>();
  private readonly likeMatchers = new Map<string, LikeMatcher>();
  /** Each collection's search indexes as its schema holds them; dropped when the schema changes. */
  private readonly searchIndexCache = new Map<string, SearchIndexes>();

  /** Decides when a lease lapses (tests hold it still to observe a lease before and after it lapses). */
  private readonly clock: Clock;

  constructor(path: string, clock: Clock = { now: () => new Date() }) {
    this.clock = clock;
    this.db = new DatabaseSync(path);
    this.db.exec('PRAGMA journal_mode = WAL');
    this.db.exec('PRAGMA synchronous = NORMAL');
    this.db.exec('PRAGMA busy_timeout = 5000');
    // A query narrowed by an index still reads its rows at random: mapped, a read is a memory
    // access rather than a system call, and the 2 MB default cache would hold little of them.
    this.db.exec('PRAGMA mmap_size = 1073741824');
    this.db.exec('PRAGMA cache_size = -65536');
    this.db.exec('PRAGMA optimize = 0x10002');
    this.db.exec('CREATE TABLE IF NOT EXISTS checkpoints (projection TEXT PRIMARY KEY, position INTEGER NOT NULL)');
    this.db.function('rm_fold', { deterministic: true }, (v) => (typeof v === 'string' ? v.toLowerCase() : v));
    this.db.function('rm_like', { deterministic: true }, (v, p) =>
      typeof v === 'string' && typeof p === 'string' ? Number(this.matcherOf(p)(likeWindow(v))) : null,
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
    const table = quoted(tableOf(collection));
    if (!this.tables.has(table)) {
      this.db.exec(
        `CREATE TABLE IF NOT EXISTS ${table} (id TEXT PRIMARY KEY, version INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, doc BLOB, position TEXT)`,
      );
      this.addPositionColumn(tableOf(collection));
      this.tables.add(table);
    }
    return table;
  }

  /** A table created before documents carried a log position gets the column, NULL in every row. */
  private addPositionColumn(table: string): void {
    const has = (): boolean =>
      this.statement(`SELECT 1 AS found FROM pragma_table_info(?) WHERE name = 'position'`).get(table) !== undefined;
    if (has()) return;
    try {
      this.db.exec(`ALTER TABLE ${quoted(table)} ADD COLUMN position TEXT`);
    } catch (e) {
      // Another connection to the same file may have added it first.
      if (!has()) throw e;
    }
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

  /** The search indexes a collection's schema holds (see readSchema.ts). */
  private searchIndexes(collection: string): SearchIndexes {
    let indexes = this.searchIndexCache.get(collection);
    if (indexes === undefined) {
      this.table(collection);
      const rows = this.statement('SELECT name FROM sqlite_master WHERE tbl_name = ?').all(tableOf(collection));
      indexes = searchIndexes(collection, new Set(rows.map((row) => String(row.name))));
      this.searchIndexCache.set(collection, indexes);
    }
    return indexes;
  }

  /** Paths whose trigram index the triggers keep, read from the schema. */
  private trigramPaths(collection: string): string[] {
    const triggers = this.statement(`SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?`).all(tableOf(collection));
    return triggers.flatMap((row) => {
      const trigram = trigramOfTrigger(String(row.name));
      if (trigram === undefined) return [];
      const columns = this.statement('SELECT name FROM pragma_table_info(?)').all(trigram);
      return columns.map((column) => pathOfTrigramColumn(String(column.name))).filter((path) => path !== undefined);
    });
  }

  /** A path's trigram index, built from the documents when missing: with its triggers, at once. */
  private ensureTrigram(collection: string, path: string): void {
    if (this.searchIndexes(collection).trigram(path) !== undefined) return;
    try {
      this.transaction(() => {
        // Without its triggers a table cannot be trusted to be current: made again.
        for (const sql of [...dropTrigramSql(namesOf(collection, path).trigram), ...trigramSql(collection, path)]) this.db.exec(sql);
      });
    } finally {
      this.searchIndexCache.delete(collection);
    }
  }

  ensureCollection(collection: string, indexedPaths: readonly string[], options: CollectionOptions = {}): Promise<void> {
    return settle(() => {
      this.table(collection);
      const paths = [...new Set(indexedPaths)].filter((path) => path !== 'id');
      const text = new Set(options.textPaths ?? paths);
      try {
        for (const path of paths) {
          this.db.exec(indexSql(collection, path));
          if (!text.has(path)) continue;
          this.db.exec(lowerIndexSql(collection, path));
          this.ensureTrigram(collection, path);
        }
      } finally {
        this.searchIndexCache.delete(collection);
      }
    });
  }

  applyBatch(collection: string, writes: readonly DocumentWrite[], checkpoint: Position, projection = collection): Promise<void> {
    return settle(() => {
      const table = this.table(collection);
      // A replayed event carries a version at most the stored one and must change nothing, not
      // even a tombstone, so a deleted document is only brought back by a newer version.
      // A repair (re-folded from the log) may write the stored version again.
      const guarded = (op: '>' | '>=') => ({
        upsert: this.statement(
          `INSERT INTO ${table} (id, version, deleted, doc, position) VALUES (?, ?, 0, jsonb(?), ?)
           ON CONFLICT (id) DO UPDATE SET version = excluded.version, deleted = 0, doc = excluded.doc, position = excluded.position
           WHERE excluded.version ${op} ${table}.version`,
        ),
        remove: this.statement(
          `INSERT INTO ${table} (id, version, deleted, doc, position) VALUES (?, ?, 1, NULL, ?)
           ON CONFLICT (id) DO UPDATE SET version = excluded.version, deleted = 1, doc = NULL, position = excluded.position
           WHERE excluded.version ${op} ${table}.version`,
        ),
      });
      const replay = guarded('>');
      const repair = writes.some((w) => w.repair === true) ? guarded('>=') : replay;
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
              (w.repair === true ? repair : replay).upsert.run(w.id, w.version, JSON.stringify(w.doc), encodePosition(w.position));
              break;
            case 'delete':
              (w.repair === true ? repair : replay).remove.run(w.id, w.version, encodePosition(w.position));
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

  saveCheckpoint(processor: string, position: Position): Promise<void> {
    return settle(() => {
      this.statement(
        `INSERT INTO checkpoints (projection, position) VALUES (?, ?)
         ON CONFLICT (projection) DO UPDATE SET position = excluded.position WHERE excluded.position > checkpoints.position`,
      ).run(processor, position);
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

  getMany(collection: string, ids: readonly string[]): Promise<Map<string, Omit<VersionedDocument, 'id'>>> {
    return settle(() => {
      const found = new Map<string, Omit<VersionedDocument, 'id'>>();
      if (ids.length === 0) return found;
      const rows = this.statement(
        `SELECT id, version, json(doc) AS doc, position FROM ${this.table(collection)} WHERE id IN (SELECT value FROM json_each(?))`,
      ).all(JSON.stringify(ids));
      for (const row of rows) found.set(String(row.id), versioned(row));
      return found;
    });
  }

  find(collection: string, query: Query, page: Page): Promise<Document[]> {
    return settle(() => {
      const { where, orderBy, params } = compile(query, this.searchIndexes(collection));
      const rows = this.statement(`SELECT json(doc) AS doc FROM ${this.table(collection)} WHERE ${where}${orderBy} LIMIT ? OFFSET ?`).all(
        ...params,
        page.limit,
        page.offset,
      );
      return rows.map((row) => parseDocument(row.doc)).filter((d): d is Document => d !== null);
    });
  }

  findIds(collection: string, query: Query, page: Page): Promise<string[]> {
    return settle(() => {
      const { where, orderBy, params } = compile(query, this.searchIndexes(collection));
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
      const { where, params } = compile(query, this.searchIndexes(collection));
      const row = this.statement(`SELECT count(*) AS n FROM ${this.table(collection)} WHERE ${where}`).get(...params);
      return Number(row?.n ?? 0);
    });
  }

  /** Prefix matches first, then substring matches, each in case-insensitive alphabetical order;
   * through the search indexes when every path has them (see autocomplete.ts). */
  autocomplete(collection: string, paths: readonly string[], term: string, limit: number): Promise<string[]> {
    return settle(() => {
      if (paths.length === 0 || limit <= 0) return [];
      const table = tableOf(collection);
      const unique = [...new Set(paths)];
      const indexes = this.searchIndexes(collection);
      if (!unique.every((path) => indexes.lower(path))) return this.values(scanned(table, unique, term, limit));
      const candidates = new Set<string>();
      const add = (values: readonly string[]): void => {
        for (const value of values) candidates.add(value);
      };
      for (const path of unique) {
        add(this.values(containerValues(table, path, term, '[')));
        add(this.values(containerValues(table, path, term, '{')));
      }
      const starting = this.startingWith(table, unique, term, limit);
      if (starting !== undefined) add(starting);
      // Values containing the term rank after every value starting with it: needed only when
      // fewer than `limit` start with it, or when the lowercase index cannot tell which do.
      if (starting === undefined || starting.length < limit) {
        for (const path of unique) add(this.values(containingValues(table, path, term, indexes.trigram(path))));
      }
      return this.values(ranked(candidates, term, limit));
    });
  }

  private values({ sql, params }: Statement): string[] {
    return this.statement(sql)
      .all(...params)
      .map((row) => String(row.value));
  }

  /**
   * Distinct text values at the paths starting with the term, walking each path's lowercase index
   * until `limit` distinct values are found and the next value's group differs: every value among
   * the first `limit` of the ranking is then found. NOCASE compares as lower() does but stops at a
   * NUL met in both values (their lengths decide), so values equal through a NUL rank among
   * themselves in any lower() order: the group is the lowercase form up to its first NUL.
   * Undefined when the index cannot tell (a term that is not ASCII).
   */
  private startingWith(table: string, paths: readonly string[], term: string, limit: number): string[] | undefined {
    const found = new Set<string>();
    for (const path of paths) {
      const statement = startingValues(table, path, term);
      if (statement === undefined) return undefined;
      const mine = new Set<string>();
      let last: string | undefined;
      for (const row of this.statement(statement.sql).iterate(...statement.params)) {
        const folded = String(row.folded);
        const nul = folded.indexOf('\0');
        const group = nul < 0 ? folded : folded.slice(0, nul + 1);
        if (mine.size >= limit && group !== last) break;
        mine.add(String(row.value));
        last = group;
      }
      for (const value of mine) found.add(value);
    }
    return [...found];
  }

  scan(collection: string, options: { after?: string; limit: number; query?: Query }): Promise<Document[]> {
    return settle(() => {
      const limit = Math.floor(options.limit);
      if (!(limit > 0)) return [];
      const table = this.table(collection);
      if (options.query !== undefined) return this.scanSelected(table, collection, options.query, options.after, limit);
      // The primary key's index: each page is a range seek, whatever was written before it.
      const rows =
        options.after === undefined
          ? this.statement(`SELECT json(doc) AS doc FROM ${table} WHERE deleted = 0 ORDER BY id LIMIT ?`).all(limit)
          : this.statement(`SELECT json(doc) AS doc FROM ${table} WHERE deleted = 0 AND id > ? ORDER BY id LIMIT ?`).all(
              options.after,
              limit,
            );
      return rows.map((row) => parseDocument(row.doc)).filter((d): d is Document => d !== null);
    });
  }

  scanJson(collection: string, options: { after?: string; limit: number; query?: Query }): Promise<JsonPage> {
    return settle(() => {
      const limit = Math.floor(options.limit);
      if (!(limit > 0)) return { json: '', count: 0, last: undefined };
      const table = this.table(collection);
      const { where, params } =
        options.query === undefined ? { where: 'deleted = 0', params: [] } : compile(options.query, this.searchIndexes(collection));
      const pk = this.primaryKeyIndex(tableOf(collection));
      // The page's documents joined by SQLite: one string crosses into JavaScript.
      const row = this.statement(
        `SELECT group_concat(json(doc), ',' ORDER BY id) AS json, count(*) AS n, max(id) AS last FROM
           (SELECT id, doc FROM ${table} INDEXED BY "${pk}" WHERE ${where}${options.after === undefined ? '' : ' AND id > ?'} ORDER BY id LIMIT ?)`,
      ).get(...params, ...(options.after === undefined ? [] : [options.after]), limit);
      return {
        json: typeof row?.json === 'string' ? row.json : '',
        count: Number(row?.n ?? 0),
        last: typeof row?.last === 'string' ? row.last : undefined,
      };
    });
  }

  /** A keyset page of the documents a query selects, forced along the primary key's index: the
   * planner would otherwise take a filter's index and sort all its matches for every page. */
  private scanSelected(table: string, collection: string, query: Query, after: string | undefined, limit: number): Document[] {
    const { where, params } = compile(query, this.searchIndexes(collection));
    const pk = this.primaryKeyIndex(tableOf(collection));
    const rows = this.statement(
      `SELECT json(doc) AS doc FROM ${table} INDEXED BY "${pk}" WHERE ${where}${after === undefined ? '' : ' AND id > ?'} ORDER BY id LIMIT ?`,
    ).all(...params, ...(after === undefined ? [] : [after]), limit);
    return rows.map((row) => parseDocument(row.doc)).filter((d): d is Document => d !== null);
  }

  /** The name of the index SQLite made for a table's `id TEXT PRIMARY KEY` (the table unquoted). */
  private primaryKeyIndex(table: string): string {
    const row = this.statement(`SELECT name FROM pragma_index_list(?) WHERE origin = 'pk'`).get(table);
    if (typeof row?.name !== 'string') throw new Error(`table ${table} has no primary key index`);
    return row.name;
  }

  /**
   * Drops the collection's indexes, trigram indexes and documents, inserts the documents in large
   * transactions (the event loop gets a turn between two), then builds every index once over the
   * loaded table, which costs far less than keeping them up to date row by row. The indexes come
   * back whatever happens; the checkpoint only when every document is in.
   */
  async bulkLoad(
    collection: string,
    documents: Iterable<VersionedDocument> | AsyncIterable<VersionedDocument>,
    checkpoint: Position,
    projection = collection,
  ): Promise<void> {
    const table = this.table(collection);
    const schema = this.dropForLoad(collection, projection);
    const cacheSize = this.db.prepare('PRAGMA cache_size').get()?.cache_size;
    this.db.exec(`PRAGMA cache_size = -${String(BULK_LOAD_CACHE_KIB)}`);
    let loaded = false;
    try {
      const insert = this.db.prepare(`INSERT INTO ${table} (id, version, deleted, doc, position) VALUES (?, ?, ?, jsonb(?), ?)`);
      for await (const chunk of chunks(documents, BULK_LOAD_CHUNK)) {
        this.transaction(() => {
          for (const d of chunk) {
            insert.run(d.id, d.version, d.doc === null ? 1 : 0, d.doc === null ? null : JSON.stringify(d.doc), encodePosition(d.position));
          }
        });
        await nextTurn();
      }
      loaded = true;
    } finally {
      this.restoreAfterLoad(collection, schema, loaded ? { projection, checkpoint } : undefined);
      this.db.exec(`PRAGMA cache_size = ${String(cacheSize ?? -65536)}`);
    }
  }

  /** Drops the indexes, trigram indexes, documents and checkpoint; answers what to build again. */
  private dropForLoad(collection: string, projection: string): { indexes: string[]; trigramPaths: string[] } {
    const indexes = this.statement(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL`)
      .all(tableOf(collection))
      .map((row) => ({ name: String(row.name), sql: String(row.sql) }));
    const trigramPaths = this.trigramPaths(collection);
    const table = this.table(collection);
    try {
      this.transaction(() => {
        for (const path of trigramPaths) for (const sql of dropTrigramSql(namesOf(collection, path).trigram)) this.db.exec(sql);
        for (const index of indexes) this.db.exec(`DROP INDEX ${quoted(index.name)}`);
        this.db.exec(`DELETE FROM ${table}`);
        this.statement('DELETE FROM checkpoints WHERE projection = ?').run(projection);
      });
    } finally {
      this.searchIndexCache.delete(collection);
    }
    return { indexes: indexes.map((index) => index.sql), trigramPaths };
  }

  private restoreAfterLoad(
    collection: string,
    schema: { indexes: string[]; trigramPaths: string[] },
    done: { projection: string; checkpoint: Position } | undefined,
  ): void {
    this.searchIndexCache.delete(collection);
    try {
      // IF NOT EXISTS: an ensureCollection that ran between two chunks may have built some already.
      for (const sql of schema.indexes) this.db.exec(sql.replace(/^CREATE (UNIQUE )?INDEX /i, 'CREATE $1INDEX IF NOT EXISTS '));
      for (const path of schema.trigramPaths) this.ensureTrigram(collection, path);
      if (done !== undefined) {
        this.statement(
          `INSERT INTO checkpoints (projection, position) VALUES (?, ?)
           ON CONFLICT (projection) DO UPDATE SET position = excluded.position WHERE excluded.position > checkpoints.position`,
        ).run(done.projection, done.checkpoint);
      }
    } finally {
      this.searchIndexCache.delete(collection);
    }
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
      const trigramPaths = this.trigramPaths(collection);
      this.transaction(() => {
        // Without the trigram triggers a DELETE of every row empties the table's pages at once
        // instead of visiting each row; the trigram indexes are made again, empty.
        for (const path of trigramPaths) for (const sql of dropTrigramSql(namesOf(collection, path).trigram)) this.db.exec(sql);
        this.statement(`DELETE FROM ${table}`).run();
        for (const path of trigramPaths) for (const sql of trigramSql(collection, path)) this.db.exec(sql);
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
    const now = this.clock.now().getTime();
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
    const { where, orderBy, params } = compile(query, this.searchIndexes(collection));
    return this.db
      .prepare(`EXPLAIN QUERY PLAN SELECT json(doc) AS doc FROM ${this.table(collection)} WHERE ${where}${orderBy} LIMIT ? OFFSET ?`)
      .all(...params, page.limit, page.offset)
      .map((row) => String(row.detail));
  }

  /** The query plan of the walk of the lowercase index an autocomplete starts with. */
  explainAutocomplete(collection: string, path: string, term: string): string[] {
    const statement = startingValues(tableOf(collection), path, term);
    if (statement === undefined) return [];
    return this.db
      .prepare(`EXPLAIN QUERY PLAN ${statement.sql}`)
      .all(...statement.params)
      .map((row) => String(row.detail));
  }
}

/** Items in arrays of `size`, a synchronous iterable read without a turn of the event loop per item. */
async function* chunks<T>(items: Iterable<T> | AsyncIterable<T>, size: number): AsyncGenerator<T[]> {
  let chunk: T[] = [];
  if (Symbol.asyncIterator in items) {
    for await (const item of items) {
      chunk.push(item);
      if (chunk.length >= size) {
        yield chunk;
        chunk = [];
      }
    }
  } else {
    for (const item of items) {
      chunk.push(item);
      if (chunk.length >= size) {
        yield chunk;
        chunk = [];
      }
    }
  }
  if (chunk.length > 0) yield chunk;
}

export function openSqliteReadStore(options: { path: string; clock?: Clock | undefined }): SqliteReadStore {
  return new SqliteReadStore(options.path, options.clock);
}
