// The embedded event log: one SQLite file, WAL, synchronous=FULL. Appends that arrive in the same
// event-loop turn are group-committed: one transaction (one fsync) for all of them, each in its own
// savepoint so one request's conflict does not fail the others.

import { randomUUID } from 'node:crypto';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type AppendRequest,
  type AppendResult,
  type CodeReservation,
  type EventStore,
  type Position,
  type ReadAllOptions,
  type RecordedEvent,
} from '../../domain/ports.ts';
import { categoryOf } from '../../domain/shared/streams.ts';

/**
 * Positions are AUTOINCREMENT: a plain rowid takes max + 1, so deleting the newest events (log
 * retention) would hand out again a position a checkpoint has already passed. A log created before
 * is rebuilt once, in one transaction, keeping every position.
 */
function addAutoincrement(db: DatabaseSync): void {
  const table = db.prepare("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").get() as { sql: string } | undefined;
  if (table === undefined || /AUTOINCREMENT/i.test(table.sql)) return;
  const createEvents = EVENT_LOG_SCHEMA.slice(0, EVENT_LOG_SCHEMA.indexOf(');') + 2);
  db.exec('BEGIN IMMEDIATE');
  try {
    db.exec('ALTER TABLE events RENAME TO events_before_autoincrement');
    db.exec(createEvents);
    db.exec('INSERT INTO events SELECT * FROM events_before_autoincrement ORDER BY position');
    db.exec('DROP TABLE events_before_autoincrement');
    db.exec('COMMIT');
  } catch (error) {
    db.exec('ROLLBACK');
    throw error;
  }
}

/** Exported so the benchmark's raw baselines pay for the same table and indexes. */
export const EVENT_LOG_SCHEMA = `
CREATE TABLE IF NOT EXISTS events (
  position INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  stream TEXT NOT NULL,
  category TEXT NOT NULL,
  revision INTEGER NOT NULL,
  type TEXT NOT NULL,
  schema_version INTEGER NOT NULL,
  data TEXT NOT NULL,
  metadata TEXT NOT NULL,
  UNIQUE (stream, revision)
);
CREATE INDEX IF NOT EXISTS events_by_category ON events (category, position);
-- readAll by types (the audit feed's ?types=): a rare type without it scanned the whole log.
CREATE INDEX IF NOT EXISTS events_by_type ON events (type, position);
CREATE TABLE IF NOT EXISTS codes (
  scope TEXT NOT NULL,
  code TEXT NOT NULL,
  stream TEXT NOT NULL,
  PRIMARY KEY (scope, code)
) WITHOUT ROWID;
`;

export const EVENT_LOG_PRAGMAS = 'PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;';

type Row = {
  position: bigint;
  id: string;
  stream: string;
  revision: bigint;
  type: string;
  schema_version: bigint;
  data: string;
  metadata: string;
};

/** Streams deleted per statement (SQLite's default limit of bound parameters is 32,766). */
const PURGE_CHUNK = 500;

type Pending = {
  request: AppendRequest;
  resolve: (r: AppendResult) => void;
  reject: (e: unknown) => void;
};


const toEvent = (r: Row): RecordedEvent => ({
  id: r.id,
  stream: r.stream,
  revision: Number(r.revision),
  position: r.position,
  type: r.type,
  schemaVersion: Number(r.schema_version),
  data: JSON.parse(r.data) as Record<string, unknown>,
  metadata: JSON.parse(r.metadata) as RecordedEvent['metadata'],
});

export class SqliteEventStore implements EventStore {
  readonly #db: DatabaseSync;
  readonly #listeners = new Set<(p: Position) => void>();
  readonly #statements = new Map<string, StatementSync>();
  #queue: Pending[] = [];
  #scheduled = false;
  #closed = false;

  constructor(path: string) {
    this.#db = new DatabaseSync(path);
    // A new log gives freed pages back to the file system (the retention pass): only possible
    // before its first table; an older log is converted by its first purge (purge below).
    const tables = this.#db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number };
    if (tables.n === 0) this.#db.exec('PRAGMA auto_vacuum = INCREMENTAL');
    this.#db.exec(EVENT_LOG_PRAGMAS);
    addAutoincrement(this.#db);
    this.#db.exec(EVENT_LOG_SCHEMA);
  }

  /** This log's own identity, made once with it (a random UUID in the file): read models kept
   * outside DATA_DIR (MongoDB) record which log they were folded from, and a path says less (a
   * fresh DATA_DIR at the same path is another log). */
  logId(): string {
    this.#db.exec('CREATE TABLE IF NOT EXISTS log_identity (id TEXT NOT NULL)');
    this.#db.prepare('INSERT INTO log_identity (id) SELECT ? WHERE NOT EXISTS (SELECT 1 FROM log_identity)').run(randomUUID());
    const row = this.#db.prepare('SELECT id FROM log_identity LIMIT 1').get() as { id: string };
    return row.id;
  }

  #stmt(sql: string): StatementSync {
    let s = this.#statements.get(sql);
    if (!s) {
      s = this.#db.prepare(sql);
      s.setReadBigInts(true);
      this.#statements.set(sql, s);
    }
    return s;
  }

  append(request: AppendRequest): Promise<AppendResult> {
    if (this.#closed) return Promise.reject(new Error('event store is closed'));
    if (request.events.length === 0) return Promise.reject(new Error('append needs at least one event'));
    return new Promise((resolve, reject) => {
      this.#queue.push({ request, resolve, reject });
      if (!this.#scheduled) {
        this.#scheduled = true;
        setImmediate(() => {
          this.#flush();
        });
      }
    });
  }

  #flush(): void {
    this.#scheduled = false;
    const batch = this.#queue;
    this.#queue = [];
    if (batch.length === 0) return;
    const outcomes: ({ ok: AppendResult } | { error: unknown })[] = [];
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      for (const p of batch) {
        this.#db.exec('SAVEPOINT append');
        try {
          outcomes.push({ ok: this.#appendOne(p.request) });
          this.#db.exec('RELEASE append');
        } catch (error) {
          this.#db.exec('ROLLBACK TO append; RELEASE append');
          outcomes.push({ error });
        }
      }
      this.#db.exec('COMMIT');
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      for (const p of batch) p.reject(error);
      return;
    }
    let head = 0n;
    batch.forEach((p, i) => {
      const o = outcomes[i];
      if (o && 'ok' in o) {
        if (o.ok.position > head) head = o.ok.position;
        p.resolve(o.ok);
      } else p.reject(o?.error);
    });
    if (head > 0n) for (const l of this.#listeners) l(head);
  }

  #appendOne(req: AppendRequest): AppendResult {
    const first = req.events[0];
    if (first === undefined) throw new Error('append needs at least one event');
    const retried = this.#stmt('SELECT stream, revision, position FROM events WHERE id = ?').get(first.id) as
      | { stream: string; revision: bigint; position: bigint }
      | undefined;
    if (retried) return this.#idempotentResult(req, retried);

    const head = this.#stmt('SELECT max(revision) AS r FROM events WHERE stream = ?').get(req.stream) as {
      r: bigint | null;
    };
    const actual = head.r === null ? 'no_stream' : Number(head.r);
    if (actual !== req.expected) throw new WrongExpectedRevisionError(req.stream, req.expected, actual);

    for (const r of req.release ?? []) {
      this.#stmt('DELETE FROM codes WHERE scope = ? AND code = ? AND stream = ?').run(r.scope, r.code, req.stream);
    }
    for (const c of req.claim ?? []) {
      const holder = this.#stmt('SELECT stream FROM codes WHERE scope = ? AND code = ?').get(c.scope, c.code) as
        | { stream: string }
        | undefined;
      if (holder === undefined) {
        this.#stmt('INSERT INTO codes (scope, code, stream) VALUES (?, ?, ?)').run(c.scope, c.code, req.stream);
      } else if (holder.stream !== req.stream) throw new CodeTakenError(c.scope, c.code);
    }

    const insert = this.#stmt(
      'INSERT INTO events (id, stream, category, revision, type, schema_version, data, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
    );
    const category = categoryOf(req.stream);
    let revision = actual === 'no_stream' ? -1 : actual;
    let position = 0n;
    for (const e of req.events) {
      revision += 1;
      const r = insert.run(
        e.id,
        req.stream,
        category,
        revision,
        e.type,
        e.schemaVersion,
        JSON.stringify(e.data),
        JSON.stringify(e.metadata),
      );
      position = BigInt(r.lastInsertRowid);
    }
    return { revision, position };
  }

  /** A retry of an append that already committed answers what the first one did and writes nothing. */
  #idempotentResult(req: AppendRequest, first: { stream: string; revision: bigint; position: bigint }): AppendResult {
    if (first.stream !== req.stream) throw new WrongExpectedRevisionError(req.stream, req.expected, 'no_stream');
    const ids = req.events.map((e) => e.id);
    const rows = this.#stmt(
      `SELECT id, revision, position FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?`,
    ).all(req.stream, first.revision, ids.length) as { id: string; revision: bigint; position: bigint }[];
    const same = rows.length === ids.length && rows.every((r, i) => r.id === ids[i]);
    const last = rows.at(-1);
    if (!same || last === undefined) {
      throw new WrongExpectedRevisionError(req.stream, req.expected, Number(first.revision));
    }
    return { revision: Number(last.revision), position: last.position, duplicate: true };
  }

  readStream(stream: string, options: { from?: number; limit?: number } = {}): Promise<RecordedEvent[]> {
    const rows = this.#stmt('SELECT * FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?').all(
      stream,
      options.from ?? 0,
      options.limit ?? -1,
    ) as Row[];
    return Promise.resolve(rows.map(toEvent));
  }

  readAll(options: ReadAllOptions): Promise<RecordedEvent[]> {
    const { after, limit, categories, types } = options;
    if (categories?.length === 0 || types?.length === 0) return Promise.resolve([]);
    const where: string[] = [];
    const args: (string | bigint | number)[] = [];
    const anyOf = (column: string, values: readonly string[]) => {
      where.push(values.length === 1 ? `${column} = ?` : `${column} IN (${values.map(() => '?').join(', ')})`);
      args.push(...values);
    };
    if (categories !== undefined) anyOf('category', categories);
    if (types !== undefined) anyOf('type', types);
    where.push('position > ?');
    const rows = this.#stmt(`SELECT * FROM events WHERE ${where.join(' AND ')} ORDER BY position LIMIT ?`).all(...args, after, limit) as Row[];
    return Promise.resolve(rows.map(toEvent));
  }

  headPosition(): Promise<Position> {
    // The AUTOINCREMENT counter, not max(position): a purge of the newest events must not move the head back.
    const r = this.#stmt("SELECT max(coalesce((SELECT max(position) FROM events), 0), coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)) AS p").get() as { p: bigint | null };
    return Promise.resolve(r.p ?? 0n);
  }

  /**
   * Deletes the streams' events (and any code their streams hold) in one transaction, between two
   * group commits (the connection is synchronous, so no append interleaves), then gives the freed
   * pages back: incremental vacuum, and a WAL checkpoint that truncates the -wal file. Positions are
   * AUTOINCREMENT, so none is handed out again. A log created before auto_vacuum was set is rewritten
   * once by a full VACUUM (it then stays incremental).
   */
  purge(streams: readonly string[]): Promise<number> {
    if (this.#closed) return Promise.reject(new Error('event store is closed'));
    let removed = 0;
    this.#db.exec('BEGIN IMMEDIATE');
    try {
      for (let i = 0; i < streams.length; i += PURGE_CHUNK) {
        const chunk = streams.slice(i, i + PURGE_CHUNK);
        const marks = chunk.map(() => '?').join(', ');
        removed += Number(this.#db.prepare(`DELETE FROM events WHERE stream IN (${marks})`).run(...chunk).changes);
        this.#db.prepare(`DELETE FROM codes WHERE stream IN (${marks})`).run(...chunk);
      }
      this.#db.exec('COMMIT');
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    if (removed > 0) this.#reclaim();
    return Promise.resolve(removed);
  }

  #reclaim(): void {
    const mode = this.#db.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number };
    if (mode.auto_vacuum === 0) this.#db.exec('PRAGMA auto_vacuum = INCREMENTAL; VACUUM');
    else this.#db.exec('PRAGMA incremental_vacuum');
    this.#db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  }

  findCode(reservation: CodeReservation): Promise<string | undefined> {
    const r = this.#stmt('SELECT stream FROM codes WHERE scope = ? AND code = ?').get(
      reservation.scope,
      reservation.code,
    ) as { stream: string } | undefined;
    return Promise.resolve(r?.stream);
  }

  /** Positions number the events 1, 2, 3…, so the distance is a count of events. */
  distance(from: Position, to: Position): number {
    return to > from ? Number(to - from) : 0;
  }

  onAppended(listener: (position: Position) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    // Let appends already queued commit before the file closes.
    while (this.#queue.length > 0 || this.#scheduled) await new Promise((r) => setImmediate(r));
    this.#closed = true;
    this.#listeners.clear();
    this.#db.close();
  }
}

export const openSqliteEventStore = (path: string): SqliteEventStore => new SqliteEventStore(path);
