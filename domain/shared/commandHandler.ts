// Load a stream, fold it, decide, append with the exact expected revision. Written against the
// EventStore port only, so every resource and every adapter shares it.

import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type CodeReservation,
  type EventMetadata,
  type EventStore,
  type NewEvent,
  type Position,
  type RecordedEvent,
} from '../ports.ts';
import { codeTaken, concurrentModification, idempotencyKeyReused, staleVersion } from './errors.ts';
import { uuidV5 } from './ids.ts';

/** Who asks, when, and under which request: arrives with every command, never from the body. */
export type CommandContext = {
  actor: string;
  now: Date;
  newId: () => string;
  requestId?: string;
  correlationId?: string;
  causationId?: string;
  idempotencyKey?: string;
  requestHash?: string;
};

export type Decided = {
  events: readonly { type: string; data: Record<string, unknown> }[];
  claim?: readonly CodeReservation[];
  release?: readonly CodeReservation[];
};

export type CommandSpec<S> = {
  /** Error-code namespace of the resource. */
  resource: string;
  stream: string;
  initial: () => S;
  evolve: (state: S, event: RecordedEvent) => S;
  decide: (state: S) => Decided;
  /** From `If-Match`: the revision the caller saw. */
  expectedVersion?: number;
  schemaVersion: number;
  /** Retries after a concurrent write when the caller did not pin a version. */
  retries?: number;
};

export type CommandResult<S> = {
  state: S;
  /** Stream revision after the command; undefined when the stream does not exist. */
  version: number | undefined;
  /** Position of the last event of the stream (the command's own when it wrote). */
  position: Position | undefined;
  /** False when the decision was to change nothing, or the request was an idempotent retry. */
  written: boolean;
};

function metadataOf(ctx: CommandContext): EventMetadata {
  const m: EventMetadata = { actor: ctx.actor, at: ctx.now.toISOString() };
  if (ctx.requestId !== undefined) m.requestId = ctx.requestId;
  if (ctx.correlationId !== undefined) m.correlationId = ctx.correlationId;
  if (ctx.causationId !== undefined) m.causationId = ctx.causationId;
  if (ctx.idempotencyKey !== undefined) m.idempotencyKey = ctx.idempotencyKey;
  if (ctx.requestHash !== undefined) m.requestHash = ctx.requestHash;
  return m;
}

const fold = <S>(spec: CommandSpec<S>, events: readonly RecordedEvent[]): S => events.reduce(spec.evolve, spec.initial());

/** A request already applied under the same Idempotency-Key answers what it answered then. */
function priorResult<S>(spec: CommandSpec<S>, ctx: CommandContext, events: readonly RecordedEvent[]): CommandResult<S> | undefined {
  if (ctx.idempotencyKey === undefined) return undefined;
  const index = events.findLastIndex((e) => e.metadata.idempotencyKey === ctx.idempotencyKey);
  const prior = events[index];
  if (prior === undefined) return undefined;
  if (prior.metadata.requestHash !== ctx.requestHash) throw idempotencyKeyReused();
  let last = index;
  while (events[last + 1]?.id === uuidV5(`${spec.stream}|${ctx.idempotencyKey}|${String(last + 1 - index)}`)) last++;
  const upTo = events.slice(0, last + 1);
  return { state: fold(spec, upTo), version: last, position: upTo.at(-1)?.position, written: false };
}

function newEvents<S>(spec: CommandSpec<S>, ctx: CommandContext, decided: Decided['events']): NewEvent[] {
  const metadata = metadataOf(ctx);
  return decided.map((e, i) => ({
    id: ctx.idempotencyKey === undefined ? ctx.newId() : uuidV5(`${spec.stream}|${ctx.idempotencyKey}|${String(i)}`),
    type: e.type,
    schemaVersion: spec.schemaVersion,
    data: e.data,
    metadata,
  }));
}

/** The domain error for a failed append, or undefined when a retry may succeed. */
function appendFailure<S>(spec: CommandSpec<S>, error: unknown): Error | undefined {
  if (error instanceof CodeTakenError) return codeTaken(spec.resource, error.code);
  if (!(error instanceof WrongExpectedRevisionError)) return error instanceof Error ? error : new Error(String(error));
  if (spec.expectedVersion === undefined) return undefined;
  return staleVersion(spec.resource, spec.expectedVersion, typeof error.actual === 'number' ? error.actual : -1);
}

async function attempt<S>(spec: CommandSpec<S>, ctx: CommandContext, store: EventStore): Promise<CommandResult<S>> {
  const events = await store.readStream(spec.stream);
  const prior = priorResult(spec, ctx, events);
  if (prior) return prior;
  const state = fold(spec, events);
  const last = events.at(-1);
  const actual = last?.revision;
  if (spec.expectedVersion !== undefined && actual !== undefined && actual !== spec.expectedVersion) {
    throw staleVersion(spec.resource, spec.expectedVersion, actual);
  }
  const decision = spec.decide(state);
  if (decision.events.length === 0) return { state, version: actual, position: last?.position, written: false };
  const fresh = newEvents(spec, ctx, decision.events);
  const result = await store.append({
    stream: spec.stream,
    expected: actual ?? 'no_stream',
    events: fresh,
    claim: decision.claim ?? [],
    release: decision.release ?? [],
  });
  const base = result.revision - fresh.length + 1;
  const recorded = fresh.map((e, i) => ({ ...e, stream: spec.stream, revision: base + i, position: result.position }));
  return { state: recorded.reduce(spec.evolve, state), version: result.revision, position: result.position, written: true };
}

export async function handleCommand<S>(spec: CommandSpec<S>, ctx: CommandContext, store: EventStore): Promise<CommandResult<S>> {
  const attempts = 1 + (spec.expectedVersion === undefined ? (spec.retries ?? 16) : 0);
  for (let n = 1; ; n++) {
    try {
      return await attempt(spec, ctx, store);
    } catch (error) {
      const failure = appendFailure(spec, error);
      if (failure !== undefined) throw failure;
      if (n >= attempts) throw concurrentModification(spec.resource, spec.stream);
    }
  }
}

export const foldStream = <S>(
  initial: () => S,
  evolve: (state: S, event: RecordedEvent) => S,
  events: readonly RecordedEvent[],
): S => events.reduce(evolve, initial());
