// Runs one projection: catch up from its checkpoint in batches, then follow the log live. Each
// batch's writes and checkpoint go to the read store together, so a crash mid-batch replays the
// batch, and the version guard makes the replay harmless.
// When several instances share a read store, one of them holds the projection's lease and writes;
// the others stand by, follow its checkpoint (so their `waitFor` still answers) and take over
// when the lease lapses.

import { randomUUID } from 'node:crypto';
import type { Document, DocumentWrite, EventStore, Position, ReadStore, RecordedEvent } from '../domain/ports.ts';
import type { Projection, ReadModels, ReadModelStatus, StoredDocument } from '../projections/projection.ts';

type ProjectionFailure = ReadModelStatus['failures'][number];

type Logger = { error: (obj: object, msg: string) => void };

export type ProjectorOptions = {
  batchSize?: number;
  logger?: Logger;
  now?: () => Date;
  /** Who this process is when taking leases; one random id per process by default. */
  instanceId?: string;
  /** How long a lease lasts unless renewed; renewed at a third of it. */
  leaseMs?: number;
};

const DEFAULT_INSTANCE = `${process.pid.toString()}-${randomUUID()}`;
/** Bound of the positions remembered for lagMs (coalesced beyond it, so the figure only grows). */
const MAX_UNSEEN = 10_000;
/** How often a standby instance re-reads the active one's checkpoint. */
const STANDBY_POLL_MS = 250;

export class Projector {
  readonly projection: Projection;
  readonly #events: EventStore;
  readonly #reads: ReadStore;
  readonly #batchSize: number;
  readonly #logger: Logger | undefined;
  readonly #now: () => Date;
  readonly #instanceId: string;
  readonly #leaseMs: number;
  #active = false;
  #initialized = false;
  #leaseCheckedAt = Number.NEGATIVE_INFINITY;
  #leaseValidUntil = Number.NEGATIVE_INFINITY;
  #checkpoint: Position = 0n;
  #head: Position = 0n;
  #running = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #unsubscribe: (() => void) | undefined;
  #waiters: { position: Position; resolve: () => void }[] = [];
  /** When (by this projector's clock) it first saw log positions it has not folded yet, oldest
   * first, coalesced per millisecond and bounded: the age of the first is the model's lag in ms. */
  #unseen: { position: Position; seenAt: number }[] = [];
  readonly #failures: ProjectionFailure[] = [];

  constructor(projection: Projection, events: EventStore, reads: ReadStore, options: ProjectorOptions = {}) {
    this.projection = projection;
    this.#events = events;
    this.#reads = reads;
    this.#batchSize = options.batchSize ?? 1000;
    this.#logger = options.logger;
    this.#now = options.now ?? (() => new Date());
    this.#instanceId = options.instanceId ?? DEFAULT_INSTANCE;
    this.#leaseMs = options.leaseMs ?? 15_000;
  }

  /** A method, not the field, so checks after an await are not narrowed away by the compiler. */
  isRunning(): boolean {
    return this.#running;
  }

  get checkpoint(): Position {
    return this.#checkpoint;
  }

  /** Starts following the log. A store that does not answer yet does not fail the start: the
   * projector keeps trying, and /health/ready says what is wrong meanwhile. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#unsubscribe = this.#events.onAppended((p) => {
      if (p > this.#head) this.#head = p;
      this.#notice(p);
      this.#wake?.();
    });
    try {
      await this.#init();
    } catch (error) {
      this.#logger?.error({ err: error, projection: this.projection.name }, 'projection cannot start yet; retrying');
    }
    this.#loop = this.#run();
  }

  async #init(): Promise<void> {
    await this.#reads.ensureCollection(this.projection.collection, this.projection.indexedPaths);
    const stored = await this.#reads.checkpoint(this.projection.name);
    if (stored > this.#checkpoint) this.#advanceTo(stored);
    const head = await this.#events.headPosition();
    if (head > this.#head) this.#head = head;
    this.#notice(head);
    this.#initialized = true;
  }

  #notice(position: Position): void {
    if (position <= this.#checkpoint) return;
    const seenAt = this.#now().getTime();
    const last = this.#unseen.at(-1);
    if (last !== undefined && (last.seenAt >= seenAt || this.#unseen.length >= MAX_UNSEEN)) {
      if (position > last.position) last.position = position;
      return;
    }
    this.#unseen.push({ position, seenAt });
  }

  /** The checkpoint moved: what it passed is folded. */
  #advanceTo(position: Position): void {
    this.#checkpoint = position;
    const firstUnseen = this.#unseen.findIndex((u) => u.position > position);
    this.#unseen = firstUnseen < 0 ? [] : this.#unseen.slice(firstUnseen);
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#unsubscribe?.();
    this.#wake?.();
    await this.#loop;
    if (this.#active) {
      this.#active = false;
      await this.#reads.releaseLease(this.projection.name, this.#instanceId).catch((error: unknown) => {
        this.#logger?.error({ err: error, projection: this.projection.name }, 'could not release the projection lease');
      });
    }
  }

  /** Takes or renews the lease when a third of it has passed; true while this instance writes. A
   * renewal that fails leaves the instance passive, so two instances never write at once. */
  async #holdLease(): Promise<boolean> {
    const now = this.#now().getTime();
    if (now - this.#leaseCheckedAt >= this.#leaseMs / 3) {
      this.#active = false;
      this.#active = await this.#reads.tryLease(this.projection.name, this.#instanceId, this.#leaseMs);
      this.#leaseCheckedAt = now;
      // Measured from before the request, and short of the lease by a margin for clock drift.
      if (this.#active) this.#leaseValidUntil = now + this.#leaseMs * 0.8;
    }
    return this.#active;
  }

  /** Refuses to write a batch when the lease may have passed to another instance meanwhile (a
   * long batch, a paused process): the run loop renews or stands by and the batch is read again. */
  #assertLeaseValid(): void {
    if (this.#now().getTime() >= this.#leaseValidUntil) {
      this.#active = false;
      this.#leaseCheckedAt = Number.NEGATIVE_INFINITY;
      throw new Error(`the lease on ${this.projection.name} ran out before the batch was written`);
    }
  }

  /** Another instance writes this model: follow its checkpoint for a while, then try the lease again. */
  async #standBy(): Promise<void> {
    const stored = await this.#reads.checkpoint(this.projection.name);
    if (stored > this.#checkpoint) {
      this.#advanceTo(stored);
      this.#release();
    }
    // The head moves through onAppended, which hears every instance's appends.
    await this.#idle(STANDBY_POLL_MS);
  }

  /** Waits for news from the log, or at most `ms`. */
  async #idle(ms: number): Promise<void> {
    if (!this.isRunning()) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.#wake = () => {
        clearTimeout(timer);
        resolve();
      };
      if (this.#active && this.#head > this.#checkpoint) this.#wake();
    });
    this.#wake = undefined;
  }

  async #run(): Promise<void> {
    while (this.#running) {
      try {
        if (!this.#initialized) await this.#init();
        if (!(await this.#holdLease())) {
          await this.#standBy();
          continue;
        }
        const caughtUp = await this.#step();
        // The embedded stores answer synchronously: without this a long catch-up would never let
        // the event loop serve requests.
        await new Promise((r) => setImmediate(r));
        // Idle no longer than the lease renewal interval, so an idle owner keeps its lease.
        if (caughtUp) await this.#idle(this.#leaseMs / 3);
      } catch (error) {
        // A store failure, not bad data: keep the checkpoint and try again shortly.
        this.#logger?.error({ err: error, projection: this.projection.name }, 'projection batch failed; retrying');
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Applies one batch; true when the log had nothing more for this projection. */
  async #step(): Promise<boolean> {
    const head = await this.#events.headPosition();
    if (head > this.#head) this.#head = head;
    const events = await this.#events.readAll({
      after: this.#checkpoint,
      limit: this.#batchSize,
      categories: this.projection.categories,
    });
    const complete = events.length < this.#batchSize;
    const last = events.at(-1)?.position ?? this.#checkpoint;
    // A short batch saw every event of our categories up to the head read before it.
    const next = complete && head > last ? head : last;
    if (next === this.#checkpoint) return true;
    const writes = await this.#fold(events);
    await this.#apply(writes, next);
    this.#advanceTo(next);
    this.#release();
    return complete;
  }

  /** Writes a batch; when the store refuses it but is healthy, writes one document at a time and
   * records and skips the documents it refuses, so one bad document cannot stall the model. */
  async #apply(writes: readonly DocumentWrite[], next: Position): Promise<void> {
    const { collection, name } = this.projection;
    this.#assertLeaseValid();
    try {
      await this.#reads.applyBatch(collection, writes, next, name);
      return;
    } catch (error) {
      if (writes.length === 0) throw error;
    }
    // Throws (and the batch is retried later) when the store itself is failing.
    await this.#reads.applyBatch(collection, [], this.#checkpoint, name);
    for (const w of writes) {
      this.#assertLeaseValid();
      try {
        await this.#reads.applyBatch(collection, [w], this.#checkpoint, name);
      } catch (error) {
        this.#recordFailure({ position: next, stream: `${collection}/${w.id}`, type: `document ${w.kind}` }, error);
      }
    }
    await this.#reads.applyBatch(collection, [], next, name);
  }

  async #fold(events: readonly RecordedEvent[]): Promise<DocumentWrite[]> {
    const ids = new Set<string>();
    for (const e of events) {
      const id = this.projection.documentId(e);
      if (id !== undefined) ids.add(id);
    }
    const stored = await this.#reads.getMany(this.projection.collection, [...ids]);
    const current = new Map<string, StoredDocument>(stored);
    const writes = new Map<string, DocumentWrite>();
    for (const e of events) {
      const id = this.projection.documentId(e);
      if (id === undefined) continue;
      try {
        const write = this.projection.evolve(current.get(id), e);
        if (write === undefined) continue;
        writes.set(id, write);
        current.set(id, { version: write.version, doc: write.kind === 'upsert' ? write.doc : (null as Document | null) });
      } catch (error) {
        this.#recordFailure(e, error);
      }
    }
    return [...writes.values()];
  }

  #recordFailure(e: Pick<RecordedEvent, 'position' | 'stream' | 'type'>, error: unknown): void {
    const failure = {
      position: e.position.toString(),
      stream: e.stream,
      type: e.type,
      error: error instanceof Error ? error.message : String(error),
      at: this.#now().toISOString(),
    };
    this.#failures.push(failure);
    if (this.#failures.length > 100) this.#failures.shift();
    this.#logger?.error({ projection: this.projection.name, ...failure }, 'event skipped by projection');
  }

  #release(): void {
    const ready = this.#waiters.filter((w) => w.position <= this.#checkpoint);
    this.#waiters = this.#waiters.filter((w) => w.position > this.#checkpoint);
    for (const w of ready) w.resolve();
  }

  /** Resolves true once the read model reflects `position`, false after `timeoutMs`. */
  waitFor(position: Position, timeoutMs: number): Promise<boolean> {
    if (position <= this.#checkpoint) return Promise.resolve(true);
    this.#wake?.();
    return new Promise((resolve) => {
      const waiter = {
        position,
        resolve: () => {
          clearTimeout(timer);
          resolve(true);
        },
      };
      const timer = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== waiter);
        resolve(false);
      }, timeoutMs);
      this.#waiters.push(waiter);
    });
  }

  status(): ReadModelStatus {
    const lag = this.#events.distance(this.#checkpoint, this.#head);
    return {
      name: this.projection.name,
      active: this.#active,
      collection: this.projection.collection,
      position: this.#checkpoint.toString(),
      lag,
      // By this projector's own clock: how long the oldest position it has not folded has waited.
      lagMs: lag === 0 || this.#unseen[0] === undefined ? 0 : Math.max(0, this.#now().getTime() - this.#unseen[0].seenAt),
      failures: [...this.#failures],
    };
  }
}

/** One projector per projection, answering for all of them. */
export function projectorGroup(
  projections: readonly Projection[],
  events: EventStore,
  reads: ReadStore,
  options: ProjectorOptions = {},
): ReadModels & { projectors: Projector[]; start(): Promise<void>; stop(): Promise<void> } {
  const projectors = projections.map((p) => new Projector(p, events, reads, options));
  const byCollection = new Map(projectors.map((p) => [p.projection.collection, p]));
  return {
    projectors,
    waitFor: (collection, position, timeoutMs) => {
      const projector = byCollection.get(collection);
      // A caller naming a read model that does not exist is a mistake in the code, not a lag.
      if (projector === undefined) return Promise.reject(new Error(`no read model ${JSON.stringify(collection)} to wait for`));
      return projector.waitFor(position, timeoutMs);
    },
    statuses: () => projectors.map((p) => p.status()),
    start: async () => {
      await Promise.all(projectors.map((p) => p.start()));
    },
    stop: async () => {
      await Promise.all(projectors.map((p) => p.stop()));
    },
  };
}
