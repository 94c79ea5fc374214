// A reactor run by the log processor (processor.ts): it turns events into commands. Each command
// carries an Idempotency-Key made from the source event's id, so a replayed batch (a crash before
// the checkpoint, a standby taking over) issues the same commands again and writes nothing twice;
// and its causationId is the source event's id, so the log says why every reacted event exists.

import { randomUUID } from 'node:crypto';
import type { Position, ReadStore, RecordedEvent } from '../domain/ports.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import { isDomainError } from '../domain/shared/errors.ts';
import type { BatchContext, ProcessorHandler } from './processor.ts';

/** The context of the n-th command a reactor issues for one event (n names it when there are several). */
export type CommandFor = (name?: string) => CommandContext;

export type Reactor = {
  /** The checkpoint's and the lease's key; also the actor of every command it issues. */
  readonly name: string;
  readonly categories: readonly string[];
  /** The event types it reacts to; the others of its categories are passed over. Absent: every type. */
  readonly eventTypes?: readonly string[];
  react(event: RecordedEvent, commandFor: CommandFor): Promise<void>;
  /** Streams of one batch handled at once (default 1); a stream's events stay in order. For
   * reactors whose events are independent across streams (each trigger its own). */
  readonly concurrency?: number;
  /** Whose an event is (who raised it), for a share of the concurrency: one owner's events run on
   * all the places but one, so that however slow they are, another owner's event finds a place.
   * Absent, or undefined for an event: no share. */
  shareOf?(event: RecordedEvent): string | undefined;
};

export const reactorActor = (name: string): string => `reactor:${name}`;

function commandsFor(reactor: Reactor, event: RecordedEvent, now: () => Date): CommandFor {
  return (name) => ({
    actor: reactorActor(reactor.name),
    now: now(),
    newId: randomUUID,
    requestId: randomUUID(),
    correlationId: event.metadata.correlationId ?? event.id,
    causationId: event.id,
    idempotencyKey: name === undefined ? event.id : `${event.id}/${name}`,
  });
}

type InHand = {
  readonly event: RecordedEvent;
  readonly share: string | undefined;
  state: 'waiting' | 'running' | 'done' | 'failed';
  error?: unknown;
  /** Resolved when it is done or failed. */
  readonly settled: Promise<void>;
  readonly settle: () => void;
};

/** The events a reactor has taken and its checkpoint has not passed yet: at most `concurrency`
 * running, one stream's events in log order, and, for a reactor with shares, one owner's events
 * running on all the places but one, so that another owner's event always finds a place. */
class EventsInHand {
  readonly #byId = new Map<string, InHand>();
  /** Waiting, in log order. */
  #waiting: InHand[] = [];
  #running = 0;
  readonly #runningOf = new Map<string, number>();
  readonly #concurrency: number;
  readonly #run: (event: RecordedEvent) => Promise<void>;
  readonly #shareOf: ((event: RecordedEvent) => string | undefined) | undefined;
  /** After a failure (or a stop) nothing more starts: the batch is read again, and nothing that
   * waited may overtake the event that failed in its stream. */
  #halted = false;

  constructor(
    concurrency: number,
    run: (event: RecordedEvent) => Promise<void>,
    shareOf: ((event: RecordedEvent) => string | undefined) | undefined,
  ) {
    this.#concurrency = concurrency;
    this.#run = run;
    this.#shareOf = shareOf;
  }

  /** The events' entries, those already in hand as they are; then whatever may start, starts. */
  take(events: readonly RecordedEvent[]): InHand[] {
    this.#halted = this.#failed().length > 0;
    const entries = events.map((event) => {
      const known = this.#byId.get(event.id);
      if (known !== undefined) return known;
      let settle: () => void = () => undefined;
      const settled = new Promise<void>((resolve) => {
        settle = resolve;
      });
      const entry: InHand = { event, share: this.#shareOf?.(event), state: 'waiting', settled, settle };
      this.#byId.set(event.id, entry);
      this.#waiting.push(entry);
      return entry;
    });
    this.#waiting.sort((a, b) => (a.event.position < b.event.position ? -1 : a.event.position > b.event.position ? 1 : 0));
    this.#pump();
    return entries;
  }

  /** A place is free for a newer event. */
  get hasRoom(): boolean {
    return this.#running < this.#concurrency;
  }

  /** Lets go of what the checkpoint has passed (by this instance, or by another one before it). */
  passed(position: Position): void {
    for (const [id, entry] of this.#byId) if (entry.event.position <= position && entry.state !== 'running') this.#byId.delete(id);
    this.#waiting = this.#waiting.filter((e) => e.event.position > position);
  }

  /** Stops starting anything and forgets the waiting and the failed, which the next batch takes
   * again in order; the running ones go on and are recognised then. */
  halt(): void {
    this.#halted = true;
    for (const entry of [...this.#waiting, ...this.#failed()]) this.#byId.delete(entry.event.id);
    this.#waiting = [];
  }

  #failed(): InHand[] {
    return [...this.#byId.values()].filter((e) => e.state === 'failed');
  }

  /** Halts, and waits for those running. */
  async settle(): Promise<void> {
    this.halt();
    await Promise.all([...this.#byId.values()].map((e) => e.settled));
  }

  /** Places are given in log order to the waiting events that may start. */
  #pump(): void {
    if (this.#halted) return;
    const blocked = new Set([...this.#byId.values()].filter((e) => e.state === 'running').map((e) => e.event.stream));
    for (const entry of [...this.#waiting]) {
      if (this.#running >= this.#concurrency) return;
      const stream = entry.event.stream;
      if (blocked.has(stream) || !this.#withinShare(entry.share)) {
        blocked.add(stream);
        continue;
      }
      blocked.add(stream);
      this.#start(entry);
    }
  }

  /** One owner runs on all the places but one (on the only one, when there is one). */
  #withinShare(share: string | undefined): boolean {
    return share === undefined || (this.#runningOf.get(share) ?? 0) < Math.max(1, this.#concurrency - 1);
  }

  #start(entry: InHand): void {
    this.#waiting.splice(this.#waiting.indexOf(entry), 1);
    entry.state = 'running';
    this.#running += 1;
    if (entry.share !== undefined) this.#runningOf.set(entry.share, (this.#runningOf.get(entry.share) ?? 0) + 1);
    this.#run(entry.event)
      .then(
        () => {
          entry.state = 'done';
        },
        (error: unknown) => {
          entry.state = 'failed';
          entry.error = error;
          this.#halted = true;
        },
      )
      .finally(() => {
        this.#running -= 1;
        if (entry.share !== undefined) {
          const left = (this.#runningOf.get(entry.share) ?? 1) - 1;
          if (left === 0) this.#runningOf.delete(entry.share);
          else this.#runningOf.set(entry.share, left);
        }
        this.#pump();
        entry.settle();
      });
  }
}

const NEVER = new Promise<never>(() => undefined);

/** A reactor as a handler of the log processor. A command the domain refuses (a 4xx: the record
 * it needs is gone, a rule forbids it) is recorded on the processor and passed over, since trying
 * again cannot change the answer; a store that fails stops the batch, which is read again.
 *
 * Events run up to the reactor's concurrency at once, and one slow event does not hold newer ones
 * back: when the log has events after the batch and a place is free, the handler saves the
 * checkpoint up to the first event not yet handled and returns there, keeping the others in hand,
 * so the next batch brings the newer events while the slow one goes on. The checkpoint never
 * passes an event not handled: after a crash, what was in hand comes again, and its commands, keyed
 * by the event's id, write nothing twice. */
export function reactorHandler(reactor: Reactor, reads: ReadStore): ProcessorHandler {
  const types = reactor.eventTypes === undefined ? undefined : new Set(reactor.eventTypes);
  let context: BatchContext | undefined;
  const reactTo = async (event: RecordedEvent) => {
    if (context === undefined) throw new Error('no batch context');
    const ctx = context;
    ctx.assertLease();
    try {
      await reactor.react(
        event,
        commandsFor(reactor, event, () => ctx.now()),
      );
    } catch (error) {
      if (!isDomainError(error) || error.httpStatus >= 500) throw error;
      ctx.recordFailure(event, error);
    }
  };
  const hand = new EventsInHand(Math.max(1, reactor.concurrency ?? 1), reactTo, reactor.shareOf?.bind(reactor));
  const checkpointAt = async (position: Position, ctx: BatchContext) => {
    ctx.assertLease();
    await reads.saveCheckpoint(reactor.name, position);
    hand.passed(position);
  };
  return {
    name: reactor.name,
    categories: reactor.categories,
    // Read from the log filtered to them: a reactor of rare events does not read every other.
    ...(reactor.eventTypes === undefined ? {} : { eventTypes: reactor.eventTypes }),
    settle: () => hand.settle(),
    async handle(events, batch, ctx) {
      context = ctx;
      hand.passed(batch.from);
      const entries = hand.take(types === undefined ? events : events.filter((e) => types.has(e.type)));
      // Newer events to take: after a full batch, once the checkpoint can move; else once appended.
      const seen = { newer: false };
      const appended = batch.full
        ? NEVER
        : ctx.appendedAfter(batch.to).then(() => {
            seen.newer = true;
          });
      for (;;) {
        const failed = entries.find((e) => e.state === 'failed');
        if (failed !== undefined) {
          hand.halt();
          throw failed.error;
        }
        const open = entries.find((e) => e.state !== 'done');
        if (open === undefined) {
          await checkpointAt(batch.to, ctx);
          return;
        }
        const handled = entries[0] === open ? batch.from : open.event.position - 1n;
        if (hand.hasRoom && (batch.full ? handled > batch.from : seen.newer)) {
          if (handled > batch.from) await checkpointAt(handled, ctx);
          return handled;
        }
        // Once appended, that promise stays resolved: raced again, it would spin without a pause.
        const settling = entries.filter((e) => e.state !== 'done').map((e) => e.settled);
        await Promise.race(seen.newer ? settling : [...settling, appended]);
      }
    },
  };
}
