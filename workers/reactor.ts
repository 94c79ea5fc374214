// A reactor run by the log processor (processor.ts): it turns events into commands. Each command
// carries an Idempotency-Key made from the source event's id, so a replayed batch (a crash before
// the checkpoint, a standby taking over) issues the same commands again and writes nothing twice;
// and its causationId is the source event's id, so the log says why every reacted event exists.

import { randomUUID } from 'node:crypto';
import type { ReadStore, RecordedEvent } from '../domain/ports.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import { isDomainError } from '../domain/shared/errors.ts';
import type { ProcessorHandler } from './processor.ts';

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

/** A reactor as a handler of the log processor. A command the domain refuses (a 4xx: the record
 * it needs is gone, a rule forbids it) is recorded on the processor and passed over, since trying
 * again cannot change the answer; a store that fails stops the batch, which is read again. */
export function reactorHandler(reactor: Reactor, reads: ReadStore): ProcessorHandler {
  const types = reactor.eventTypes === undefined ? undefined : new Set(reactor.eventTypes);
  return {
    name: reactor.name,
    categories: reactor.categories,
    // Read from the log filtered to them: a reactor of rare events does not read every other.
    ...(reactor.eventTypes === undefined ? {} : { eventTypes: reactor.eventTypes }),
    async handle(events, batch, ctx) {
      const mine = types === undefined ? events : events.filter((e) => types.has(e.type));
      const reactTo = async (event: RecordedEvent) => {
        ctx.assertLease();
        try {
          await reactor.react(event, commandsFor(reactor, event, () => ctx.now()));
        } catch (error) {
          if (!isDomainError(error) || error.httpStatus >= 500) throw error;
          ctx.recordFailure(event, error);
        }
      };
      // One stream's events in order; different streams at once, up to the reactor's concurrency.
      const byStream = [...Map.groupBy(mine, (e) => e.stream).values()];
      let next = 0;
      let failed = false;
      const worker = async () => {
        // After a failure no worker takes another stream: the batch is read again, and nothing of
        // this pass may still run when it is.
        while (!failed && next < byStream.length) {
          for (const event of byStream[next++] ?? []) {
            try {
              await reactTo(event);
            } catch (error) {
              failed = true;
              throw error;
            }
          }
        }
      };
      const settled = await Promise.allSettled(Array.from({ length: Math.max(1, Math.min(reactor.concurrency ?? 1, byStream.length)) }, worker));
      const rejected = settled.find((r) => r.status === 'rejected');
      if (rejected !== undefined) throw rejected.reason;
      ctx.assertLease();
      await reads.saveCheckpoint(reactor.name, batch.to);
    },
  };
}
