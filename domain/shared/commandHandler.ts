// What a command over a stream decides beyond its resource's decision, as pure functions of what
// was read: who asks (the context), the events' ids and metadata, whether a request under an
// Idempotency-Key was answered already, and which append failures are refused or tried again.
// application/commands.ts runs commands over the EventStore port with them.

import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type CodeReservation,
  type EventMetadata,
  type NewEvent,
  type Position,
  type RecordedEvent,
} from '../ports.ts';
import { AppendTooLargeError, DomainError, codeTaken, idempotencyKeyReused, staleVersion, tooLarge } from './errors.ts';
import { sha256, uuidV5 } from './ids.ts';
import type { Alternatives } from './filtering.ts';
import { canonicalJson, jsonBytes, type JsonObject } from './json.ts';
import { keyOf, type Folded } from './streamFold.ts';

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

export const fold = <S>(spec: CommandSpec<S>, events: readonly RecordedEvent[]): S => events.reduce(spec.evolve, spec.initial());

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
export function priorResult<S>(spec: CommandSpec<S>, ctx: CommandContext, events: readonly RecordedEvent[]): CommandResult<S> | undefined {
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

export function newEvents<S>(spec: CommandSpec<S>, ctx: CommandContext, decided: Decided['events']): NewEvent[] {
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
export function appendFailure<S>(spec: CommandSpec<S>, error: unknown): Error | undefined {
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

/** The caller's key, taken by the first of its requests that writes (and only then). */
export function keyClaim(ctx: CommandContext, folded: Folded<unknown>): CodeReservation[] {
  const key = keyReservation(ctx);
  return key === undefined || folded.keys.has(keyOf(ctx.actor, ctx.idempotencyKey ?? '')) ? [] : [key];
}
