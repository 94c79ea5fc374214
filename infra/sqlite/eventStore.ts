// The embedded event log: one SQLite file, WAL, synchronous=FULL. Writes go to a thread of their own
// (eventLogWriter.ts), so that no commit waiting for the disk holds up the event loop; reads stay
// here. Appends are group-committed: those that arrive while a commit is under way (or in the same
// event-loop turn) go together in the next transaction, one fsync for all of them, each judged
// alone (one refused leaves the others alone).
import { randomUUID } from 'node:crypto';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import { Worker } from 'node:worker_threads';
import {
  type AppendOutcome,
  type AppendRequest,
  type AppendResult,
  type CodeReservation,
  type EventStore,
  type Position,
  type ReadAllOptions,
  type RecordedEvent,
} from '../../domain/ports.ts';
import {
  answerOf,
  EventLogWriter,
  fromWireError,
  statementsOf,
  type WireAppend,
  type WriterAnswer,
  type WriterAsk,
  type WriterRequest,
} from './eventLogWriter.ts';

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

/** A queued append and what hears its outcome (its own promise, or its place in an appendMany). */
type Pending = { append: WireAppend; settle: (outcome: AppendOutcome) => void };

const WRITER = new URL('./eventLogWorker.ts', import.meta.url);

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
  readonly #path: string;
  readonly #listeners = new Set<(p: Position) => void>();
  readonly #stmt: (sql: string) => StatementSync;
  #writer: Worker | undefined;
  /** An in-memory log's writer, on this connection: another connection (the writer thread's) to
   * ':memory:' would be another, empty database. */
  readonly #inProcess: EventLogWriter | undefined;
  /** What the writer was asked and has not answered yet, by request id. */
  readonly #asked = new Map<number, (answer: WriterAnswer) => void>();
  #nextId = 1;
  #queue: Pending[] = [];
  /** A group is being committed, or is about to be sent (the rest of this turn's appends join it). */
  #busy = false;
  /** Groups sent to the writer and not answered yet. */
  #committing = 0;
  #closed = false;

  constructor(path: string) {
    this.#path = path;
    this.#db = new DatabaseSync(path);
    this.#stmt = statementsOf(this.#db);
    // A new log gives freed pages back to the file system (the retention pass): only possible
    // before its first table; an older log is converted by its first purge (eventLogWriter.ts).
    const tables = this.#db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table'").get() as { n: number };
    if (tables.n === 0) this.#db.exec('PRAGMA auto_vacuum = INCREMENTAL');
    this.#db.exec(EVENT_LOG_PRAGMAS);
    addAutoincrement(this.#db);
    this.#db.exec(EVENT_LOG_SCHEMA);
    this.#inProcess = isInMemory(path) ? new EventLogWriter(this.#db) : undefined;
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

  append(request: AppendRequest): Promise<AppendResult> {
    if (this.#closed) return Promise.reject(new Error('event store is closed'));
    if (request.events.length === 0) return Promise.reject(new Error('append needs at least one event'));
    return new Promise((resolve, reject) => {
      const fail: (error: unknown) => void = reject;
      this.#enqueue(request, (outcome) => {
        if (outcome.ok) resolve(outcome.result);
        else fail(outcome.error);
      });
    });
  }

  appendMany(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
    if (this.#closed) return Promise.reject(new Error('event store is closed'));
    if (requests.length === 0) return Promise.resolve([]);
    return new Promise((resolve) => {
      const outcomes: AppendOutcome[] = new Array<AppendOutcome>(requests.length);
      let left = requests.length;
      const group: Pending[] = [];
      requests.forEach((request, i) => {
        const settle = (outcome: AppendOutcome): void => {
          outcomes[i] = outcome;
          if (--left === 0) resolve(outcomes);
        };
        if (request.events.length === 0) {
          settle({ ok: false, error: new Error('append needs at least one event') });
          return;
        }
        const pending = this.#pending(request, settle);
        if (pending !== undefined) group.push(pending);
      });
      // A group already: sent at once, not after the group under way (the writer takes them in
      // order), so that the writer commits it while the caller decides its next one.
      if (group.length > 0) void this.#commit(group);
    });
  }

  /** An append for the writer, its events serialized here (one that cannot be fails alone). */
  #pending(request: AppendRequest, settle: (outcome: AppendOutcome) => void): Pending | undefined {
    try {
      const events = request.events.map((e) => ({
        id: e.id,
        type: e.type,
        schemaVersion: e.schemaVersion,
        data: JSON.stringify(e.data),
        metadata: JSON.stringify(e.metadata),
      }));
      return {
        append: { stream: request.stream, expected: request.expected, events, claim: request.claim ?? [], release: request.release ?? [] },
        settle,
      };
    } catch (error) {
      settle({ ok: false, error });
      return undefined;
    }
  }

  /** Queues an append for the next group. */
  #enqueue(request: AppendRequest, settle: (outcome: AppendOutcome) => void): void {
    const pending = this.#pending(request, settle);
    if (pending === undefined) return;
    this.#queue.push(pending);
    if (!this.#busy) {
      this.#busy = true;
      setImmediate(() => void this.#commitGroups());
    }
  }

  /** Sends the queued appends to the writer as one group, and again while more came meanwhile. */
  async #commitGroups(): Promise<void> {
    while (this.#queue.length > 0) {
      const group = this.#queue;
      this.#queue = [];
      await this.#commit(group);
    }
    this.#busy = false;
  }

  /** One group to the writer, in one transaction; each append hears its outcome, then the listeners
   * the new head (groups are answered in the order sent, so the head only moves on). */
  async #commit(group: readonly Pending[]): Promise<void> {
    this.#committing += 1;
    try {
      const answer = await this.#ask({ kind: 'append', appends: group.map((p) => p.append) });
      const outcomes = 'outcomes' in answer ? answer.outcomes : undefined;
      let head = 0n;
      group.forEach((p, i) => {
        const o = outcomes?.[i];
        if (o === undefined)
          p.settle({ ok: false, error: new Error('failed' in answer ? answer.failed : 'the event log writer gave no outcome') });
        else if (o.ok) {
          if (o.result.position > head) head = o.result.position;
          p.settle(o);
        } else p.settle({ ok: false, error: fromWireError(o.error) });
      });
      if (head > 0n) for (const l of this.#listeners) l(head);
    } finally {
      this.#committing -= 1;
    }
  }

  /** One request to the writer thread (started on first use); it answers them in order. */
  #ask(request: WriterAsk): Promise<WriterAnswer> {
    const id = this.#nextId++;
    if (this.#inProcess !== undefined) return Promise.resolve(answerOf(this.#inProcess, { ...request, id }));
    const writer = this.#writerThread();
    return new Promise((resolve) => {
      this.#asked.set(id, resolve);
      // Kept alive only while it owes an answer: an idle log does not hold the process open.
      writer.ref();
      const message: WriterRequest = { ...request, id };
      writer.postMessage(message);
    });
  }

  #writerThread(): Worker {
    if (this.#writer !== undefined) return this.#writer;
    // None of the process's flags: its preload (telemetry) has nothing to watch here, and its timers
    // would keep the thread from ending on close.
    const writer = new Worker(WRITER, { workerData: { path: this.#path }, execArgv: [] });
    writer.unref();
    writer.on('message', (answer: WriterAnswer) => {
      const resolve = this.#asked.get(answer.id);
      this.#asked.delete(answer.id);
      if (this.#asked.size === 0) writer.unref();
      resolve?.(answer);
    });
    // A writer that died answers nothing more: what it owed fails (whether it committed is not
    // known: callers try again, which ids make harmless), and the next request starts another.
    const died = (reason: string): void => {
      if (this.#writer === writer) this.#writer = undefined;
      for (const [id, resolve] of this.#asked) resolve({ id, failed: `the event log writer stopped: ${reason}` });
      this.#asked.clear();
    };
    writer.on('error', (error: Error) => {
      died(error.message);
    });
    writer.on('exit', (code) => {
      died(`exit code ${String(code)}`);
    });
    this.#writer = writer;
    return writer;
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
    const rows = this.#stmt(`SELECT * FROM events WHERE ${where.join(' AND ')} ORDER BY position LIMIT ?`).all(
      ...args,
      after,
      limit,
    ) as Row[];
    return Promise.resolve(rows.map(toEvent));
  }

  headPosition(): Promise<Position> {
    // The AUTOINCREMENT counter, not max(position): a purge of the newest events must not move the head back.
    const r = this.#stmt(
      "SELECT max(coalesce((SELECT max(position) FROM events), 0), coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)) AS p",
    ).get() as { p: bigint | null };
    return Promise.resolve(r.p ?? 0n);
  }

  /** Deletes the streams' events for good, in the writer, between two groups (eventLogWriter.ts). */
  async purge(streams: readonly string[]): Promise<number> {
    if (this.#closed) throw new Error('event store is closed');
    const answer = await this.#ask({ kind: 'purge', streams });
    if ('failed' in answer) throw new Error(answer.failed);
    return 'removed' in answer ? answer.removed : 0;
  }

  findCode(reservation: CodeReservation): Promise<string | undefined> {
    const r = this.#stmt('SELECT stream FROM codes WHERE scope = ? AND code = ?').get(reservation.scope, reservation.code) as
      { stream: string } | undefined;
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
    while (this.#busy || this.#committing > 0) await new Promise((r) => setImmediate(r));
    this.#closed = true;
    this.#listeners.clear();
    const writer = this.#writer;
    if (writer !== undefined) {
      const exited = new Promise((resolve) => writer.once('exit', resolve));
      await this.#ask({ kind: 'close' });
      // Its connection is closed: kept alive only until the thread is gone.
      writer.ref();
      await exited;
    }
    this.#db.close();
  }
}

export const openSqliteEventStore = (path: string): SqliteEventStore => new SqliteEventStore(path);

/** Whether SQLite opens a database of its own for each connection to the path (nothing on disk). */
const isInMemory = (path: string): boolean =>
  path === '' || path === ':memory:' || (path.startsWith('file:') && /(^file::memory:|[?&]mode=memory(&|$))/.test(path));
