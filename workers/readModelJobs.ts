// The jobs the service runs on its read models: recreate (a blue/green rebuild into a new
// generation) as a Job with its progress in `data.progress`. A job runs in the process that holds
// its lease (`job:<id>`), renewed while it runs; when that process dies the lease lapses, and the
// scheduler (one due item per job IN_PROGRESS) resumes it elsewhere or after the restart. A job
// resumed too often is FAILED with the reason.

import { randomUUID } from 'node:crypto';
import {
  READ_MODEL_JOB_ACTOR,
  ServiceJobTypes,
  cancelRequestOf,
  isFinal,
  job as jobDefinition,
  type JobCommand,
} from '../modules/jobs/domain/jobs.ts';
import type { Clock, Document, DocumentWrite, EventStore, Position, ReadStore, RecordedEvent, VersionedDocument } from '../domain/ports.ts';
import { storedOf, type Projection, type StoredDocument } from '../projections/projection.ts';
import type { Runtime } from '../application/runtime.ts';
import type { WriteResult } from '../domain/resource/service.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import { DomainError } from '../domain/shared/errors.ts';
import { uuidV5 } from '../domain/shared/ids.ts';
import { toQuery, type ColumnCatalog, type Filtering, type Query } from '../domain/shared/filtering.ts';
import { deepEqual, type JsonObject } from '../domain/shared/json.ts';
import { matchesAll } from '../domain/shared/matchQuery.ts';
import type { Logger } from './processor.ts';
import { Projector } from './projector.ts';
import { atGeneration, type ReadModelSet } from './readModels.ts';
import { dueInReadModel, type Schedule } from './scheduler.ts';

export const RECREATE = ServiceJobTypes.READ_MODEL_RECREATE;
export const REFRESH = ServiceJobTypes.READ_MODEL_REFRESH;
/** The job types ReadModelJobs runs. */
export const JOB_TYPES: string[] = [RECREATE, REFRESH];
/** Documents re-folded per read of the read model. */
const REFRESH_PAGE = 200;
/** Resumes after which a job is FAILED instead (a rebuild that kills its process every time). */
const MAX_RESUMES = 3;
const FOLD_BATCH = 5000;
const PROGRESS_EVERY_MS = 2000;
const POISON_KEPT = 100;

export type Poison = { position: string; stream: string; type: string; error: string };

type JobRecord = JsonObject & { id: string; status?: unknown; jobType?: unknown; data?: JsonObject };

/** A run stops at a step boundary: a cancel was asked (the runner ends the job `cancelled`), or the
 * job has ended elsewhere (nothing is left to write). */
class Stopped extends Error {
  readonly cancelled: boolean;
  constructor(cancelled: boolean) {
    super(cancelled ? 'cancelled' : 'the job ended elsewhere');
    this.cancelled = cancelled;
  }
}

/** What a run checks at each step boundary. */
type Boundary = () => Promise<void>;

export type ReadModelJobsOptions = {
  eventStore: EventStore;
  /** The service's runtime (the jobs' resource service). */
  runtime: Runtime;
  readStore: ReadStore;
  readModels: ReadModelSet;
  clock: Clock;
  logger?: Logger;
  instanceId?: string;
  leaseMs?: number;
  /** Whether this process runs jobs (ROLE worker or all); others only create them. */
  runs: boolean;
  /** The filter columns of each read model (its resource's), for refreshes of chosen documents. */
  catalogs: ReadonlyMap<string, { columns: ColumnCatalog; defaultSort: readonly string[] }>;
};

export class ReadModelJobs {
  readonly #o: ReadModelJobsOptions;
  readonly #jobs;
  readonly #instanceId: string;
  /** The jobs this process runs, from the moment it asks for their lease (a round trip to a
   * server store) to their end: idle() and stop() wait for them, and no request takes their
   * generation meanwhile. */
  readonly #running = new Map<string, Promise<void>>();
  /** Jobs whose generation this process reserved and whose record it has not created yet. */
  readonly #reserving = new Set<string>();
  #stopping = false;

  constructor(options: ReadModelJobsOptions) {
    this.#o = options;
    this.#jobs = options.runtime.service(jobDefinition);
    this.#instanceId = options.instanceId ?? `${process.pid.toString()}-${randomUUID()}`;
  }

  #ctx(extra: Partial<CommandContext> = {}): CommandContext {
    return { actor: READ_MODEL_JOB_ACTOR, now: this.#o.clock.now(), newId: randomUUID, ...extra };
  }

  async #command(jobId: string, command: JobCommand): Promise<void> {
    await this.#jobs.execute(jobId, command, this.#ctx());
  }

  /** The job's id: from the caller's Idempotency-Key when given (a retry finds the first job and
   * starts nothing), else random. */
  #jobIdFor(ctx: CommandContext, operation: string, name: string): string {
    if (ctx.idempotencyKey === undefined) return randomUUID();
    // Derived, in the form of a version 4 UUID (the form a create takes for a chosen id).
    const derived = uuidV5(`readModelJob|${operation}|${name}|${ctx.actor}|${ctx.idempotencyKey}`);
    return `${derived.slice(0, 14)}4${derived.slice(15)}`;
  }

  /** Creates a job for a request and starts it when this process runs jobs; answers its id. The
   * job is written by this runner's actor (only it writes READ_MODEL_* jobs), with the caller kept
   * in `data.requestedBy` and the request's ids in the metadata. */
  async #start(id: string, jobType: string, data: JsonObject, ctx: CommandContext): Promise<string> {
    const { idempotencyKey: _key, requestHash: _hash, ...request } = ctx;
    const created = await this.#jobs.create(
      { id, startDate: ctx.now.toISOString(), status: 'IN_PROGRESS', jobType, data: { ...data, requestedBy: ctx.actor } },
      { ...request, actor: READ_MODEL_JOB_ACTOR },
    );
    const record = created.record as JobRecord;
    if (this.#o.runs) void this.#claimAndRun(record, undefined);
    return record.id;
  }

  /** An earlier request's job under the same Idempotency-Key, if there is one. */
  async #existing(id: string): Promise<boolean> {
    try {
      await this.#jobs.get(id);
      return true;
    } catch (error) {
      if (error instanceof DomainError && error.status === 'NOT_FOUND') return false;
      throw error;
    }
  }

  /** Whether a job has ended (or does not exist): its reservation of a generation is then void. */
  readonly #isEnded = async (jobId: string): Promise<boolean> => {
    try {
      return isFinal((await this.#jobs.get(jobId)).status);
    } catch (error) {
      if (error instanceof DomainError && error.status === 'NOT_FOUND') return !this.#running.has(jobId) && !this.#reserving.has(jobId);
      throw error;
    }
  };

  /** Starts a recreate of a read model as a job (IN_PROGRESS at once); answers its id. The new
   * generation is reserved first, so of concurrent requests one gets the job and the others 409.
   * With `dropLive` the live generation is dropped at once (DELETE /indexes/{name}). */
  async recreate(name: string, ctx: CommandContext, options: { dropLive: boolean }): Promise<string> {
    const id = this.#jobIdFor(ctx, options.dropLive ? 'delete' : 'recreate', name);
    if (await this.#existing(id)) return id;
    this.#reserving.add(id);
    try {
      const generation = await this.#o.readModels.beginRebuild(name, id, { dropLive: options.dropLive, isEnded: this.#isEnded });
      if (generation === undefined) {
        const busy = this.#o.readModels.statuses().find((s) => s.name === name);
        throw new DomainError(
          'READ_MODEL.REBUILDING',
          `Read model ${name} is being rebuilt by job ${String(busy?.jobId)}; wait for it to end`,
          [],
          { status: 'CONFLICT' },
        );
      }
      try {
        return await this.#start(id, RECREATE, { indexName: name, dropLive: options.dropLive, generation }, ctx);
      } catch (error) {
        await this.#o.readModels.abandonRebuild(name, id);
        throw error;
      }
    } finally {
      this.#reserving.delete(id);
    }
  }

  /** The query of a refresh's Filtering on a read model: a 400 naming what is wrong, before any job. */
  refreshQuery(name: string, filtering: Pick<Filtering, 'filter' | 'sort'>): Query {
    const catalog = this.#o.catalogs.get(name);
    if (catalog === undefined)
      throw new DomainError('READ_MODEL.NOT_FILTERABLE', `Read model ${name} has no filter columns; recreate it instead`);
    if (this.#o.readModels.projection(name)?.sourcesOf === undefined) {
      throw new DomainError(
        'READ_MODEL.NOT_REFRESHABLE',
        `The documents of read model ${name} cannot be re-folded one by one; recreate it instead`,
      );
    }
    return toQuery(filtering, catalog.columns, catalog.defaultSort);
  }

  /** Starts a refresh of the documents of a read model that match a Filtering, as a job: each is
   * folded again from its streams and written when it differs (repairs drift). */
  async refresh(name: string, filtering: Pick<Filtering, 'filter' | 'sort'>, ctx: CommandContext): Promise<string> {
    this.refreshQuery(name, filtering);
    const id = this.#jobIdFor(ctx, 'refresh', name);
    if (await this.#existing(id)) return id;
    return this.#start(id, REFRESH, { indexName: name, filter: filtering.filter }, ctx);
  }

  /** The schedule that takes over jobs whose runner is gone: the jobs read model's IN_PROGRESS
   * READ_MODEL_* jobs, and (so a dropped jobs read model cannot hide the job rebuilding it) the
   * jobs the generation records name. */
  schedule(): Schedule {
    const query = toQuery(
      {
        filter: [
          { column: 'status', operator: 'EQ', value: 'IN_PROGRESS' },
          { column: 'jobType', operator: 'IN', values: JOB_TYPES },
        ],
        sort: [],
      },
      jobDefinition.columns,
      jobDefinition.defaultSort,
    );
    return {
      name: 'read-model-jobs',
      due: async () => {
        const listed = await dueInReadModel(this.#o.readStore, this.#o.readModels, jobDefinition.collection, query);
        const named = this.#o.readModels
          .statuses()
          .flatMap((s) => (s.jobId === null || listed.some((d) => d.id === s.jobId) ? [] : [s.jobId]));
        const reserved = await Promise.all(named.map((id) => this.#jobs.get(id).catch(() => undefined)));
        return [...listed, ...reserved.filter((r) => r?.status === 'IN_PROGRESS')] as Document[];
      },
      run: async (item) => {
        if (this.#running.has(item.id)) return true;
        const resumed = ((item.data as JsonObject | undefined)?.resumed as unknown[] | undefined)?.length ?? 0;
        return this.#claimAndRun(item, resumed);
      },
    };
  }

  /** Starts a job in the background if this process can take its lease (another may run it);
   * false when it cannot. `resumed` counts earlier resumes when the job is taken over. */
  async #claimAndRun(record: JobRecord, resumed: number | undefined): Promise<boolean> {
    if (this.#running.has(record.id)) return true;
    if (this.#stopping || isFinal(record.status)) return false;
    const lease = `job:${record.id}`;
    const leaseMs = this.#o.leaseMs ?? 15_000;
    // The slot is taken before the lease is asked for: the schedule and a start or a retry of the
    // same job in this process never both run it (they ask for the lease as the same owner).
    let ended: () => void = () => undefined;
    this.#running.set(record.id, new Promise<void>((r) => (ended = r)));
    const end = () => {
      this.#running.delete(record.id);
      ended();
    };
    const taken = await this.#o.readStore.tryLease(lease, this.#instanceId, leaseMs).catch((error: unknown) => {
      end();
      throw error;
    });
    if (!taken) {
      end();
      return false;
    }
    const held = { lost: false };
    const renew = setInterval(() => {
      void this.#o.readStore.tryLease(lease, this.#instanceId, leaseMs).then(
        (ok) => {
          if (!ok) held.lost = true;
        },
        () => undefined,
      );
    }, leaseMs / 3);
    const boundary: Boundary = async () => {
      assertHeld(held);
      await this.#assertGoingOn(record.id);
    };
    void this.#run(record, resumed, boundary, held).finally(async () => {
      clearInterval(renew);
      await this.#o.readStore.releaseLease(lease, this.#instanceId).catch(() => undefined);
      end();
    });
    return true;
  }

  async #run(record: JobRecord, resumed: number | undefined, boundary: Boundary, held: { lost: boolean }): Promise<void> {
    try {
      if (resumed !== undefined) {
        // A job cancelled while no process ran it ends now, without another resume.
        await boundary();
        if (resumed >= MAX_RESUMES) {
          await this.#fail(record, `stopped ${String(resumed)} times without finishing (the process running it ended); not resumed again`);
          return;
        }
        const started = record.data?.progress !== undefined;
        await this.#command(record.id, {
          type: 'Resume',
          reason: started
            ? 'the process running it ended before it finished; resumed from where it was'
            : 'taken up by a worker: no process was running it',
        });
      }
      if (record.jobType === REFRESH) await this.#refresh(record, boundary);
      else await this.#recreate(record, boundary);
    } catch (error) {
      if (error instanceof Stopped) {
        if (error.cancelled)
          await this.#endCancelled(record).catch((e: unknown) =>
            this.#o.logger?.error({ err: e, job: record.id }, 'could not end a cancelled read-model job'),
          );
        return;
      }
      const reason = error instanceof Error ? error.message : String(error);
      this.#o.logger?.error({ err: error, job: record.id }, 'read-model job failed');
      // A job whose lease passed to another runner is that runner's to end.
      if (!held.lost) await this.#fail(record, reason).catch(() => undefined);
    }
  }

  /** At a step boundary: goes on only while the job is IN_PROGRESS and no cancel was asked. */
  async #assertGoingOn(jobId: string): Promise<void> {
    const live = await this.#jobs.live(jobId);
    if (live === undefined || isFinal(live.fields.status)) throw new Stopped(false);
    if (cancelRequestOf(live.fields) !== undefined) throw new Stopped(true);
  }

  /** A rebuild that stops keeps what it has folded for a retry of the job (a new rebuild of the
   * model empties it); the live generation serves on. */
  async #giveUpGeneration(record: JobRecord): Promise<void> {
    const name = record.data?.indexName;
    if (typeof name === 'string' && this.#o.readModels.projection(name) !== undefined)
      await this.#o.readModels.abandonRebuild(name, record.id, { keep: true });
  }

  async #fail(record: JobRecord, reason: string): Promise<void> {
    await this.#giveUpGeneration(record);
    await this.#command(record.id, { type: 'Fail', reason });
  }

  async #endCancelled(record: JobRecord): Promise<void> {
    await this.#giveUpGeneration(record);
    await this.#command(record.id, { type: 'ConfirmCancel' });
  }

  /** A caller's retry of a FAILED job (409 otherwise): IN_PROGRESS again, resumed at once where
   * this process runs jobs, else by the scheduler of one that does. A recreate resumes the
   * generation it had loaded (with its catch-up), a refresh after the last page it recorded.
   * 409 while another rebuild of its read model runs. */
  async retry(jobId: string, ctx: CommandContext): Promise<WriteResult> {
    const live = await this.#jobs.live(jobId);
    const busy = live === undefined ? undefined : await this.#rebuiltByAnother(jobId, live.fields);
    const result = await this.#jobs.execute(jobId, { type: 'Retry', ...(busy === undefined ? {} : { unavailable: busy }) }, ctx);
    const record = result.record as JobRecord | undefined;
    if (this.#o.runs && result.written !== false && record?.status === 'IN_PROGRESS') {
      // A store that fails here leaves the job to the scheduler, which resumes it once it can.
      void this.#claimAndRun(record, undefined).catch((error: unknown) =>
        this.#o.logger?.error({ err: error, job: jobId }, 'could not resume a retried read-model job'),
      );
    }
    return result;
  }

  /** Why a recreate cannot be resumed now: another job is rebuilding its read model. */
  async #rebuiltByAnother(jobId: string, fields: JsonObject): Promise<string | undefined> {
    const name = (fields.data as JsonObject | undefined)?.indexName;
    if (fields.jobType !== RECREATE || typeof name !== 'string') return undefined;
    const other = this.#o.readModels.statuses().find((s) => s.name === name)?.jobId;
    if (other == null || other === jobId || (await this.#isEnded(other))) return undefined;
    return `read model ${name} is being rebuilt by job ${other}; retry once it has ended`;
  }

  /** Waits for the jobs running here (tests, shutdown). */
  async idle(): Promise<void> {
    await Promise.all([...this.#running.values()]);
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    await this.idle();
  }

  async #recreate(record: JobRecord, boundary: Boundary): Promise<void> {
    const started = Date.now();
    const name = String(record.data?.indexName);
    const base = this.#o.readModels.projection(name);
    if (base === undefined) throw new Error(`no read model ${JSON.stringify(name)}`);
    const { eventStore: events, readStore: reads } = this.#o;
    // The request reserved the generation (and dropped the live one for a delete); a retried job
    // takes the generation it stopped with again, never dropping what serves meanwhile.
    const kept = generationOf(record);
    const generation = await this.#o.readModels.beginRebuild(name, record.id, {
      dropLive: false,
      isEnded: this.#isEnded,
      ...(kept === undefined ? {} : { resume: kept }),
    });
    if (generation === undefined) throw new Error(`read model ${name} is being rebuilt by another job`);
    const projection = atGeneration(base, generation);
    await reads.ensureCollection(
      projection.collection,
      projection.indexedPaths,
      projection.textPaths === undefined ? undefined : { textPaths: projection.textPaths },
    );
    const poison: Poison[] = [];
    const notePoison = (e: Pick<RecordedEvent, 'position' | 'stream' | 'type'>, error: unknown) => {
      if (poison.length < POISON_KEPT)
        poison.push({
          position: e.position.toString(),
          stream: e.stream,
          type: e.type,
          error: error instanceof Error ? error.message : String(error),
        });
    };
    const resumedAt = await reads.checkpoint(projection.name);
    // A generation loaded before a restart (or a cancel) resumes with its catch-up.
    const folded = resumedAt === 0n ? await this.#foldInMemory(record.id, projection, generation, notePoison, boundary) : 0;
    // Catch up with what was written meanwhile, then swap; the projector goes on as the live one.
    await boundary();
    // Its own lease, whatever this process's ROLE (a worker folds no live read model).
    const projector = new Projector(projection, events, reads, { ...this.#o.readModels.options, followOnly: false });
    await projector.start();
    try {
      for (;;) {
        const head = await events.headPosition();
        if (await projector.waitFor(head, PROGRESS_EVERY_MS)) break;
        await this.#command(record.id, {
          type: 'Progress',
          progress: { phase: 'catch-up', generation, folded, position: projector.checkpoint.toString(), head: head.toString() },
        });
        await boundary();
      }
      for (const f of projector.status().failures) notePoison({ position: BigInt(f.position), stream: f.stream, type: f.type }, f.error);
      await boundary();
      if (!(await this.#o.readModels.swap(name, generation, record.id, projector)))
        throw new Error(`read model ${name}: the rebuild's reservation was lost before the swap`);
    } catch (error) {
      await projector.stop();
      throw error;
    }
    await this.#command(record.id, {
      type: 'Complete',
      result: {
        indexName: name,
        generation,
        folded,
        resumedFrom: resumedAt.toString(),
        documents: await reads.size(projection.collection),
        poison,
        took: `${String(Date.now() - started)} ms`,
      },
    });
  }

  async #refresh(record: JobRecord, boundary: Boundary): Promise<void> {
    const started = Date.now();
    const name = String(record.data?.indexName);
    const projection = this.#o.readModels.projection(name);
    if (projection?.sourcesOf === undefined) throw new Error(`read model ${name} cannot be refreshed document by document`);
    const query = this.refreshQuery(name, { filter: (record.data?.filter ?? []) as Filtering['filter'], sort: [] });
    const { readStore: reads } = this.#o;
    // A refresh resumed (after a restart or a retry) goes on after the last page it recorded.
    const { offset: from, counts, failures } = refreshProgress(record.data?.progress as JsonObject | undefined);
    for (let offset = from; ; offset += REFRESH_PAGE) {
      await boundary();
      const serving = this.#o.readModels.serving(name);
      const collection = serving.collection;
      const ids = await reads.findIds(collection, query, { offset, limit: REFRESH_PAGE });
      const writes = await this.#refoldPage(projection, ids, await reads.getMany(collection, ids), { counts, failures });
      await boundary();
      // The live projection's checkpoint is monotone: passing 0 leaves it where it is.
      await reads.applyBatch(collection, writes, 0n, serving.name);
      counts.repaired += writes.length;
      await this.#command(record.id, {
        type: 'Progress',
        progress: { phase: 'refresh', offset: offset + REFRESH_PAGE, ...counts, failures },
      });
      if (ids.length < REFRESH_PAGE) break;
    }
    await this.#command(record.id, {
      type: 'Complete',
      result: { indexName: name, ...counts, failures, took: `${String(Date.now() - started)} ms` },
    });
  }

  /** A page of documents folded again: the repair writes, the page counted into the tally. */
  async #refoldPage(
    projection: Projection,
    ids: readonly string[],
    stored: Map<string, Omit<VersionedDocument, 'id'>>,
    { counts, failures }: RefreshTally,
  ): Promise<DocumentWrite[]> {
    const writes: DocumentWrite[] = [];
    for (const id of ids) {
      const current = stored.get(id);
      if (current?.doc == null) continue;
      counts.matched++;
      try {
        const write = await this.#refold(projection, id, current);
        if (write === undefined) counts.unchanged++;
        else writes.push(write);
      } catch (error) {
        counts.failed++;
        if (failures.length < POISON_KEPT) failures.push({ id, error: error instanceof Error ? error.message : String(error) });
      }
    }
    return writes;
  }

  /** One document folded again from its streams; the repair write when it differs from the stored one. */
  async #refold(
    projection: Projection,
    id: string,
    current: { version: number; doc: Document | null; position?: Position },
  ): Promise<DocumentWrite | undefined> {
    if (current.doc === null || projection.sourcesOf === undefined) return undefined;
    const events = (await Promise.all(projection.sourcesOf(current.doc).map((s) => this.#o.eventStore.readStream(s)))).flat();
    events.sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0));
    const folded = foldFrom(projection, id, events);
    if (folded === undefined || deepEqual(folded.doc, current.doc)) return undefined;
    // A document folded from several streams counts its writes: it keeps the stored version, and
    // is written only when the log has nothing newer for it than the stored document.
    const multi = folded.position !== undefined;
    if (multi && current.position !== undefined && (folded.position ?? 0n) < current.position) return undefined;
    const version = multi ? current.version : folded.version;
    const at = folded.position === undefined ? {} : { position: folded.position };
    return folded.doc === null
      ? { kind: 'delete', id, version, ...at, repair: true }
      : { kind: 'upsert', id, version, doc: folded.doc, ...at, repair: true };
  }

  /** Folds the whole log of the projection's categories in memory, then loads the documents in
   * one pass (indexes built after the load); answers how many events it folded. */
  async #foldInMemory(
    jobId: string,
    projection: Projection,
    generation: number,
    notePoison: (e: RecordedEvent, error: unknown) => void,
    boundary: Boundary,
  ): Promise<number> {
    const { eventStore: events, readStore: reads } = this.#o;
    const head = await events.headPosition();
    const of = events.distance(0n, head);
    const documents = new Map<string, VersionedDocument>();
    let folded = 0;
    let after = 0n;
    let reported = Date.now();
    for (;;) {
      await boundary();
      const batch = await events.readAll({ after, limit: FOLD_BATCH, categories: projection.categories });
      for (const e of batch) foldOne(projection, documents, e, notePoison);
      folded += batch.length;
      after = batch.at(-1)?.position ?? after;
      if (batch.length < FOLD_BATCH) break;
      if (Date.now() - reported >= PROGRESS_EVERY_MS) {
        reported = Date.now();
        await this.#command(jobId, { type: 'Progress', progress: { phase: 'fold', generation, folded, of } });
      }
      await new Promise((r) => setImmediate(r));
    }
    await this.#command(jobId, { type: 'Progress', progress: { phase: 'load', generation, folded, of, documents: documents.size } });
    await boundary();
    // The checkpoint is where the fold stopped, or the head read before it when nothing of these
    // categories came after.
    await reads.bulkLoad(projection.collection, documents.values(), after > head ? after : head, projection.name);
    return folded;
  }
}

type RefreshTally = {
  counts: { matched: number; repaired: number; unchanged: number; failed: number };
  failures: { id: string; error: string }[];
};

/** Where a refresh recorded it was: the next page, its counts and the failures it kept. */
function refreshProgress(progress: JsonObject | undefined): RefreshTally & { offset: number } {
  const at = progress?.phase === 'refresh' ? progress : {};
  const n = (v: unknown): number => (typeof v === 'number' ? v : 0);
  return {
    offset: n(at.offset),
    counts: { matched: n(at.matched), repaired: n(at.repaired), unchanged: n(at.unchanged), failed: n(at.failed) },
    failures: Array.isArray(at.failures) ? [...(at.failures as { id: string; error: string }[])] : [],
  };
}

/** The generation a recreate last folded into: its progress's, else the one its request reserved. */
function generationOf(record: JobRecord): number | undefined {
  const kept = (record.data?.progress as JsonObject | undefined)?.generation ?? record.data?.generation;
  return typeof kept === 'number' ? kept : undefined;
}

/** A runner that lost its job's lease stops: another instance runs the job now. */
function assertHeld(held: { lost: boolean }): void {
  if (held.lost) throw new Error('the job lease passed to another instance');
}

/** One document folded from nothing over the events of its streams, in log order. */
function foldFrom(projection: Projection, id: string, events: readonly RecordedEvent[]): StoredDocument | undefined {
  let folded: StoredDocument | undefined;
  for (const e of events) {
    if (!projection.documentIds(e).includes(id)) continue;
    const write = projection.evolve(folded, e, id);
    if (write !== undefined) folded = storedOf(write);
  }
  return folded;
}

/** One event into the documents it changes; a poison event is noted and skipped. */
export function foldOne(
  projection: Projection,
  documents: Map<string, VersionedDocument>,
  e: RecordedEvent,
  notePoison: (e: RecordedEvent, error: unknown) => void,
): void {
  try {
    const query = projection.selectDocuments?.(e);
    const selected =
      query === undefined
        ? []
        : [...documents.values()].flatMap((d) => (d.doc !== null && matchesAll(d.doc, query.conditions) ? [d.id] : []));
    for (const id of [...projection.documentIds(e), ...selected]) {
      const write = projection.evolve(documents.get(id), e, id);
      if (write !== undefined) documents.set(id, { id, ...storedOf(write) });
    }
  } catch (error) {
    notePoison(e, error);
  }
}
