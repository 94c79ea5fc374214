// Work that falls due at a time (a job whose runner died, later: notifications that expire,
// deliveries to retry, the retention pass). Due work is data, never a timer: each schedule answers
// the items due at `now` from stored data (usually a query of a read model), so it survives
// restarts and is the same on every instance. One instance at a time polls (a lease in the read store); each due
// item is handed to the schedule's `run`, which must be idempotent (it runs again after a crash)
// and, once done, write the event that makes the item no longer due. The clock is injected, so
// tests move time and call `tick()`.

import { randomUUID } from 'node:crypto';
import type { Clock, Document, ReadStore, RecordedEvent } from '../domain/ports.ts';
import type { Query } from '../domain/shared/filtering.ts';
import type { ReadModels } from '../projections/projection.ts';
import type { Logger, ProcessorHandler } from './processor.ts';

export type Schedule = {
  readonly name: string;
  /** The items due at `now` (most often a query of a read model: dueInReadModel). Each has an id
   * and, when it changes, a new `auditInfo.version`. */
  due(now: Date): Promise<readonly Document[]>;
  /** Handles one due item; false when it could not be taken now (another instance holds it):
   * it is offered again at the next tick. */
  run(item: Document, now: Date): Promise<boolean | undefined>;
  /** Items of one tick run at once (default 1): for items that are independent of each other
   * (notifications to deliver), so their writes share group commits. */
  readonly concurrency?: number;
  /** Work that falls due when records change, not only when time passes: events of these
   * categories (and types) wake this schedule once the read model its due items come from has
   * folded them, instead of waiting for the next interval. `react`, when given, does at once the
   * work the events bring, as the log brings them (no wait for the read model, no query of due
   * items), and answers whether they still want a tick; `due` then finds only what it missed (a
   * crash between the event and its reaction, a scheduler started after it). */
  readonly wakeOn?: {
    readonly readModel: string;
    readonly categories: readonly string[];
    readonly eventTypes?: readonly string[];
    readonly react?: (events: readonly RecordedEvent[], now: Date) => Promise<boolean>;
  };
};

/** Due items as the documents of a read model a query selects (none while it is rebuilding). */
export async function dueInReadModel(
  reads: ReadStore,
  readModels: ReadModels,
  readModel: string,
  query: Query,
  limit = 100,
): Promise<Document[]> {
  let collection: string;
  try {
    collection = readModels.collectionOf(readModel);
  } catch {
    return [];
  }
  return reads.find(collection, query, { offset: 0, limit });
}

export type SchedulerOptions = {
  clock: Clock;
  logger?: Logger;
  instanceId?: string;
  leaseMs?: number;
  /** How often the poller looks for due items (default 1 s). */
  intervalMs?: number;
  /** Items handled per schedule and tick. */
  batch?: number;
};

const LEASE = 'scheduler';
const REMEMBERED = 10_000;

export class Scheduler {
  readonly #schedules: readonly Schedule[];
  readonly #reads: ReadStore;
  readonly #options: SchedulerOptions;
  readonly #instanceId: string;
  /** Items run at a version: not run again until their document changes (the read model may not
   * have folded the event that settles them yet). */
  readonly #ran = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<number> | undefined;
  /** The schedules the last tick found a whole batch of due (a backlog). */
  #full = new Set<string>();
  /** The schedules woken while a tick ran: ticked again after it. */
  #wakeAgain = new Set<string>();
  /** While a tick runs: whether this instance still holds the lease (renewed as it runs). */
  #leaseHeld = false;

  constructor(schedules: readonly Schedule[], reads: ReadStore, options: SchedulerOptions) {
    this.#schedules = schedules;
    this.#reads = reads;
    this.#options = options;
    this.#instanceId = options.instanceId ?? `${process.pid.toString()}-${randomUUID()}`;
  }

  start(): void {
    if (this.#timer !== undefined || this.#schedules.length === 0) return;
    this.#timer = setInterval(() => void this.#drain(this.#all()), this.#options.intervalMs ?? 1000);
    this.#timer.unref();
  }

  /** Whether it runs on its own (started: the interval and the log wake it), rather than only when
   * a test calls tick(). */
  running(): boolean {
    return this.#timer !== undefined;
  }

  #all(): Set<string> {
    return new Set(this.#schedules.map((s) => s.name));
  }

  /** Ticks the schedules named, then again at once those that found a full batch due (a backlog)
   * or were woken meanwhile, up to 100 ticks. */
  async #drain(first: ReadonlySet<string>): Promise<void> {
    let which = first;
    for (let round = 0; round < 100 && this.#timer !== undefined && which.size > 0; round++) {
      this.#full = new Set();
      await this.#tickOf(which);
      // Again while a batch made progress, or a wake came during the tick.
      which = new Set([...this.#backlogged(), ...this.#wokenMeanwhile()]);
    }
  }

  /** The schedules the last tick found a whole batch of due (set while it ran). */
  #backlogged(): ReadonlySet<string> {
    return this.#full;
  }

  /** The schedules woken while the last tick ran (taken: the next tick answers them). */
  #wokenMeanwhile(): ReadonlySet<string> {
    const woken = this.#wakeAgain;
    this.#wakeAgain = new Set();
    return woken;
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#ticking;
    await this.#reads.releaseLease(LEASE, this.#instanceId).catch(() => undefined);
  }

  /** Ticks soon (a schedule's work fell due): at once, or after the tick under way; only the
   * schedule named (its due items alone are read), or all. */
  wake(schedule?: string): void {
    if (this.#timer === undefined) return;
    const which = schedule === undefined ? this.#all() : new Set([schedule]);
    if (this.#ticking !== undefined) {
      for (const name of which) this.#wakeAgain.add(name);
      return;
    }
    void this.#drain(which);
  }

  /** Runs what is due now, if this instance holds the poller's lease; answers how many items ran. */
  tick(): Promise<number> {
    return this.#tickOf(this.#all());
  }

  /** A tick of the schedules named (a tick under way is answered instead, whichever it runs). */
  #tickOf(which: ReadonlySet<string>): Promise<number> {
    this.#ticking ??= this.#tick(which).finally(() => {
      this.#ticking = undefined;
    });
    return this.#ticking;
  }

  async #tick(which: ReadonlySet<string>): Promise<number> {
    let ran = 0;
    const leaseMs = this.#options.leaseMs ?? 15_000;
    let renewal: NodeJS.Timeout | undefined;
    try {
      if (!(await this.#reads.tryLease(LEASE, this.#instanceId, leaseMs))) return 0;
      // A tick can outlast the lease (a batch of slow deliveries): renewed while it runs; once a
      // renewal fails, no further item is taken, since another instance may hold the lease now.
      this.#leaseHeld = true;
      renewal = setInterval(() => void this.#renew(leaseMs), Math.max(10, Math.floor(leaseMs / 3)));
      for (const schedule of this.#schedules) if (which.has(schedule.name) && this.#holdsLease()) ran += await this.#runDue(schedule);
    } catch (error) {
      this.#options.logger?.error({ err: error }, 'scheduler tick failed; trying again at the next');
    } finally {
      clearInterval(renewal);
      this.#leaseHeld = false;
    }
    return ran;
  }

  /** Whether the tick under way still holds the lease (read afresh: a renewal may have lost it). */
  #holdsLease(): boolean {
    return this.#leaseHeld;
  }

  async #renew(leaseMs: number): Promise<void> {
    if (!this.#leaseHeld) return;
    const held = await this.#reads.tryLease(LEASE, this.#instanceId, leaseMs).catch(() => false);
    if (!held && this.#holdsLease()) {
      this.#leaseHeld = false;
      this.#options.logger?.error({ instance: this.#instanceId }, 'scheduler lease lost during a tick; no further item is taken');
    }
  }

  async #runDue(schedule: Schedule): Promise<number> {
    const now = this.#options.clock.now();
    const batch = this.#options.batch ?? 100;
    const due = await schedule.due(now);
    const keyOf = (item: Document) =>
      `${schedule.name}\n${item.id}\n${JSON.stringify((item.auditInfo as { version?: unknown } | undefined)?.version ?? null)}`;
    const items = due.slice(0, batch).filter((item) => !this.#ran.has(keyOf(item)));
    let ran = 0;
    let next = 0;
    const worker = async () => {
      while (next < items.length && this.#holdsLease()) {
        const item = items[next++] as Document;
        try {
          if ((await schedule.run(item, now)) === false) continue;
          ran++;
        } catch (error) {
          this.#options.logger?.error({ err: error, schedule: schedule.name, item: item.id }, 'scheduled item failed; it stays due');
          continue;
        }
        this.#ran.add(keyOf(item));
        if (this.#ran.size > REMEMBERED) this.#ran.delete(this.#ran.values().next().value as string);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(schedule.concurrency ?? 1, items.length)) }, worker));
    // A backlog: a whole batch was due and work got done (a batch that only failed, or held only
    // items already run, waits for the interval).
    if (due.length >= batch && ran > 0) this.#full.add(schedule.name);
    return ran;
  }
}

/** A follower of the log for a schedule's `wakeOn` events: it reacts to them (`react`), then wakes
 * the schedule once its read model has folded them, when they still want a tick. Nothing while the
 * scheduler does not run on its own (tests that tick it). Its checkpoint is kept like any
 * handler's; a reaction or a wake it misses (a crash) costs only the wait until the next interval. */
export function wakeHandler(
  schedule: Schedule,
  scheduler: Scheduler,
  readModels: ReadModels,
  reads: ReadStore,
): ProcessorHandler | undefined {
  const on = schedule.wakeOn;
  if (on === undefined) return undefined;
  const name = `wake:${schedule.name}`;
  return {
    name,
    categories: on.categories,
    ...(on.eventTypes === undefined ? {} : { eventTypes: on.eventTypes }),
    async handle(events, batch, ctx) {
      if (events.length > 0 && scheduler.running()) {
        ctx.assertLease();
        if (on.react === undefined || (await on.react(events, ctx.now()))) {
          await readModels.waitFor(on.readModel, batch.to, 5000);
          scheduler.wake(schedule.name);
        }
      }
      ctx.assertLease();
      await reads.saveCheckpoint(name, batch.to);
    },
  };
}
