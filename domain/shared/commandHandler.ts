// Load a stream, fold it, decide, append with the exact expected revision. Written against the
// EventStore port only, so every resource and every adapter shares it.

import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type AppendRequest,
  type CodeReservation,
  type EventMetadata,
  type EventStore,
  type NewEvent,
  type Position,
  type RecordedEvent,
} from '../ports.ts';
import { AppendTooLargeError, DomainError, codeTaken, concurrentModification, idempotencyKeyReused, staleVersion, tooLarge } from './errors.ts';
import { sha256, uuidV5 } from './ids.ts';
import type { Alternatives } from './filtering.ts';
import { canonicalJson, jsonBytes, type JsonObject } from './json.ts';
import { foldOnto, foldStream, keyOf, rememberFold, type Folded } from './streamFold.ts';

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
  /** A check of the record a change would leave (the caller's access rules): throws to refuse it. */
  admit?: (record: JsonObject) => void;
  /** False when the caller is not the built-in admin (see DecideContext.privileged). */
  privileged?: boolean;
  /** Whether the caller may read a record of a resource (by path), when access rules narrow what it
   * reads: a reference to a record it may not read is as missing as one that does not exist. */
  visible?: (resourcePath: string, record: JsonObject) => Promise<boolean>;
  /** What of a resource (by path) the caller may read, as alternatives a read-model query is
   * narrowed to (undefined: every record); set with `visible`, judged alike: a 409 names only the
   * records it covers. */
  readScope?: (resourcePath: string) => Promise<Alternatives | undefined>;
  /** The caller's standing over the records of one resource (by path; a context handed on to
   * writes of another resource leaves them alone): see ChangeGuard. */
  guard?: { readonly resource: string; readonly check: ChangeGuard };
};

/** A check of a change of a live record that reads beyond it (who else holds what), so it cannot be
 * part of the pure decision: given the record as it is and as the change would leave it (after:
 * undefined for a delete), before the change is written, which then applies to the version judged
 * (judged again when another write came between). Throws to refuse; may answer a release, called
 * once the change is written or refused (a lock it took so that two such checks do not interleave). */
export type ChangeGuard = (change: { before: JsonObject; after: JsonObject | undefined }) => Promise<(() => void) | undefined>;

export type Decided = {
  /** Each event at its type's schema version (the spec's when absent). */
  events: readonly { type: string; data: Record<string, unknown>; schemaVersion?: number }[];
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
  /** The error for a unique key held by another stream (default: the resource's CODE_TAKEN). */
  keyTaken?: (reservation: CodeReservation) => Error;
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

/** The reservation scope of Idempotency-Keys: a key is taken, once for all resources, by the
 * stream of the first request that wrote under it, atomically with that request's events (the same
 * mechanism as unique codes, so both logs keep it). A caller's key is therefore one request: the
 * same key on another record or another resource is refused, whatever its body. */
export const IDEMPOTENCY_SCOPE = 'idempotencyKey';

/** The reservation of a caller's key; keys are the caller's own, so the token's subject is in it. */
export const keyReservation = (ctx: Pick<CommandContext, 'actor' | 'idempotencyKey'>): CodeReservation | undefined =>
  ctx.idempotencyKey === undefined ? undefined : { scope: IDEMPOTENCY_SCOPE, code: sha256(`${ctx.actor}\n${ctx.idempotencyKey}`) };

/** What a request means, whatever its spelling: the operation, the resource, the record it names
 * (resolved: by id or by code alike) and its body with members in a canonical order. */
export const requestHashOf = (request: { operation: string; resource: string; target: string; body: unknown }): string =>
  sha256(`${request.operation}|${request.resource}|${request.target}|${canonicalJson(request.body ?? null)}`);

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

/** Event ids under an Idempotency-Key: the same key of the same caller with the same request on
 * the same stream always names the same events. Keys are the caller's own: another caller's key
 * never matches. The request's hash is part of the id, so a key reused with another body names
 * other events: a log that acknowledges repeated ids as a retry (KurrentDB does) can then never
 * take the second body for a retry of the first. */
const keyedEventId = (stream: string, ctx: CommandContext, i: number): string =>
  uuidV5(`${stream}|${ctx.actor}|${ctx.idempotencyKey ?? ''}|${ctx.requestHash ?? ''}|${String(i)}`);

/** Whether an event was written by a request of this caller under this Idempotency-Key. */
export const writtenUnderKey = (event: RecordedEvent, ctx: Pick<CommandContext, 'actor' | 'idempotencyKey'>): boolean =>
  ctx.idempotencyKey !== undefined && event.metadata.idempotencyKey === ctx.idempotencyKey && event.metadata.actor === ctx.actor;

/** A request already applied under the same Idempotency-Key answers what it answered then. */
function priorResult<S>(spec: CommandSpec<S>, ctx: CommandContext, events: readonly RecordedEvent[]): CommandResult<S> | undefined {
  if (ctx.idempotencyKey === undefined) return undefined;
  const index = events.findLastIndex((e) => writtenUnderKey(e, ctx));
  const prior = events[index];
  if (prior === undefined) return undefined;
  if (prior.metadata.requestHash !== ctx.requestHash) throw idempotencyKeyReused();
  let last = index;
  while (events[last + 1]?.id === keyedEventId(spec.stream, ctx, last + 1 - index)) last++;
  const upTo = events.slice(0, last + 1);
  // The revision, not the index: a log may leave revisions out of what it reads (KurrentDB's fences).
  return { state: fold(spec, upTo), version: upTo.at(-1)?.revision, position: upTo.at(-1)?.position, written: false };
}

/**
 * The largest event either log takes: KurrentDB refuses appends over 1 MiB by default, so every
 * event (data and metadata) is held below that on both logs, and the same request never succeeds
 * on one and fails on the other. Records are bounded below it (MAX_RECORD_BYTES), so a record that
 * was accepted can always be written again whole.
 */
export const MAX_EVENT_BYTES = 768 * 1024;

/** The largest record (its fields as JSON): what one event, one document and one item of a
 * response may carry, with room for metadata in the event. */
export const MAX_RECORD_BYTES = 512 * 1024;

function newEvents<S>(spec: CommandSpec<S>, ctx: CommandContext, decided: Decided['events']): NewEvent[] {
  const metadata = metadataOf(ctx);
  for (const e of decided) {
    const bytes = jsonBytes({ data: e.data, metadata });
    if (bytes > MAX_EVENT_BYTES) throw tooLarge(spec.resource, `A ${e.type} event`, bytes, MAX_EVENT_BYTES);
  }
  return decided.map((e, i) => ({
    id: ctx.idempotencyKey === undefined ? ctx.newId() : keyedEventId(spec.stream, ctx, i),
    type: e.type,
    schemaVersion: e.schemaVersion ?? spec.schemaVersion,
    data: e.data,
    metadata,
  }));
}

/** The domain error for a failed append, or undefined when a retry may succeed. */
function appendFailure<S>(spec: CommandSpec<S>, error: unknown): Error | undefined {
  // Another request took the key meanwhile: the next attempt answers as its retry, or refuses.
  if (error instanceof CodeTakenError && error.scope === IDEMPOTENCY_SCOPE) return undefined;
  if (error instanceof CodeTakenError) return spec.keyTaken?.(error) ?? codeTaken(spec.resource, error.code);
  if (error instanceof AppendTooLargeError) return appendTooLarge(spec.resource, error);
  if (!(error instanceof WrongExpectedRevisionError)) return error instanceof Error ? error : new Error(String(error));
  // Without If-Match, or when the record is still at the caller's version (the conflict was on a
  // code reservation the append needed), the command is tried again.
  if (spec.expectedVersion === undefined || error.actual === spec.expectedVersion) return undefined;
  return staleVersion(spec.resource, spec.expectedVersion, typeof error.actual === 'number' ? error.actual : -1);
}

/** The resource's TOO_LARGE for a change the log will not take at once, naming the limit's setting. */
function appendTooLarge(resource: string, error: AppendTooLargeError): Error {
  return error.bytes === undefined || error.limit === undefined
    ? new DomainError(`${resource}.TOO_LARGE`, error.message, error.errors)
    : tooLarge(resource, `The change (its events, as the event log counts them against ${error.setting})`, error.bytes, error.limit);
}

/** A key taken by another stream was used for another request: this one names another record. */
async function keyHeldElsewhere(spec: CommandSpec<unknown>, ctx: CommandContext, store: EventStore): Promise<boolean> {
  const reservation = keyReservation(ctx);
  if (reservation === undefined) return false;
  const holder = await store.findCode(reservation);
  return holder !== undefined && holder !== spec.stream;
}

/** The caller's key, taken by the first of its requests that writes (and only then). */
function keyClaim(ctx: CommandContext, folded: Folded<unknown>): CodeReservation[] {
  const key = keyReservation(ctx);
  return key === undefined || folded.keys.has(keyOf(ctx.actor, ctx.idempotencyKey ?? '')) ? [] : [key];
}

/** A request already applied to this stream under the caller's key (read whole: a rare path). */
async function priorOnStream<S>(spec: CommandSpec<S>, ctx: CommandContext, store: EventStore, folded: Folded<S>): Promise<CommandResult<S> | undefined> {
  if (ctx.idempotencyKey === undefined || !folded.keys.has(keyOf(ctx.actor, ctx.idempotencyKey))) return undefined;
  return priorResult(spec, ctx, await store.readStream(spec.stream));
}

async function attempt<S>(spec: CommandSpec<S>, ctx: CommandContext, store: EventStore): Promise<CommandResult<S>> {
  if (await keyHeldElsewhere(spec as CommandSpec<unknown>, ctx, store)) throw idempotencyKeyReused();
  const folded = await foldStream(spec, store);
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
  rememberFold(spec, store, after);
  return { state: after.state, version: result.revision, position: result.position, written: true };
}

/** In-process commands on one stream run one after another, so writers without If-Match do not
 * race each other into retries; other processes still meet the expected-revision check. */
const streamQueues = new WeakMap<EventStore, Map<string, Promise<unknown>>>();

function serialized<T>(store: EventStore, stream: string, run: () => Promise<T>): Promise<T> {
  let queues = streamQueues.get(store);
  if (queues === undefined) {
    queues = new Map();
    streamQueues.set(store, queues);
  }
  const result = (queues.get(stream) ?? Promise.resolve()).then(run, run);
  const tail = result.catch(() => undefined);
  queues.set(stream, tail);
  void tail.then(() => {
    if (queues.get(stream) === tail) queues.delete(stream);
  });
  return result;
}

export function handleCommand<S>(spec: CommandSpec<S>, ctx: CommandContext, store: EventStore): Promise<CommandResult<S>> {
  // With If-Match too: appendFailure answers 412 for a conflict that moved the record, so a retry
  // runs only when the record is still at the caller's version (a code claim or a key was raced).
  const attempts = 1 + (spec.retries ?? 16);
  return serialized(store, spec.stream, async () => {
    for (let n = 1; ; n++) {
      try {
        return await attempt(spec, ctx, store);
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
export async function handleNewStreams<S>(commands: readonly { spec: CommandSpec<S>; ctx: CommandContext }[], store: EventStore): Promise<NewStreamOutcome<S>[]> {
  const outcomes: NewStreamOutcome<S>[] = [];
  const appends: { index: number; fresh: NewEvent[]; request: AppendRequest }[] = [];
  for (const [index, { spec, ctx }] of commands.entries()) {
    try {
      if (ctx.idempotencyKey === undefined) throw new Error(`${spec.stream}: a command of handleNewStreams needs an Idempotency-Key`);
      const decision = spec.decide(spec.initial());
      const fresh = newEvents(spec, ctx, decision.events);
      outcomes.push({ kind: 'again' });
      if (fresh.length > 0) appends.push({ index, fresh, request: { stream: spec.stream, expected: 'no_stream', events: fresh, claim: decision.claim ?? [] } });
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
      outcomes[index] = { kind: 'done', result: { state: fold(spec, recorded), version: outcome.result.revision, position: outcome.result.position, written: true } };
    } else if (!outcome.ok && !(outcome.error instanceof WrongExpectedRevisionError)) {
      outcomes[index] = { kind: 'failed', error: appendFailure(spec, outcome.error) ?? outcome.error };
    }
  }
  return outcomes;
}
