// The embedded event log's writes: a group of appends in one transaction (one fsync), and purges.
// It runs on a thread of its own (eventLogWorker.ts, driven by eventStore.ts) with its own
// connection to the log's file, so that a commit waiting for the disk (a few milliseconds, at
// times tens on a shared disk) holds up nothing of the event loop; reads stay on the event loop's
// connection, which sees each group once its commit is answered (WAL). What crosses between the
// threads is plain data: events with their data and metadata as JSON text, errors as `WireError`.

import { DatabaseSync, type StatementSync } from 'node:sqlite';
import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type AppendResult,
  type CodeReservation,
  type ExpectedRevision,
} from '../../domain/ports.ts';
import { categoryOf } from '../../domain/shared/streams.ts';

export type WireEvent = { id: string; type: string; schemaVersion: number; data: string; metadata: string };
export type WireAppend = {
  stream: string;
  expected: ExpectedRevision;
  events: readonly WireEvent[];
  claim: readonly CodeReservation[];
  release: readonly CodeReservation[];
};
export type WireError =
  | { kind: 'wrong-revision'; stream: string; expected: ExpectedRevision; actual: number | 'no_stream' }
  | { kind: 'code-taken'; scope: string; code: string }
  | { kind: 'other'; message: string };
export type WireOutcome = { ok: true; result: AppendResult } | { ok: false; error: WireError };

/** What the event loop asks the writer, and what it answers (`id` pairs them). */
export type WriterAsk =
  { kind: 'append'; appends: readonly WireAppend[] } | { kind: 'purge'; streams: readonly string[] } | { kind: 'close' };
export type WriterRequest = WriterAsk & { id: number };
export type WriterAnswer = { id: number; outcomes: WireOutcome[] } | { id: number; removed: number } | { id: number; failed: string };

/** Streams deleted per statement (SQLite's default limit of bound parameters is 32,766). */
const PURGE_CHUNK = 500;

export function toWireError(error: unknown): WireError {
  if (error instanceof WrongExpectedRevisionError)
    return { kind: 'wrong-revision', stream: error.stream, expected: error.expected, actual: error.actual };
  if (error instanceof CodeTakenError) return { kind: 'code-taken', scope: error.scope, code: error.code };
  return { kind: 'other', message: error instanceof Error ? error.message : String(error) };
}

export function fromWireError(error: WireError): Error {
  switch (error.kind) {
    case 'wrong-revision':
      return new WrongExpectedRevisionError(error.stream, error.expected, error.actual);
    case 'code-taken':
      return new CodeTakenError(error.scope, error.code);
    case 'other':
      return new Error(error.message);
  }
}

/** A connection's statements, each prepared once (integers read as bigint: positions). */
export function statementsOf(db: DatabaseSync): (sql: string) => StatementSync {
  const statements = new Map<string, StatementSync>();
  return (sql) => {
    let s = statements.get(sql);
    if (!s) {
      s = db.prepare(sql);
      s.setReadBigInts(true);
      statements.set(sql, s);
    }
    return s;
  };
}

export class EventLogWriter {
  readonly #db: DatabaseSync;
  readonly #stmt: (sql: string) => StatementSync;

  constructor(db: DatabaseSync) {
    this.#db = db;
    this.#stmt = statementsOf(db);
  }

  /** The appends in one transaction, each judged alone: one refused by its checks has written
   * nothing (see #checked) and needs no savepoint. A write failing after its checks passed (the
   * disk, not the request), or the commit, fails them all: none of them is in the log. */
  appendAll(appends: readonly WireAppend[]): WireOutcome[] {
    const outcomes: WireOutcome[] = [];
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      for (const append of appends) {
        let write: () => AppendResult;
        try {
          write = this.#checked(append);
        } catch (error) {
          outcomes.push({ ok: false, error: toWireError(error) });
          continue;
        }
        outcomes.push({ ok: true, result: write() });
      }
      this.#db.exec('COMMIT');
    } catch (error) {
      if (this.#db.isTransaction) this.#db.exec('ROLLBACK');
      const failed = toWireError(error);
      return appends.map(() => ({ ok: false, error: failed }));
    }
    return outcomes;
  }

  /**
   * Checks an append against the log as the transaction has it so far (its ids, its stream's
   * revision, the codes it claims), then answers how to write it: nothing is written until every
   * check passed, so a refused append leaves nothing behind. A retry of an append already in the
   * log answers its first result and writes nothing.
   */
  #checked(req: WireAppend): () => AppendResult {
    const first = req.events[0];
    if (first === undefined) throw new Error('append needs at least one event');
    const byId = this.#stmt('SELECT stream, revision, position FROM events WHERE id = ?');
    const retried = byId.get(first.id) as { stream: string; revision: bigint; position: bigint } | undefined;
    if (retried) {
      const result = this.#idempotentResult(req, retried);
      return () => result;
    }

    const head = this.#stmt('SELECT max(revision) AS r FROM events WHERE stream = ?').get(req.stream) as { r: bigint | null };
    const actual = head.r === null ? 'no_stream' : Number(head.r);
    if (actual !== req.expected) throw new WrongExpectedRevisionError(req.stream, req.expected, actual);
    // Another event of the append already in the log (under another stream) would fail its insert.
    for (const e of req.events.slice(1)) {
      if (byId.get(e.id) !== undefined) throw new Error(`event id ${e.id} is already in the log`);
    }
    // A release frees only the stream's own codes, so a code another stream holds stays taken.
    for (const c of req.claim) {
      const holder = this.#stmt('SELECT stream FROM codes WHERE scope = ? AND code = ?').get(c.scope, c.code) as
        { stream: string } | undefined;
      if (holder !== undefined && holder.stream !== req.stream) throw new CodeTakenError(c.scope, c.code);
    }

    return () => {
      for (const r of req.release) {
        this.#stmt('DELETE FROM codes WHERE scope = ? AND code = ? AND stream = ?').run(r.scope, r.code, req.stream);
      }
      for (const c of req.claim) {
        this.#stmt('INSERT INTO codes (scope, code, stream) VALUES (?, ?, ?) ON CONFLICT DO NOTHING').run(c.scope, c.code, req.stream);
      }
      const insert = this.#stmt(
        'INSERT INTO events (id, stream, category, revision, type, schema_version, data, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      );
      const category = categoryOf(req.stream);
      let revision = actual === 'no_stream' ? -1 : actual;
      let position = 0n;
      for (const e of req.events) {
        revision += 1;
        position = BigInt(insert.run(e.id, req.stream, category, revision, e.type, e.schemaVersion, e.data, e.metadata).lastInsertRowid);
      }
      return { revision, position };
    };
  }

  /** A retry of an append that already committed answers what the first one did and writes nothing. */
  #idempotentResult(req: WireAppend, first: { stream: string; revision: bigint; position: bigint }): AppendResult {
    if (first.stream !== req.stream) throw new WrongExpectedRevisionError(req.stream, req.expected, 'no_stream');
    const ids = req.events.map((e) => e.id);
    const rows = this.#stmt(`SELECT id, revision, position FROM events WHERE stream = ? AND revision >= ? ORDER BY revision LIMIT ?`).all(
      req.stream,
      first.revision,
      ids.length,
    ) as { id: string; revision: bigint; position: bigint }[];
    const same = rows.length === ids.length && rows.every((r, i) => r.id === ids[i]);
    const last = rows.at(-1);
    if (!same || last === undefined) {
      throw new WrongExpectedRevisionError(req.stream, req.expected, Number(first.revision));
    }
    return { revision: Number(last.revision), position: last.position, duplicate: true };
  }

  /**
   * Deletes the streams' events (and any code their streams hold) in one transaction, between two
   * group commits (the writer takes one request at a time), then gives the freed pages back:
   * incremental vacuum, and a WAL checkpoint that truncates the -wal file. Positions are
   * AUTOINCREMENT, so none is handed out again. A log created before auto_vacuum was set is
   * rewritten once by a full VACUUM (it then stays incremental).
   */
  purge(streams: readonly string[]): number {
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
      throw error;
    }
    if (removed > 0) this.#reclaim();
    return removed;
  }

  #reclaim(): void {
    const mode = this.#db.prepare('PRAGMA auto_vacuum').get() as { auto_vacuum: number };
    if (mode.auto_vacuum === 0) this.#db.exec('PRAGMA auto_vacuum = INCREMENTAL; VACUUM');
    else this.#db.exec('PRAGMA incremental_vacuum');
    this.#db.exec('PRAGMA wal_checkpoint(TRUNCATE)');
  }

  close(): void {
    this.#db.close();
  }
}

/** The writer's answer to one request (a failure answered, never thrown). */
export function answerOf(writer: EventLogWriter, request: WriterRequest): WriterAnswer {
  try {
    switch (request.kind) {
      case 'append':
        return { id: request.id, outcomes: writer.appendAll(request.appends) };
      case 'purge':
        return { id: request.id, removed: writer.purge(request.streams) };
      case 'close':
        writer.close();
        return { id: request.id, removed: 0 };
    }
  } catch (error) {
    return { id: request.id, failed: error instanceof Error ? error.message : String(error) };
  }
}
