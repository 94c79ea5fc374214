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

/** Which generation serves a read model, and which one is being built (by which job). */
export type GenerationRecord = { live: number | null; building: number | null; jobId: string | null };

/** The projection writing generation `g` of a read model: its own collection and checkpoint. */
export const atGeneration = (projection: Projection, generation: number): Projection =>
  generation === 0 ? projection : { ...projection, name: `${projection.name}__g${String(generation)}`, collection: `${projection.collection}__g${String(generation)}` };

type Slot = {
  projection: Projection;
  record: GenerationRecord;
  /** Stored version of the record, for its version-guarded writes. */
  version: number;
  live: Projector | undefined;
  /** Generation being swapped in by this process: not torn down by a poll meanwhile. */
  swapping: boolean;
};

export type ReadModelState = 'live' | 'rebuilding';

export type ReadModelSetStatus = ReadModelStatus & { generation: number | null; state: ReadModelState; building: number | null; jobId: string | null };

export class ReadModelSet implements ReadModels {
  readonly #slots = new Map<string, Slot>();
  readonly #events: EventStore;
  readonly #reads: ReadStore;
  readonly #options: ProjectorOptions;
  #poll: NodeJS.Timeout | undefined;
  #started = false;

  constructor(projections: readonly Projection[], events: EventStore, reads: ReadStore, options: ProjectorOptions = {}) {
    this.#events = events;
    this.#reads = reads;
    this.#options = options;
    for (const projection of projections) {
      this.#slots.set(projection.name, { projection, record: { live: 0, building: null, jobId: null }, version: -1, live: undefined, swapping: false });
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
    this.#poll = setInterval(() => void this.#refresh(), GENERATIONS_POLL_MS);
    this.#poll.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#poll);
    this.#started = false;
    await Promise.all([...this.#slots.values()].map(async (slot) => slot.live?.stop()));
  }

  async #loadRecords(): Promise<Map<string, { record: GenerationRecord; version: number }>> {
    const stored = await this.#reads.getMany(GENERATIONS, this.names);
    const found = new Map<string, { record: GenerationRecord; version: number }>();
    for (const [name, { version, doc }] of stored) {
      if (doc === null) continue;
      const record = { live: doc.live as number | null, building: doc.building as number | null, jobId: doc.jobId as string | null };
      found.set(name, { record, version });
      const slot = this.#slots.get(name);
      if (slot !== undefined && !slot.swapping) {
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

  async #write(slot: Slot, record: GenerationRecord): Promise<void> {
    const version = slot.version + 1;
    await this.#reads.applyBatch(GENERATIONS, [{ kind: 'upsert', id: slot.projection.name, version, doc: { id: slot.projection.name, ...record } }], 0n, GENERATIONS);
    // The write is version-guarded: read back what is stored, so a lost race shows.
    const stored = (await this.#reads.getMany(GENERATIONS, [slot.projection.name])).get(slot.projection.name);
    if (stored?.version !== version || stored.doc?.jobId !== record.jobId) {
      throw new Error(`read model ${slot.projection.name}: another instance changed its generations meanwhile`);
    }
    slot.record = record;
    slot.version = version;
  }

  /** The physical collection serving a read model now; 503 while it has none (deleted, rebuilding). */
  collectionOf(name: string): string {
    const slot = this.#slot(name);
    if (slot.record.live === null) {
      throw unavailable('READ_MODEL.REBUILDING', `Read model ${name} is rebuilding from the log; retry when GET /api/v1/indexes shows it live`);
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
        state: slot.record.live === null || slot.record.building !== null ? 'rebuilding' : 'live',
        building: slot.record.building,
        jobId: slot.record.jobId,
      };
    });
  }

  /**
   * Reserves the next generation of a read model for a rebuild by `jobId`, or answers the one that
   * job reserved already (a rebuild resumed after a restart). With `dropLive`, the live
   * generation is dropped at once and the read model answers 503 until the rebuild swaps in.
   * Refused while another job rebuilds it.
   */
  async beginRebuild(name: string, jobId: string, options: { dropLive: boolean }): Promise<number> {
    const slot = this.#slot(name);
    await this.#loadRecords();
    const { record } = slot;
    if (record.building !== null && record.jobId === jobId) return record.building;
    if (record.building !== null) throw new Error(`read model ${name} is being rebuilt by job ${String(record.jobId)}`);
    // A generation a failed rebuild left was dropped with its checkpoint: it may be used again.
    const generation = (record.live ?? 0) + 1;
    const live = options.dropLive ? null : record.live;
    await this.#write(slot, { live, building: generation, jobId });
    if (options.dropLive && record.live !== null) {
      const old = atGeneration(slot.projection, record.live);
      await this.#serve(slot);
      await this.#reads.reset(old.collection, old.name);
    }
    return generation;
  }

  /** Makes a caught-up generation the live one (its projector goes on following the log) and
   * drops the generation it replaces. */
  async swap(name: string, generation: number, projector: Projector): Promise<void> {
    const slot = this.#slot(name);
    slot.swapping = true;
    try {
      const before = slot.record.live;
      await this.#write(slot, { live: generation, building: null, jobId: null });
      const old = slot.live;
      slot.live = projector;
      await old?.stop();
      if (before !== null && before !== generation) {
        const dropped = atGeneration(slot.projection, before);
        await this.#reads.reset(dropped.collection, dropped.name);
      }
    } finally {
      slot.swapping = false;
    }
  }

  /** A rebuild that cannot finish gives its generation up (the live one, if any, keeps serving). */
  async abandonRebuild(name: string, jobId: string): Promise<void> {
    const slot = this.#slot(name);
    await this.#loadRecords();
    if (slot.record.jobId !== jobId || slot.record.building === null) return;
    const building = atGeneration(slot.projection, slot.record.building);
    await this.#write(slot, { ...slot.record, building: null, jobId: null });
    await this.#reads.reset(building.collection, building.name);
    // A dropped model with no generation left is rebuilt by the next recreate.
  }

  /** The projector options, for a rebuild's own projector. */
  get options(): ProjectorOptions {
    return this.#options;
  }
}
