// Runs a command over the EventStore port: load the stream (through the runtime's fold cache),
// decide, append with the exact expected revision, and retry a raced append. The decisions it
// applies (idempotency, event ids, which failures are retried) are domain/shared/commandHandler.ts's;
// every resource and every adapter shares this.

import { WrongExpectedRevisionError, type AppendRequest, type EventStore, type NewEvent } from '../domain/ports.ts';
import {
  appendFailure,
  fold,
  keyClaim,
  keyReservation,
  newEvents,
  priorResult,
  type CommandContext,
  type CommandResult,
  type CommandSpec,
} from '../domain/shared/commandHandler.ts';
import { concurrentModification, idempotencyKeyReused, staleVersion } from '../domain/shared/errors.ts';
import { keyOf, foldOnto, type Folded } from '../domain/shared/streamFold.ts';
import { foldStream, rememberFold, type FoldCache } from './streamFold.ts';

/** In-process commands on one stream run one after another, so writers without If-Match do not
 * race each other into retries; other processes still meet the expected-revision check. */
export class StreamQueues {
  readonly #queues = new Map<string, Promise<unknown>>();

  run<T>(stream: string, run: () => Promise<T>): Promise<T> {
    const queues = this.#queues;
    const result = (queues.get(stream) ?? Promise.resolve()).then(run, run);
    const tail = result.catch(() => undefined);
    queues.set(stream, tail);
    void tail.then(() => {
      if (queues.get(stream) === tail) queues.delete(stream);
    });
    return result;
  }
}

/** A log as the commands of one runtime share it: its folds kept, its streams' queues. */
export type CommandLog = { readonly events: EventStore; readonly folds: FoldCache; readonly queues: StreamQueues };

/** A key taken by another stream was used for another request: this one names another record. */
async function keyHeldElsewhere(spec: CommandSpec<unknown>, ctx: CommandContext, store: EventStore): Promise<boolean> {
  const reservation = keyReservation(ctx);
  if (reservation === undefined) return false;
  const holder = await store.findCode(reservation);
  return holder !== undefined && holder !== spec.stream;
}

/** A request already applied to this stream under the caller's key (read whole: a rare path). */
async function priorOnStream<S>(
  spec: CommandSpec<S>,
  ctx: CommandContext,
  store: EventStore,
  folded: Folded<S>,
): Promise<CommandResult<S> | undefined> {
  if (ctx.idempotencyKey === undefined || !folded.keys.has(keyOf(ctx.actor, ctx.idempotencyKey))) return undefined;
  return priorResult(spec, ctx, await store.readStream(spec.stream));
}

async function attempt<S>(spec: CommandSpec<S>, ctx: CommandContext, log: CommandLog): Promise<CommandResult<S>> {
  const store = log.events;
  if (await keyHeldElsewhere(spec as CommandSpec<unknown>, ctx, store)) throw idempotencyKeyReused();
  const folded = await foldStream(spec, log);
  const prior = await priorOnStream(spec, ctx, store, folded);
  if (prior) return prior;
  const { state, version: actual, position } = folded;
  if (spec.expectedVersion !== undefined && actual !== undefined && actual !== spec.expectedVersion) {
    throw staleVersion(spec.resource, spec.expectedVersion, actual);
  }
  const decision = spec.decide(state);
  if (decision.events.length === 0) return { state, version: actual, position, written: false };
  const fresh = newEvents(spec, ctx, decision.events);
  const result = await store.append({
    stream: spec.stream,
    expected: actual ?? 'no_stream',
    events: fresh,
    claim: [...(decision.claim ?? []), ...keyClaim(ctx, folded)],
    release: decision.release ?? [],
  });
  if (result.duplicate === true) {
    // Another request with this key got there first: answer as its retry would (or 409).
    const again = priorResult(spec, ctx, await store.readStream(spec.stream));
    if (again) return again;
    throw new Error(`append to ${spec.stream} was a duplicate, yet no prior result is in the stream`);
  }
  const base = result.revision - fresh.length + 1;
  const recorded = fresh.map((e, i) => ({ ...e, stream: spec.stream, revision: base + i, position: result.position }));
  const after = foldOnto(spec, folded, recorded);
  rememberFold(spec, log, after);
  return { state: after.state, version: result.revision, position: result.position, written: true };
}

export function handleCommand<S>(spec: CommandSpec<S>, ctx: CommandContext, log: CommandLog): Promise<CommandResult<S>> {
  // With If-Match too: appendFailure answers 412 for a conflict that moved the record, so a retry
  // runs only when the record is still at the caller's version (a code claim or a key was raced).
  const attempts = 1 + (spec.retries ?? 16);
  return log.queues.run(spec.stream, async () => {
    for (let n = 1; ; n++) {
      try {
        return await attempt(spec, ctx, log);
      } catch (error) {
        const failure = appendFailure(spec, error);
        if (failure !== undefined) throw failure;
        if (n >= attempts) throw concurrentModification(spec.resource, spec.stream);
        // A writer in another process: back off a little, randomly, before reading again.
        await new Promise((r) => setTimeout(r, Math.random() * 2 * n));
      }
    }
  });
}

/** What became of one command of handleNewStreams: its result; `again` where only a read of its
 * stream can answer it (the stream was there: a repeat under its key, or another request's); or
 * the error it is refused (or failed) with. */
export type NewStreamOutcome<S> = { kind: 'done'; result: CommandResult<S> } | { kind: 'again' } | { kind: 'failed'; error: unknown };

/**
 * Commands that each begin a stream of its own under an Idempotency-Key (a batch of Kafka triggers):
 * decided on the initial state and appended together (EventStore.appendMany) with "no stream"
 * expected, nothing read first. Their event ids derive from the key as handleCommand's do, so a
 * command taken again (a batch redelivered) appends nothing; where a stream turns out to be there
 * already the command answers `again`, for handleCommand, which reads it, to answer. No key is
 * reserved (keyClaim): the caller names each stream after its key (keyedRecordId), so the stream
 * is the key's reservation. Streams are left out of the fold cache: a batch of new records is not
 * what the next commands read.
 */
export async function handleNewStreams<S>(
  commands: readonly { spec: CommandSpec<S>; ctx: CommandContext }[],
  store: EventStore,
): Promise<NewStreamOutcome<S>[]> {
  const outcomes: NewStreamOutcome<S>[] = [];
  const appends: { index: number; fresh: NewEvent[]; request: AppendRequest }[] = [];
  for (const [index, { spec, ctx }] of commands.entries()) {
    try {
      if (ctx.idempotencyKey === undefined) throw new Error(`${spec.stream}: a command of handleNewStreams needs an Idempotency-Key`);
      const decision = spec.decide(spec.initial());
      const fresh = newEvents(spec, ctx, decision.events);
      outcomes.push({ kind: 'again' });
      if (fresh.length > 0)
        appends.push({ index, fresh, request: { stream: spec.stream, expected: 'no_stream', events: fresh, claim: decision.claim ?? [] } });
    } catch (error) {
      outcomes.push({ kind: 'failed', error });
    }
  }
  const appended = await store.appendMany(appends.map((a) => a.request));
  for (const [i, outcome] of appended.entries()) {
    const { index, fresh } = appends[i] as (typeof appends)[number];
    const { spec } = commands[index] as (typeof commands)[number];
    if (outcome.ok && outcome.result.duplicate !== true) {
      const recorded = fresh.map((e, n) => ({ ...e, stream: spec.stream, revision: n, position: outcome.result.position }));
      outcomes[index] = {
        kind: 'done',
        result: { state: fold(spec, recorded), version: outcome.result.revision, position: outcome.result.position, written: true },
      };
    } else if (!outcome.ok && !(outcome.error instanceof WrongExpectedRevisionError)) {
      outcomes[index] = { kind: 'failed', error: appendFailure(spec, outcome.error) ?? outcome.error };
    }
  }
  return outcomes;
}
