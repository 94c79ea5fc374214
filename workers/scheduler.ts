// Work that falls due at a time (a job whose runner died, later: notifications that expire,
// deliveries to retry, the retention pass). Due work is data, never a timer: each schedule names a
// read model and the query of its documents that are due at `now`, so it survives restarts and is
// the same on every instance. One instance at a time polls (a lease in the read store); each due
// item is handed to the schedule's `run`, which must be idempotent (it runs again after a crash)
// and, once done, write the event that makes the item no longer due. The clock is injected, so
// tests move time and call `tick()`.

import { randomUUID } from 'node:crypto';
import type { Clock, Document, ReadStore } from '../domain/ports.ts';
import type { Query } from '../domain/shared/filtering.ts';
import type { ReadModels } from '../projections/projection.ts';
import type { Logger } from './processor.ts';

export type Schedule = {
  readonly name: string;
  /** The read model whose documents are the due items. */
  readonly readModel: string;
  /** The query of the documents due at `now`. */
  due(now: Date): Query;
  /** Handles one due item. */
  run(item: Document, now: Date): Promise<void>;
};

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
  readonly #readModels: ReadModels;
  readonly #options: SchedulerOptions;
  readonly #instanceId: string;
  /** Items run at a version: not run again until their document changes (the read model may not
   * have folded the event that settles them yet). */
  readonly #ran = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #ticking: Promise<number> | undefined;

  constructor(schedules: readonly Schedule[], reads: ReadStore, readModels: ReadModels, options: SchedulerOptions) {
    this.#schedules = schedules;
    this.#reads = reads;
    this.#readModels = readModels;
    this.#options = options;
    this.#instanceId = options.instanceId ?? `${process.pid.toString()}-${randomUUID()}`;
  }

  start(): void {
    if (this.#timer !== undefined || this.#schedules.length === 0) return;
    this.#timer = setInterval(() => void this.tick(), this.#options.intervalMs ?? 1000);
    this.#timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.#ticking;
    await this.#reads.releaseLease(LEASE, this.#instanceId).catch(() => undefined);
  }

  /** Runs what is due now, if this instance holds the poller's lease; answers how many items ran. */
  tick(): Promise<number> {
    this.#ticking ??= this.#tick().finally(() => {
      this.#ticking = undefined;
    });
    return this.#ticking;
  }

  async #tick(): Promise<number> {
    let ran = 0;
    try {
      if (!(await this.#reads.tryLease(LEASE, this.#instanceId, this.#options.leaseMs ?? 15_000))) return 0;
      for (const schedule of this.#schedules) ran += await this.#runDue(schedule);
    } catch (error) {
      this.#options.logger?.error({ err: error }, 'scheduler tick failed; trying again at the next');
    }
    return ran;
  }

  async #runDue(schedule: Schedule): Promise<number> {
    const now = this.#options.clock.now();
    let collection: string;
    try {
      collection = this.#readModels.collectionOf(schedule.readModel);
    } catch {
      return 0; // rebuilding: its items are due again once it is back
    }
    const items = await this.#reads.find(collection, schedule.due(now), { offset: 0, limit: this.#options.batch ?? 100 });
    let ran = 0;
    for (const item of items) {
      const key = `${schedule.name}\n${item.id}\n${JSON.stringify((item.auditInfo as { version?: unknown } | undefined)?.version ?? null)}`;
      if (this.#ran.has(key)) continue;
      try {
        await schedule.run(item, now);
        ran++;
      } catch (error) {
        this.#options.logger?.error({ err: error, schedule: schedule.name, item: item.id }, 'scheduled item failed; it stays due');
        continue;
      }
      this.#ran.add(key);
      if (this.#ran.size > REMEMBERED) this.#ran.delete(this.#ran.values().next().value as string);
    }
    return ran;
  }
}
