// Every read model of the process, each served by one *generation* of its collection. A rebuild
// (recreate) folds the log into a new generation beside the live one, which keeps serving, and
// swaps it in once it has caught up; so searches never see a half-built model. Which generation
// is live is kept in the read store (collection `read_model_generations`), so a restart, or
// another instance, serves the same one: generation 0 is the read model's plain collection,
// generation n its `<collection>__g<n>`.

import type { EventStore, Position, ReadStore } from '../domain/ports.ts';
import { unavailable } from '../domain/shared/errors.ts';
import type { Projection, ReadModels, ReadModelStatus } from '../projections/projection.ts';
import { Projector, type ProjectorOptions } from './projector.ts';

export const GENERATIONS = 'read_model_generations';
/** How often an instance re-reads which generations are live (another instance may have swapped). */
const GENERATIONS_POLL_MS = 1000;

/** Which generation serves a read model, which one is being built (by which job), and which one
 * was replaced and is dropped a little later (other instances may still read it until they poll). */
export type GenerationRecord = { live: number | null; building: number | null; jobId: string | null; retired?: number | null };

/** How long a replaced generation is kept after a swap: longer than every instance's poll. */
const RETIRE_AFTER_MS = 5 * GENERATIONS_POLL_MS;

/** The projection writing generation `g` of a read model: its own collection and checkpoint. */
export const atGeneration = (projection: Projection, generation: number): Projection =>
  generation === 0
    ? projection
    : { ...projection, name: `${projection.name}__g${String(generation)}`, collection: `${projection.collection}__g${String(generation)}` };

type Slot = {
  projection: Projection;
  record: GenerationRecord;
  /** Stored version of the record, for its version-guarded writes. */
  version: number;
  live: Projector | undefined;
  /** Generation being swapped in by this process: not torn down by a poll meanwhile. */
  swapping: boolean;
};

/** live: a generation serves it; rebuilding: one is being built (searches 503 when none serves);
 * failed: none serves and none is being built (its rebuild failed: recreate it). */
export type ReadModelState = 'live' | 'rebuilding' | 'failed';

export type ReadModelSetStatus = ReadModelStatus & {
  generation: number | null;
  state: ReadModelState;
  building: number | null;
  jobId: string | null;
};

const sameRecord = (doc: Record<string, unknown> | null, record: GenerationRecord): boolean =>
  doc !== null &&
  doc.live === record.live &&
  doc.building === record.building &&
  doc.jobId === record.jobId &&
  (doc.retired ?? null) === (record.retired ?? null);

export class ReadModelSet implements ReadModels {
  readonly #slots = new Map<string, Slot>();
  readonly #events: EventStore;
  readonly #reads: ReadStore;
  readonly #options: ProjectorOptions;
  #poll: NodeJS.Timeout | undefined;
  readonly #retiring = new Set<NodeJS.Timeout>();
  #started = false;

  constructor(projections: readonly Projection[], events: EventStore, reads: ReadStore, options: ProjectorOptions = {}) {
    this.#events = events;
    this.#reads = reads;
    this.#options = options;
    for (const projection of projections) {
      this.#slots.set(projection.name, {
        projection,
        record: { live: 0, building: null, jobId: null },
        version: -1,
        live: undefined,
        swapping: false,
      });
    }
  }

  get names(): string[] {
    return [...this.#slots.keys()];
  }

  projection(name: string): Projection | undefined {
    return this.#slots.get(name)?.projection;
  }

  #slot(name: string): Slot {
    const slot = this.#slots.get(name);
    // A caller naming a read model that does not exist is a mistake in the code, not a lag.
    if (slot === undefined) throw new Error(`no read model ${JSON.stringify(name)}`);
    return slot;
  }

  async start(): Promise<void> {
    if (this.#started) return;
    this.#started = true;
    try {
      await this.#reads.ensureCollection(GENERATIONS, []);
      await this.#loadRecords();
    } catch (error) {
      // A store that does not answer yet: serve generation 0 and learn the truth on the next poll.
      this.#options.logger?.error({ err: error }, 'read-model generations unreadable; retrying');
    }
    await Promise.all([...this.#slots.values()].map((slot) => this.#serve(slot)));
    // A replaced generation a stopped process did not get to drop.
    for (const slot of this.#slots.values()) if (slot.record.retired != null) this.#retireLater(slot);
    this.#poll = setInterval(() => void this.#refresh(), GENERATIONS_POLL_MS);
    this.#poll.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#poll);
    for (const timer of this.#retiring) clearTimeout(timer);
    this.#retiring.clear();
    this.#started = false;
    await Promise.all([...this.#slots.values()].map(async (slot) => slot.live?.stop()));
  }

  async #loadRecords(): Promise<Map<string, { record: GenerationRecord; version: number }>> {
    const stored = await this.#reads.getMany(GENERATIONS, this.names);
    const found = new Map<string, { record: GenerationRecord; version: number }>();
    for (const [name, { version, doc }] of stored) {
      if (doc === null) continue;
      const record = {
        live: doc.live as number | null,
        building: doc.building as number | null,
        jobId: doc.jobId as string | null,
        retired: (doc.retired ?? null) as number | null,
      };
      found.set(name, { record, version });
      const slot = this.#slots.get(name);
      // Never older than what this instance wrote or read since (a slow read answers late).
      if (slot !== undefined && !slot.swapping && version >= slot.version) {
        slot.record = record;
        slot.version = version;
      }
    }
    return found;
  }

  /** Starts the projector of the live generation when none runs for it. */
  async #serve(slot: Slot): Promise<void> {
    const live = slot.record.live;
    const wanted = live === null ? undefined : atGeneration(slot.projection, live).name;
    if (slot.live?.projection.name === wanted) return;
    const old = slot.live;
    slot.live = live === null ? undefined : new Projector(atGeneration(slot.projection, live), this.#events, this.#reads, this.#options);
    await old?.stop();
    await slot.live?.start();
  }

  /** Another instance may have swapped a generation in, or dropped one. */
  async #refresh(): Promise<void> {
    try {
      await this.#loadRecords();
      for (const slot of this.#slots.values()) if (!slot.swapping) await this.#serve(slot);
    } catch (error) {
      this.#options.logger?.error({ err: error }, 'read-model generations unreadable; retrying');
    }
  }

  /** Writes a read model's generation record over the version it was read at: a compare-and-set,
   * so of two instances (or two requests) changing it at once exactly one succeeds. */
  async #write(slot: Slot, record: GenerationRecord, readAt: number): Promise<boolean> {
    const version = readAt + 1;
    await this.#reads.applyBatch(
      GENERATIONS,
      [{ kind: 'upsert', id: slot.projection.name, version, doc: { id: slot.projection.name, ...record } }],
      0n,
      GENERATIONS,
    );
    const stored = (await this.#reads.getMany(GENERATIONS, [slot.projection.name])).get(slot.projection.name);
    if (stored?.version !== version || !sameRecord(stored.doc, record)) return false;
    slot.record = record;
    slot.version = version;
    return true;
  }

  /** The stored record of a read model, read now. */
  async #current(slot: Slot): Promise<{ record: GenerationRecord; version: number }> {
    const found = (await this.#loadRecords()).get(slot.projection.name);
    return found ?? { record: { live: 0, building: null, jobId: null }, version: -1 };
  }

  /** Drops a replaced generation once every instance has had time to see the swap. */
  #retireLater(slot: Slot): void {
    const timer = setTimeout(() => {
      this.#retiring.delete(timer);
      void this.#retire(slot).catch((error: unknown) =>
        this.#options.logger?.error(
          { err: error, readModel: slot.projection.name },
          'could not drop a replaced generation; trying again at the next start',
        ),
      );
    }, RETIRE_AFTER_MS);
    timer.unref();
    this.#retiring.add(timer);
  }

  async #retire(slot: Slot): Promise<void> {
    const { record, version } = await this.#current(slot);
    if (record.retired == null || record.retired === record.live || record.retired === record.building) return;
    const dropped = atGeneration(slot.projection, record.retired);
    await this.#reads.reset(dropped.collection, dropped.name);
    await this.#write(slot, { ...record, retired: null }, version);
  }

  /** The physical collection serving a read model now; 503 while it has none (deleted, rebuilding). */
  collectionOf(name: string): string {
    const slot = this.#slot(name);
    if (slot.record.live === null) {
      throw unavailable(
        'READ_MODEL.REBUILDING',
        `Read model ${name} is rebuilding from the log; retry when GET /api/v1/indexes shows it live`,
      );
    }
    return atGeneration(slot.projection, slot.record.live).collection;
  }

  /** The projection writing the generation that serves a read model now (its collection and
   * checkpoint name); 503 like collectionOf while none serves. */
  serving(name: string): Projection {
    const slot = this.#slot(name);
    this.collectionOf(name);
    return atGeneration(slot.projection, slot.record.live ?? 0);
  }

  waitFor(name: string, position: Position, timeoutMs: number): Promise<boolean> {
    const slot = this.#slot(name);
    if (slot.live === undefined) return Promise.resolve(false);
    return slot.live.waitFor(position, timeoutMs);
  }

  statuses(): ReadModelSetStatus[] {
    return [...this.#slots.values()].map((slot) => {
      const base: ReadModelStatus = slot.live?.status() ?? {
        name: slot.projection.name,
        collection: slot.projection.collection,
        active: false,
        position: '0',
        lag: 0,
        lagMs: 0,
        failures: [],
      };
      return {
        ...base,
        name: slot.projection.name,
        generation: slot.record.live,
        state: slot.record.building !== null ? 'rebuilding' : slot.record.live === null ? 'failed' : 'live',
        building: slot.record.building,
        jobId: slot.record.jobId,
      };
    });
  }

  /**
   * Reserves the next generation of a read model for a rebuild by `jobId`, or answers the one that
   * job reserved already (a rebuild resumed after a restart). With `dropLive`, the live
   * generation is dropped at once and the read model answers 503 until the rebuild swaps in.
   * `resume`: the generation a failed or cancelled rebuild of this job left (abandonRebuild with
   * `keep`), taken again as it is when no other rebuild holds it and it does not serve (a retried
   * job resumes where it stopped); a generation reserved anew is emptied first.
   * Answers undefined when another job holds the reservation (and `isRunning` says it still runs).
   */
  async beginRebuild(
    name: string,
    jobId: string,
    options: { dropLive: boolean; isEnded?: (jobId: string) => Promise<boolean>; resume?: number },
  ): Promise<number | undefined> {
    const slot = this.#slot(name);
    const { record, version } = await this.#current(slot);
    if (record.building !== null && record.jobId === jobId) return record.building;
    if (record.building !== null && record.jobId !== null && !(await options.isEnded?.(record.jobId))) return undefined;
    // A generation a failed rebuild left was dropped with its checkpoint, or is dropped now: it may be used again.
    if (record.building !== null) {
      const left = atGeneration(slot.projection, record.building);
      await this.#reads.reset(left.collection, left.name);
    }
    const generation = await this.#generationFor(slot, record, options.resume);
    const live = options.dropLive ? null : record.live;
    if (!(await this.#write(slot, { live, building: generation, jobId, retired: record.retired ?? null }, version))) return undefined;
    if (options.dropLive && record.live !== null) {
      const old = atGeneration(slot.projection, record.live);
      await this.#serve(slot);
      await this.#reads.reset(old.collection, old.name);
    }
    return generation;
  }

  /** The generation a rebuild reserves: the one it stopped with when free and not serving, else
   * the next one, emptied of what a stopped rebuild of another job (or one before a swap that made
   * it stale) kept there. */
  async #generationFor(slot: Slot, record: GenerationRecord, resume: number | undefined): Promise<number> {
    if (resume !== undefined && resume > 0 && record.building === null && resume !== record.live && resume !== record.retired)
      return resume;
    const generation = Math.max(record.live ?? 0, record.retired ?? 0) + 1;
    const fresh = atGeneration(slot.projection, generation);
    await this.#reads.reset(fresh.collection, fresh.name);
    return generation;
  }

  /** Makes a caught-up generation the live one (its projector goes on following the log); the
   * generation it replaces is dropped a little later. False when the reservation was lost. */
  async swap(name: string, generation: number, jobId: string, projector: Projector): Promise<boolean> {
    const slot = this.#slot(name);
    slot.swapping = true;
    try {
      const { record, version } = await this.#current(slot);
      if (record.jobId !== jobId || record.building !== generation) return false;
      if (!(await this.#write(slot, { live: generation, building: null, jobId: null, retired: record.live }, version))) return false;
      const old = slot.live;
      slot.live = projector;
      await old?.stop();
      if (record.live !== null) this.#retireLater(slot);
      return true;
    } finally {
      slot.swapping = false;
    }
  }

  /** A rebuild that cannot finish gives its generation up (the live one, if any, keeps serving;
   * a dropped model with none is `failed` until recreated). With `keep` what it folded stays
   * (with its checkpoint), for a retry of the job to resume from (beginRebuild's `resume`); the
   * next rebuild that reserves it anew empties it. */
  async abandonRebuild(name: string, jobId: string, options: { keep?: boolean } = {}): Promise<void> {
    const slot = this.#slot(name);
    const { record, version } = await this.#current(slot);
    if (record.jobId !== jobId || record.building === null) return;
    const building = atGeneration(slot.projection, record.building);
    await this.#write(slot, { ...record, building: null, jobId: null }, version);
    if (options.keep !== true) await this.#reads.reset(building.collection, building.name);
  }

  /** The projector options, for a rebuild's own projector. */
  get options(): ProjectorOptions {
    return this.#options;
  }
}
