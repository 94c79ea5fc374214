// The one way to follow the log. A processor reads the events of some categories from its
// checkpoint in batches (catch-up), then follows live appends; it holds a lease so that one
// instance of a group writes, while the others stand by and follow its checkpoint (so their
// `waitFor` still answers) and take over when the lease lapses. What it does with a batch is its
// handler's: a projection folds it into documents (projector.ts), a reactor turns it into commands
// (reactor.ts). A handler must make a replayed batch harmless: after a crash between its work and
// its checkpoint, the batch comes again.

import { randomUUID } from 'node:crypto';
import type { EventStore, Position, ReadStore, RecordedEvent } from '../domain/ports.ts';
import { traced } from './tracing.ts';

export type Logger = { error: (obj: object, msg: string) => void };

export type ProcessorFailure = { position: string; stream: string; type: string; error: string; at: string };

/** What a handler gets with each batch besides its events. */
export type BatchContext = {
  /** Throws when the lease may have passed to another instance: call it before every write. */
  assertLease(): void;
  /** Notes an event (or a document) the handler skipped, so it cannot stall the processor. */
  recordFailure(event: Pick<RecordedEvent, 'position' | 'stream' | 'type'>, error: unknown): void;
  now(): Date;
  /** Resolves once the log's head has passed `position` (an event appended after it). */
  appendedAfter(position: Position): Promise<void>;
};

/** `full`: the read stopped at the batch size, so the log has more of the handler's events after `to`. */
export type Batch = { from: Position; to: Position; full: boolean };

export type ProcessorHandler = {
  /** The checkpoint's and the lease's key. */
  readonly name: string;
  readonly categories: readonly string[];
  /** The event types it handles (read from the log filtered to them); absent = every type. */
  readonly eventTypes?: readonly string[];
  /** Prepares what the handler writes to (called before the first batch, and again after a failure). */
  init?(): Promise<void>;
  /** Waits for the work it still has in hand (see `handle`); called when the processor stops. */
  settle?(): Promise<void>;
  /**
   * Handles one batch (the events after `from` up to `to`) and moves the checkpoint to `to` (with
   * its writes, where the store can). `events` may be empty when only the checkpoint moves. Throws
   * only when a store fails: the batch is then read again.
   *
   * A handler that keeps work in hand past its return (a reactor whose slow events must not hold
   * newer ones back) may stop short: it saves the checkpoint up to where every event is handled and
   * returns that position; the next batch starts there at once, and the handler recognises the
   * events it still has in hand when they come again.
   */
  handle(events: readonly RecordedEvent[], batch: Batch, ctx: BatchContext): Promise<Position | undefined>;
};

export type ProcessorOptions = {
  batchSize?: number;
  logger?: Logger;
  now?: () => Date;
  /** Who this process is when taking leases; one random id per process by default. */
  instanceId?: string;
  /** How long a lease lasts unless renewed; renewed at a third of it. */
  leaseMs?: number;
  /** Never take the lease: follow the checkpoint of the instance that works (a process whose
   * ROLE leaves this work to others still answers `waitFor`). */
  followOnly?: boolean;
};

export type ProcessorStatus = {
  name: string;
  /** True when this instance holds the lease and works; false when it stands by. */
  active: boolean;
  position: string;
  /** How far the log's head is ahead (EventStore.distance: events in the embedded log, bytes in
   * KurrentDB); 0 when caught up. */
  lag: number;
  /** By this processor's own clock: how long the oldest position it has not handled has waited. */
  lagMs: number;
  failures: ProcessorFailure[];
};

const DEFAULT_INSTANCE = `${process.pid.toString()}-${randomUUID()}`;
/** Bound of the positions remembered for lagMs (coalesced beyond it, so the figure only grows). */
const MAX_UNSEEN = 10_000;
/** How often a standby instance re-reads the active one's checkpoint. */
const STANDBY_POLL_MS = 250;
/** How long a checkpoint moved over other processors' events only waits to be stored: each append
 * moves every processor's checkpoint, and storing each move was a write of the read store per
 * processor and append (18 read models: 21 writes per append). Within this process it moves at
 * once; a crash before it is stored reads that stretch again, which holds nothing for it. */
const IDLE_STORE_MS = STANDBY_POLL_MS;
const MAX_FAILURES_KEPT = 100;

export class LogProcessor {
  readonly handler: ProcessorHandler;
  readonly #events: EventStore;
  /** Where checkpoints and leases live: the read store, shared by every instance. */
  readonly #reads: ReadStore;
  readonly #batchSize: number;
  readonly #logger: Logger | undefined;
  readonly #now: () => Date;
  readonly #instanceId: string;
  readonly #leaseMs: number;
  readonly #followOnly: boolean;
  #active = false;
  #initialized = false;
  #leaseCheckedAt = Number.NEGATIVE_INFINITY;
  #leaseValidUntil = Number.NEGATIVE_INFINITY;
  #checkpoint: Position = 0n;
  /** The checkpoint as stored (behind #checkpoint while a move over nothing of its own waits). */
  #stored: Position = 0n;
  #storedAt = Number.NEGATIVE_INFINITY;
  #head: Position = 0n;
  #running = false;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #unsubscribe: (() => void) | undefined;
  #waiters: { position: Position; resolve: () => void }[] = [];
  /** Handlers waiting for an append past a position (BatchContext.appendedAfter). */
  #appendWaiters: { position: Position; resolve: () => void }[] = [];
  /** When (by this processor's clock) it first saw log positions it has not handled yet, oldest
   * first, coalesced per millisecond and bounded: the age of the first is the lag in ms. */
  #unseen: { position: Position; seenAt: number }[] = [];
  readonly #failures: ProcessorFailure[] = [];
  readonly #context: BatchContext;

  constructor(handler: ProcessorHandler, events: EventStore, reads: ReadStore, options: ProcessorOptions = {}) {
    this.handler = handler;
    this.#events = events;
    this.#reads = reads;
    this.#batchSize = options.batchSize ?? 1000;
    this.#logger = options.logger;
    this.#now = options.now ?? (() => new Date());
    this.#instanceId = options.instanceId ?? DEFAULT_INSTANCE;
    this.#leaseMs = options.leaseMs ?? 15_000;
    this.#followOnly = options.followOnly ?? false;
    this.#context = {
      assertLease: () => {
        this.#assertLeaseValid();
      },
      recordFailure: (event, error) => {
        this.#recordFailure(event, error);
      },
      now: () => this.#now(),
      appendedAfter: (position) => {
        if (this.#head > position) return Promise.resolve();
        return new Promise<void>((resolve) => this.#appendWaiters.push({ position, resolve }));
      },
    };
  }

  /** A method, not the field, so checks after an await are not narrowed away by the compiler. */
  isRunning(): boolean {
    return this.#running;
  }

  get checkpoint(): Position {
    return this.#checkpoint;
  }

  /** Starts following the log. A store that does not answer yet does not fail the start: the
   * processor keeps trying, and /health/ready says what is wrong meanwhile. */
  async start(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    this.#unsubscribe = this.#events.onAppended((p) => {
      if (p > this.#head) this.#head = p;
      this.#notice(p);
      this.#wake?.();
      if (this.#appendWaiters.length > 0) {
        const passed = this.#appendWaiters.filter((w) => w.position < p);
        this.#appendWaiters = this.#appendWaiters.filter((w) => w.position >= p);
        for (const w of passed) w.resolve();
      }
    });
    try {
      await this.#init();
    } catch (error) {
      this.#logger?.error({ err: error, processor: this.handler.name }, 'processor cannot start yet; retrying');
    }
    this.#loop = this.#run();
  }

  async #init(): Promise<void> {
    await this.handler.init?.();
    const stored = await this.#reads.checkpoint(this.handler.name);
    if (stored > this.#checkpoint) this.#advanceTo(stored);
    if (stored > this.#stored) this.#stored = stored;
    const head = await this.#events.headPosition();
    if (head > this.#head) this.#head = head;
    this.#notice(head);
    this.#initialized = true;
  }

  async stop(): Promise<void> {
    this.#running = false;
    this.#unsubscribe?.();
    this.#wake?.();
    await this.#loop;
    await this.handler.settle?.();
    if (this.#active) {
      await this.#storeMoved(true).catch((error: unknown) => {
        this.#logger?.error({ err: error, processor: this.handler.name }, 'could not store the processor checkpoint');
      });
      this.#active = false;
      await this.#reads.releaseLease(this.handler.name, this.#instanceId).catch((error: unknown) => {
        this.#logger?.error({ err: error, processor: this.handler.name }, 'could not release the processor lease');
      });
    }
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

  /** The checkpoint moved: what it passed is handled, and waits for it are answered. */
  #advanceTo(position: Position): void {
    this.#checkpoint = position;
    const firstUnseen = this.#unseen.findIndex((u) => u.position > position);
    this.#unseen = firstUnseen < 0 ? [] : this.#unseen.slice(firstUnseen);
    const ready = this.#waiters.filter((w) => w.position <= position);
    this.#waiters = this.#waiters.filter((w) => w.position > position);
    for (const w of ready) w.resolve();
  }

  /** Takes or renews the lease when a third of it has passed; true while this instance works. A
   * renewal that fails leaves the instance passive, so two instances never write at once. */
  async #holdLease(): Promise<boolean> {
    if (this.#followOnly) return false;
    const now = this.#now().getTime();
    if (now - this.#leaseCheckedAt >= this.#leaseMs / 3) {
      this.#active = false;
      this.#active = await this.#reads.tryLease(this.handler.name, this.#instanceId, this.#leaseMs);
      this.#leaseCheckedAt = now;
      // Measured from before the request, and short of the lease by a margin for clock drift.
      if (this.#active) this.#leaseValidUntil = now + this.#leaseMs * 0.8;
    }
    return this.#active;
  }

  /** Refuses to write when the lease may have passed to another instance meanwhile (a long batch,
   * a paused process): the run loop renews or stands by and the batch is read again. */
  #assertLeaseValid(): void {
    if (this.#now().getTime() >= this.#leaseValidUntil) {
      this.#active = false;
      this.#leaseCheckedAt = Number.NEGATIVE_INFINITY;
      throw new Error(`the lease on ${this.handler.name} ran out before the batch was written`);
    }
  }

  /** Another instance does the work: follow its checkpoint for a while, then try the lease again. */
  async #standBy(): Promise<void> {
    const stored = await this.#reads.checkpoint(this.handler.name);
    if (stored > this.#checkpoint) this.#advanceTo(stored);
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
        if (!caughtUp) continue;
        await this.#storeMoved(false);
        // Idle no longer than the lease renewal interval, so an idle owner keeps its lease, nor
        // than a checkpoint waits to be stored.
        await this.#idle(this.#stored < this.#checkpoint ? IDLE_STORE_MS : this.#leaseMs / 3);
      } catch (error) {
        // A store failure, not bad data: keep the checkpoint and try again shortly.
        this.#logger?.error({ err: error, processor: this.handler.name }, 'processor batch failed; retrying');
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** Handles one batch; true when the log had nothing more for this processor. */
  async #step(): Promise<boolean> {
    const head = await this.#events.headPosition();
    if (head > this.#head) this.#head = head;
    const { categories, eventTypes } = this.handler;
    const events = await this.#events.readAll({
      after: this.#checkpoint,
      limit: this.#batchSize,
      categories,
      ...(eventTypes === undefined ? {} : { types: eventTypes }),
    });
    const complete = events.length < this.#batchSize;
    const last = events.at(-1)?.position ?? this.#checkpoint;
    // A short batch saw every event of our categories up to the head read before it.
    const next = complete && head > last ? head : last;
    if (next === this.#checkpoint) return true;
    this.#assertLeaseValid();
    const batch = { from: this.#checkpoint, to: next, full: !complete };
    if (events.length === 0) {
      // Nothing of its own: stored a little later (IDLE_STORE_MS), with the moves after it.
      this.#advanceTo(next);
      return complete;
    }
    const attributes = {
      'processor.name': this.handler.name,
      'processor.events': events.length,
      'processor.from': batch.from.toString(),
      'processor.to': batch.to.toString(),
    };
    // A trace of its own: a processor started by a request (a rebuild's swap) must not file every
    // later batch under that request.
    const handled = await traced(`batch ${this.handler.name}`, attributes, () => this.handler.handle(events, batch, this.#context), {
      root: true,
    });
    if (handled === undefined) {
      this.#advanceTo(next);
      this.#storedUpTo(next);
      return complete;
    }
    // Stopped short, with work in hand (the handler stored its checkpoint there): read again from
    // there at once.
    if (handled > this.#checkpoint) {
      this.#advanceTo(handled);
      this.#storedUpTo(handled);
    }
    return false;
  }

  /** The handler stored the checkpoint at `position` (with its batch's writes), just now. */
  #storedUpTo(position: Position): void {
    this.#stored = position;
    this.#storedAt = performance.now();
  }

  /** Stores a checkpoint moved over nothing of its own, once it has waited IDLE_STORE_MS (or at
   * once, `now`): the handler's batch of no events. */
  async #storeMoved(now: boolean): Promise<void> {
    if (this.#stored >= this.#checkpoint || !this.#active) return;
    // By the machine's clock: a wait of the process, not a time of the domain (which tests move).
    if (!now && performance.now() - this.#storedAt < IDLE_STORE_MS) return;
    const batch = { from: this.#stored, to: this.#checkpoint, full: false };
    this.#assertLeaseValid();
    await this.handler.handle([], batch, this.#context);
    this.#storedUpTo(batch.to);
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
    if (this.#failures.length > MAX_FAILURES_KEPT) this.#failures.shift();
    this.#logger?.error({ processor: this.handler.name, ...failure }, 'event skipped by processor');
  }

  /** Resolves true once the processor has handled `position`, false after `timeoutMs`. */
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

  status(): ProcessorStatus {
    const lag = this.#events.distance(this.#checkpoint, this.#head);
    return {
      name: this.handler.name,
      active: this.#active,
      position: this.#checkpoint.toString(),
      lag,
      lagMs: lag === 0 || this.#unseen[0] === undefined ? 0 : Math.max(0, this.#now().getTime() - this.#unseen[0].seenAt),
      failures: [...this.#failures],
    };
  }
}
