// A projection run by the log processor (processor.ts): each batch is folded onto the stored
// documents it touches, and the batch's writes and checkpoint go to the read store together, so a
// crash mid-batch replays the batch, and the version guard makes the replay harmless.

import type { DocumentWrite, EventStore, Position, ReadStore, RecordedEvent } from '../domain/ports.ts';
import type { Query } from '../domain/shared/filtering.ts';
import { matchesAll } from '../domain/shared/matchQuery.ts';
import { storedOf, type Projection, type ReadModelStatus, type StoredDocument } from '../projections/projection.ts';
import { LogProcessor, type Batch, type BatchContext, type ProcessorHandler, type ProcessorOptions } from './processor.ts';

export type ProjectorOptions = ProcessorOptions;

/** Ids of a selecting query, read a page at a time: large, since each page past the first
 * re-reads the ones before it (offset). */
const SELECT_PAGE = 50_000;
/** Documents read, or written, per read-store call when a batch touches many (a selection). */
const WRITE_PART = 2000;

/** The documents a query selects as the model stands before an event of the batch: those written
 * earlier in the batch judged as they are now (in memory), the others as stored. Their stored
 * versions join `current`. */
async function selected(
  projection: Projection,
  reads: ReadStore,
  query: Query,
  current: Map<string, StoredDocument>,
  writes: ReadonlyMap<string, DocumentWrite>,
): Promise<string[]> {
  const inBatch = [...writes.values()].flatMap((w) => (w.kind === 'upsert' && matchesAll(w.doc, query.conditions) ? [w.id] : []));
  const stored: string[] = [];
  for (let offset = 0; ; offset += SELECT_PAGE) {
    const page = await reads.findIds(projection.collection, query, { offset, limit: SELECT_PAGE });
    stored.push(...page.filter((id) => !writes.has(id)));
    if (page.length < SELECT_PAGE) break;
  }
  const missing = stored.filter((id) => !current.has(id));
  for (let i = 0; i < missing.length; i += WRITE_PART) {
    for (const [id, doc] of await reads.getMany(projection.collection, missing.slice(i, i + WRITE_PART))) current.set(id, doc);
    await new Promise((resolve) => setImmediate(resolve));
  }
  return [...inBatch, ...stored];
}

/** The ids an event changes, by name and by query; an event that cannot be routed is recorded. */
async function routeOf(
  projection: Projection,
  reads: ReadStore,
  e: RecordedEvent,
  named: readonly string[],
  current: Map<string, StoredDocument>,
  writes: ReadonlyMap<string, DocumentWrite>,
  ctx: BatchContext,
): Promise<readonly string[]> {
  if (projection.selectDocuments === undefined) return named;
  try {
    const query = projection.selectDocuments(e);
    return query === undefined ? named : [...named, ...(await selected(projection, reads, query, current, writes))];
  } catch (error) {
    ctx.recordFailure(e, error);
    return named;
  }
}

/** Folds a batch onto the documents it touches: the writes to make, in one batch. */
async function fold(
  projection: Projection,
  reads: ReadStore,
  events: readonly RecordedEvent[],
  ctx: BatchContext,
): Promise<DocumentWrite[]> {
  const routed = events.map((e) => {
    try {
      return projection.documentIds(e);
    } catch (error) {
      ctx.recordFailure(e, error);
      return [];
    }
  });
  const ids = new Set(routed.flat());
  const current = new Map<string, StoredDocument>(await reads.getMany(projection.collection, [...ids]));
  const writes = new Map<string, DocumentWrite>();
  for (const [i, e] of events.entries()) {
    for (const id of await routeOf(projection, reads, e, routed[i] ?? [], current, writes, ctx)) {
      try {
        const write = projection.evolve(current.get(id), e, id);
        if (write === undefined) continue;
        writes.set(id, write);
        current.set(id, storedOf(write));
      } catch (error) {
        ctx.recordFailure(e, error);
      }
    }
  }
  return [...writes.values()];
}

/** Writes a batch; when the store refuses it but is healthy, writes one document at a time and
 * records and skips the documents it refuses, so one bad document cannot stall the model. */
async function apply(
  projection: Projection,
  reads: ReadStore,
  writes: readonly DocumentWrite[],
  batch: Batch,
  ctx: BatchContext,
): Promise<void> {
  const { collection, name } = projection;
  try {
    // A batch of many writes (a deletion selecting 100,000 documents) goes in parts, the event loop
    // let go between them, and only the last part moves the checkpoint: a crash in between folds
    // the batch again, which the version guard makes harmless.
    const parts: (readonly DocumentWrite[])[] = [];
    for (let i = WRITE_PART; i < writes.length; i += WRITE_PART) parts.push(writes.slice(i - WRITE_PART, i));
    for (const part of parts) {
      await reads.applyBatch(collection, part, batch.from, name);
      await new Promise((resolve) => setImmediate(resolve));
      ctx.assertLease();
    }
    await reads.applyBatch(collection, writes.slice(parts.length * WRITE_PART), batch.to, name);
    return;
  } catch (error) {
    if (writes.length === 0) throw error;
  }
  // Throws (and the batch is read again later) when the store itself is failing.
  await reads.applyBatch(collection, [], batch.from, name);
  for (const w of writes) {
    ctx.assertLease();
    try {
      await reads.applyBatch(collection, [w], batch.from, name);
    } catch (error) {
      ctx.recordFailure({ position: batch.to, stream: `${collection}/${w.id}`, type: `document ${w.kind}` }, error);
    }
  }
  await reads.applyBatch(collection, [], batch.to, name);
}

/** A projection as a handler of the log processor. */
export function projectionHandler(projection: Projection, reads: ReadStore): ProcessorHandler {
  return {
    name: projection.name,
    categories: projection.categories,
    init: () =>
      reads.ensureCollection(
        projection.collection,
        projection.indexedPaths,
        projection.textPaths === undefined ? undefined : { textPaths: projection.textPaths },
      ),
    async handle(events, batch, ctx) {
      const writes = await fold(projection, reads, events, ctx);
      ctx.assertLease();
      await apply(projection, reads, writes, batch, ctx);
    },
  };
}

export class Projector {
  readonly projection: Projection;
  readonly #processor: LogProcessor;

  constructor(projection: Projection, events: EventStore, reads: ReadStore, options: ProjectorOptions = {}) {
    this.projection = projection;
    this.#processor = new LogProcessor(projectionHandler(projection, reads), events, reads, options);
  }

  get checkpoint(): Position {
    return this.#processor.checkpoint;
  }

  start(): Promise<void> {
    return this.#processor.start();
  }

  stop(): Promise<void> {
    return this.#processor.stop();
  }

  /** Resolves true once the read model reflects `position`, false after `timeoutMs`. */
  waitFor(position: Position, timeoutMs: number): Promise<boolean> {
    return this.#processor.waitFor(position, timeoutMs);
  }

  status(): ReadModelStatus {
    return { ...this.#processor.status(), collection: this.projection.collection };
  }
}
