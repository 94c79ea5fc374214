// The production event log: the EventStore port over KurrentDB (or EventStoreDB) through
// @kurrent/kurrentdb-client. Appends go with the exact expected revision (never ANY); unique codes
// are reservation streams `<scope>Code-<code>` taken by a claim protocol, since servers before
// 25.1 have no multi-stream transaction. The pure parts (position packing, metadata, claim
// decisions, error translation) are exported and unit-tested; the rest runs against a real server
// in the contract suite.

import {
  BACKWARDS,
  CancelledError,
  DeadlineExceededError,
  END,
  FORWARDS,
  KurrentDBClient,
  NO_STREAM,
  NotLeaderError,
  START,
  StreamNotFoundError,
  TimeoutError,
  UnavailableError,
  UnknownError,
  WrongExpectedVersionError,
  convertToCommandError,
  isCommandError,
  jsonEvent,
  streamNameFilter,
  type AllStreamSubscription,
  type AppendStreamState,
  type CurrentStreamState,
  type Filter,
  type Position as KurrentPosition,
  type ReadPosition,
} from '@kurrent/kurrentdb-client';
import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type AppendRequest,
  type AppendResult,
  type CodeReservation,
  type EventMetadata,
  type EventStore,
  type ExpectedRevision,
  type NewEvent,
  type Position,
  type ReadAllOptions,
  type RecordedEvent,
} from '../../domain/ports.ts';
import { StoreUnavailableError } from '../../domain/shared/errors.ts';

// ---------------------------------------------------------------------------------------------
// Positions

const TWO_64 = 1n << 64n;
/** What a stream read reports when the server does not know the $all position of an event. */
const UNKNOWN_COMMIT = TWO_64 - 1n;

/** commit·2^64 + prepare: one bigint that sorts like the (commit, prepare) pair. */
export function packPosition(p: KurrentPosition): Position {
  if (p.commit < 0n || p.prepare < 0n || p.prepare >= TWO_64) {
    throw new RangeError(`not a KurrentDB position: ${String(p.commit)}/${String(p.prepare)}`);
  }
  return (p.commit << 64n) + p.prepare;
}

export function unpackPosition(p: Position): KurrentPosition {
  if (p < 0n) throw new RangeError(`not a packed position: ${String(p)}`);
  return { commit: p >> 64n, prepare: p & (TWO_64 - 1n) };
}

/** The position of a recorded event; 0n when the server did not say (stream reads before 22.6). */
export function positionOf(p: KurrentPosition | undefined): Position {
  return p === undefined || p.commit >= UNKNOWN_COMMIT ? 0n : packPosition(p);
}

/** Where a forward read of $all starts for "after `after`": reads are inclusive of their start
 * position (the server keeps events with TFPos >= from), so the caller drops the event at `after`. */
export function readStartAfter(after: Position): ReadPosition {
  return after === 0n ? START : unpackPosition(after);
}

/** Bytes of transaction log between two positions: the difference of their commit positions. */
export function commitDistance(from: Position, to: Position): number {
  const gap = unpackPosition(to).commit - unpackPosition(from).commit;
  return gap > 0n ? Number(gap) : 0;
}

// ---------------------------------------------------------------------------------------------
// Streams, filters, expected revisions

/** Every stream but the server's own (`$…`: $stats, $ce-…, $$metadata and the like). */
export const NON_SYSTEM_STREAMS = '^[^$]';

/** Server-side filter for readAll: the categories' streams (`<category>-…`), or every non-system
 * stream when no category is given. Reservation streams are ordinary streams of the `<scope>Code`
 * categories: they are part of the log's history and come back only when asked for (or unfiltered). */
export function readAllFilter(categories: readonly string[] | undefined): Filter {
  if (categories === undefined) return streamNameFilter({ regex: NON_SYSTEM_STREAMS });
  return streamNameFilter({ prefixes: categories.map((c) => `${c}-`) });
}

export function expectedState(expected: ExpectedRevision): AppendStreamState {
  return expected === 'no_stream' ? NO_STREAM : BigInt(expected);
}

export function actualRevision(state: CurrentStreamState): number | 'no_stream' {
  return state === NO_STREAM || state < 0n ? 'no_stream' : Number(state);
}

function revisionOf(state: AppendStreamState): ExpectedRevision | undefined {
  if (typeof state === 'bigint') return state < 0n ? 'no_stream' : Number(state);
  return state === NO_STREAM ? 'no_stream' : undefined;
}

const SAFE_CODE_CHAR = /^[A-Za-z0-9_.~-]$/;

/** Codes as stream-name text: letters, digits and `_.~-` as they are, every other byte `%XX`.
 * Injective (decodeURIComponent reverses it) and free of spaces, `$` and control characters. */
export function encodeCode(code: string): string {
  return Array.from(new TextEncoder().encode(code), (byte) => {
    const c = String.fromCharCode(byte);
    return byte < 0x80 && SAFE_CODE_CHAR.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }).join('');
}

export const decodeCode = (encoded: string): string => decodeURIComponent(encoded);

/** The reservation stream of a code (DESIGN.md: `<resource>Code-<code>`). */
export const codeStreamName = (r: CodeReservation): string => `${r.scope}Code-${encodeCode(r.code)}`;

// ---------------------------------------------------------------------------------------------
// Event metadata

/** Adapter-private metadata key: the codes an append claimed and released, read back by the claim
 * protocol from the holder's own stream and stripped from what readers see. */
export const CODE_MARKS_KEY = 'adapter:codes';

/** Reservation stream names of the codes an append took and gave up. */
export type CodeMarks = { claimed: readonly string[]; released: readonly string[] };

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);

/** The marks of an append, or undefined when it neither claims nor releases. */
export function codeMarksOf(request: Pick<AppendRequest, 'claim' | 'release'>): CodeMarks | undefined {
  const claimed = (request.claim ?? []).map(codeStreamName);
  const released = (request.release ?? []).map(codeStreamName);
  return claimed.length === 0 && released.length === 0 ? undefined : { claimed, released };
}

/** What is stored as an event's metadata: the domain's, plus its schema version and the marks. */
export function toStoredMetadata(event: Pick<NewEvent, 'metadata' | 'schemaVersion'>, marks?: CodeMarks): Record<string, unknown> {
  const stored: Record<string, unknown> = { ...event.metadata, schemaVersion: event.schemaVersion };
  if (marks !== undefined) stored[CODE_MARKS_KEY] = { claimed: [...marks.claimed], released: [...marks.released] };
  return stored;
}

export type ReadMetadata = { metadata: EventMetadata; schemaVersion: number; marks: CodeMarks | undefined };

/** Inverse of toStoredMetadata. Events written by other tools (no or non-JSON metadata) read as
 * schema version 1 with an empty actor and time. */
export function fromStoredMetadata(raw: unknown): ReadMetadata {
  if (!isRecord(raw)) return { metadata: { actor: '', at: '' }, schemaVersion: 1, marks: undefined };
  const { schemaVersion, [CODE_MARKS_KEY]: marks, ...rest } = raw;
  const metadata = { actor: '', at: '', ...rest } as EventMetadata;
  return {
    metadata,
    schemaVersion: typeof schemaVersion === 'number' ? schemaVersion : 1,
    marks: isRecord(marks) ? { claimed: strings(marks.claimed), released: strings(marks.released) } : undefined,
  };
}

/** An event as the client returns it (JSON or binary), narrowed to what the adapter reads. */
export type StoredEvent = {
  streamId: string;
  id: string;
  revision: bigint;
  type: string;
  data: unknown;
  metadata: unknown;
  position?: KurrentPosition | undefined;
};

export type MarkedEvent = { event: RecordedEvent; marks: CodeMarks | undefined };

export function toRecordedEvent(stored: StoredEvent): MarkedEvent {
  const { metadata, schemaVersion, marks } = fromStoredMetadata(stored.metadata);
  return {
    event: {
      id: stored.id,
      stream: stored.streamId,
      revision: Number(stored.revision),
      position: positionOf(stored.position),
      type: stored.type,
      schemaVersion,
      data: isRecord(stored.data) ? stored.data : { value: stored.data },
      metadata,
    },
    marks,
  };
}

// ---------------------------------------------------------------------------------------------
// Idempotent retries

/** Event ids are UUIDs, which the server hands back in its own (lower-case) spelling. */
export const sameId = (a: string, b: string): boolean => a.toLowerCase() === b.toLowerCase();

/** When the request's event ids are already in the stream, one after another, the result of the
 * append that wrote them; 'partial' when only some are; undefined when none is. */
export function duplicateOf(
  stream: readonly Pick<RecordedEvent, 'id' | 'revision' | 'position'>[],
  ids: readonly string[],
): AppendResult | 'partial' | undefined {
  const [firstId = ''] = ids;
  const first = stream.findIndex((e) => sameId(e.id, firstId));
  if (first < 0) return stream.some((e) => ids.some((id) => sameId(e.id, id))) ? 'partial' : undefined;
  const run = stream.slice(first, first + ids.length);
  const last = run.at(-1);
  if (last === undefined || run.length !== ids.length || run.some((e, i) => !sameId(e.id, ids[i] ?? ''))) return 'partial';
  return { revision: last.revision, position: last.position, duplicate: true };
}

// ---------------------------------------------------------------------------------------------
// The claim protocol

/** A claim stays unproven (its holder's append may still be on its way) for this long; after it,
 * a claim whose holder never wrote the claiming event is stale. Well above the client's deadline. */
export const CLAIM_GRACE_MS = 60_000;

export const CODE_CLAIMED = 'CodeClaimed';
export const CODE_RELEASED = 'CodeReleased';

/** The last event of a reservation stream. */
export type Reservation =
  | { kind: 'claimed'; revision: bigint; stream: string; eventId: string; at: string }
  | { kind: 'released'; revision: bigint; stream: string };
export type Claim = Extract<Reservation, { kind: 'claimed' }>;

export function reservationOf(stored: Pick<StoredEvent, 'streamId' | 'type' | 'data' | 'revision'>): Reservation {
  const data = isRecord(stored.data) ? stored.data : {};
  const stream = typeof data.stream === 'string' ? data.stream : '';
  if (stored.type === CODE_CLAIMED) {
    const eventId = typeof data.eventId === 'string' ? data.eventId : '';
    const at = typeof data.at === 'string' ? data.at : '';
    return { kind: 'claimed', revision: stored.revision, stream, eventId, at };
  }
  if (stored.type === CODE_RELEASED) return { kind: 'released', revision: stored.revision, stream };
  throw new Error(`unexpected event ${stored.type} in reservation stream ${stored.streamId}`);
}

export type ClaimDecision =
  | { kind: 'free'; expected: AppendStreamState }
  | { kind: 'ours' }
  | { kind: 'held'; claim: Claim };

/** What a claimant may do given the reservation stream's last event. A claim held by another
 * stream still has to be checked (claimStatus) before it can be taken over. */
export function claimDecision(last: Reservation | undefined, claimant: string): ClaimDecision {
  if (last === undefined) return { kind: 'free', expected: NO_STREAM };
  if (last.kind === 'released') return { kind: 'free', expected: last.revision };
  if (last.stream === claimant) return { kind: 'ours' };
  return { kind: 'held', claim: last };
}

/** The latest word of a stream's own events about a code: claimed or released. */
export function lastMark(events: readonly Pick<MarkedEvent, 'marks'>[], codeStream: string): 'claimed' | 'released' | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const marks = events[i]?.marks;
    // An append that releases and re-claims the same code keeps it.
    if (marks?.claimed.includes(codeStream) === true) return 'claimed';
    if (marks?.released.includes(codeStream) === true) return 'released';
  }
  return undefined;
}

export type ClaimStatus = 'valid' | 'pending' | 'stale';

/** Whether a claim holds, checked against the holder's own stream: valid once the holder wrote the
 * claiming event and has not released the code since; pending while the claiming event is missing
 * but the claim is younger than the grace period; stale otherwise (the claimant crashed between
 * claim and append, or released the code and crashed before saying so in the reservation stream). */
export function claimStatus(
  claim: Claim,
  codeStream: string,
  holder: readonly MarkedEvent[],
  nowMs: number,
  graceMs: number,
): ClaimStatus {
  const index = holder.findIndex((e) => sameId(e.event.id, claim.eventId));
  if (index < 0) return nowMs - Date.parse(claim.at) <= graceMs ? 'pending' : 'stale';
  return lastMark(holder.slice(index), codeStream) === 'released' ? 'stale' : 'valid';
}

/** The revision at which `stream` may write CodeReleased: when the last event is its own claim. */
export function releaseRevision(last: Reservation | undefined, stream: string): bigint | undefined {
  return last?.kind === 'claimed' && last.stream === stream ? last.revision : undefined;
}

// ---------------------------------------------------------------------------------------------
// Errors

/** Rust-bridge reads report a deadline or a dropped connection as UnknownError with this text. */
const TRANSIENT_UNKNOWN = /deadline exceeded|connection (is )?closed/i;

function isTransient(e: Error): boolean {
  return (
    e instanceof UnavailableError ||
    e instanceof DeadlineExceededError ||
    e instanceof NotLeaderError ||
    e instanceof CancelledError ||
    e instanceof TimeoutError ||
    (e instanceof UnknownError && TRANSIENT_UNKNOWN.test(e.message))
  );
}

/** The client's conversion of raw gRPC errors, which assumes a gRPC error's shape (`details`) once
 * it sees a numeric `code`: anything else it chokes on stays as it was. */
function asCommandError(error: Error): Error {
  try {
    return convertToCommandError(error);
  } catch {
    return error;
  }
}

/** The port's error for a client error: WrongExpectedVersion → WrongExpectedRevisionError (for the
 * request's stream and expectation when given), transient failures → StoreUnavailableError, the
 * rest as the client's own error (raw gRPC errors first converted to the client's classes). */
export function translateError(error: unknown, request?: Pick<AppendRequest, 'stream' | 'expected'>): Error {
  const e = error instanceof Error ? asCommandError(error) : new Error(String(error));
  if (e instanceof WrongExpectedVersionError) {
    const stream = request?.stream ?? e.streamName;
    const expected = request?.expected ?? revisionOf(e.expectedState) ?? 'no_stream';
    return new WrongExpectedRevisionError(stream, expected, actualRevision(e.actualState));
  }
  return isTransient(e) ? new StoreUnavailableError('EVENT_STORE', e) : e;
}

/** Whether a failed append certainly wrote nothing: the server refused it. After a timeout or a
 * dropped connection it may have committed all the same, so its claims must stay: the claim check
 * finds out later from the holder's stream whether they hold. */
export function refusedForSure(failure: Error): boolean {
  return failure instanceof WrongExpectedRevisionError || (isCommandError(failure) && !(failure instanceof UnknownError));
}

/** A connection string fit for a message: the password replaced. */
export const redactConnectionString = (cs: string): string => cs.replace(/\/\/([^:@/]+):([^@/]*)@/, '//$1:***@');

// ---------------------------------------------------------------------------------------------
// The adapter

export type KurrentEventStoreOptions = {
  /** See CLAIM_GRACE_MS. */
  claimGraceMs?: number;
  /** Delay before a dropped $all subscription is opened again. */
  resubscribeMs?: number;
  now?: () => number;
};

type TakenClaim = { codeStream: string; revision: bigint };

export class KurrentEventStore implements EventStore {
  readonly #client: KurrentDBClient;
  readonly #listeners = new Set<(p: Position) => void>();
  readonly #inflight = new Set<Promise<unknown>>();
  readonly #graceMs: number;
  readonly #resubscribeMs: number;
  readonly #now: () => number;
  #subscription: AllStreamSubscription | undefined;
  #resubscribeTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(client: KurrentDBClient, options: KurrentEventStoreOptions = {}) {
    this.#client = client;
    this.#graceMs = options.claimGraceMs ?? CLAIM_GRACE_MS;
    this.#resubscribeMs = options.resubscribeMs ?? 1_000;
    this.#now = options.now ?? Date.now;
  }

  append(request: AppendRequest): Promise<AppendResult> {
    if (this.#closed) return Promise.reject(new Error('event store is closed'));
    if (request.events.length === 0) return Promise.reject(new Error('append needs at least one event'));
    const running = this.#append(request);
    this.#inflight.add(running);
    void running.then(
      () => this.#inflight.delete(running),
      () => this.#inflight.delete(running),
    );
    return running;
  }

  async #append(request: AppendRequest): Promise<AppendResult> {
    const keyed = request.events.some((e) => e.metadata.idempotencyKey !== undefined);
    // KurrentDB acknowledges some retries as successes without saying so, and writes others again
    // when the expected revision has moved on: look for the ids first.
    if (keyed) {
      const retried = await this.#duplicate(request);
      if (retried !== undefined) return retried;
    }
    const taken = await this.#claimAll(request);
    let result: AppendResult;
    try {
      result = await this.#write(request);
    } catch (error) {
      return this.#failed(request, taken, keyed, error);
    }
    await this.#releaseAll(request);
    this.#notify(result.position);
    return result;
  }

  /** A conflict may be a concurrent retry of the same request that got there first; a refusal gives
   * back the codes this append took; then it fails. */
  async #failed(request: AppendRequest, taken: readonly TakenClaim[], keyed: boolean, error: unknown): Promise<AppendResult> {
    const failure = translateError(error, request);
    if (keyed && failure instanceof WrongExpectedRevisionError) {
      const retried = await this.#duplicate(request).catch(() => undefined);
      if (retried !== undefined) return retried;
    }
    if (refusedForSure(failure)) await this.#rollback(request.stream, taken);
    throw failure;
  }

  /** The first result again when the ids are already in the stream; a conflict when only some are. */
  async #duplicate(request: AppendRequest): Promise<AppendResult | undefined> {
    const events = (await this.#readMarked(request.stream)).map((m) => m.event);
    const found = duplicateOf(events, request.events.map((e) => e.id));
    if (found !== 'partial') return found;
    throw new WrongExpectedRevisionError(request.stream, request.expected, events.at(-1)?.revision ?? 'no_stream');
  }

  async #write(request: AppendRequest): Promise<AppendResult> {
    const marks = codeMarksOf(request);
    const events = request.events.map((e, i) =>
      jsonEvent({ id: e.id, type: e.type, data: e.data, metadata: toStoredMetadata(e, i === 0 ? marks : undefined) }),
    );
    const written = await this.#client.appendToStream(request.stream, events, { streamState: expectedState(request.expected) });
    const revision = Number(written.nextExpectedRevision);
    // The server answers with the position of the last event written; servers that leave it out
    // are asked for it.
    const position = written.position === undefined ? await this.#lastPosition(request.stream) : packPosition(written.position);
    return { revision, position };
  }

  async #lastPosition(stream: string): Promise<Position> {
    for await (const resolved of this.#client.readStream(stream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
      if (resolved.event) return positionOf(resolved.event.position);
    }
    return 0n;
  }

  // Claims are taken in one order (by reservation stream) so two appends claiming the same codes
  // cannot each hold one and lose the other.
  async #claimAll(request: AppendRequest): Promise<TakenClaim[]> {
    const first = request.events[0];
    const claims = [...(request.claim ?? [])].sort((a, b) => (codeStreamName(a) < codeStreamName(b) ? -1 : 1));
    const taken: TakenClaim[] = [];
    if (first === undefined) return taken;
    try {
      for (const c of claims) {
        const claim = await this.#claim(c, request.stream, first.id);
        if (claim !== undefined) taken.push(claim);
      }
    } catch (error) {
      await this.#rollback(request.stream, taken);
      throw error;
    }
    return taken;
  }

  /** Takes a code for `stream`: undefined when it already holds it, the claim written otherwise.
   * Concurrent claimants race on the reservation stream's expected revision; a loser reads again. */
  async #claim(code: CodeReservation, stream: string, eventId: string): Promise<TakenClaim | undefined> {
    const codeStream = codeStreamName(code);
    for (let attempt = 0; attempt < 3; attempt++) {
      const expected = await this.#claimable(code, codeStream, stream);
      if (expected === undefined) return undefined;
      const claimed = jsonEvent({ type: CODE_CLAIMED, data: { stream, eventId, at: new Date(this.#now()).toISOString() } });
      try {
        const written = await this.#client.appendToStream(codeStream, claimed, { streamState: expected });
        return { codeStream, revision: written.nextExpectedRevision };
      } catch (error) {
        const failure = translateError(error);
        // Another claimant wrote first: read again and decide again.
        if (!(failure instanceof WrongExpectedRevisionError)) throw failure;
      }
    }
    throw new CodeTakenError(code.scope, code.code);
  }

  /** The expected revision to claim at; undefined when the code is already the stream's. */
  async #claimable(code: CodeReservation, codeStream: string, stream: string): Promise<AppendStreamState | undefined> {
    const decision = claimDecision(await this.#lastReservation(codeStream), stream);
    switch (decision.kind) {
      case 'ours':
        return undefined;
      case 'free':
        return decision.expected;
      case 'held': {
        const holder = await this.#readMarked(decision.claim.stream);
        const status = claimStatus(decision.claim, codeStream, holder, this.#now(), this.#graceMs);
        if (status !== 'stale') throw new CodeTakenError(code.scope, code.code);
        return decision.claim.revision;
      }
    }
  }

  /** Best effort: a claim left behind is recognised as stale by the next claimant. Safe whenever
   * the record's events were not written (claims are taken before, and kept after an unsure write). */
  async #rollback(stream: string, taken: readonly TakenClaim[]): Promise<void> {
    for (const t of taken) await this.#writeReleased(t.codeStream, stream, t.revision);
  }

  async #releaseAll(request: AppendRequest): Promise<void> {
    for (const r of request.release ?? []) {
      const codeStream = codeStreamName(r);
      try {
        const at = releaseRevision(await this.#lastReservation(codeStream), request.stream);
        if (at !== undefined) await this.#writeReleased(codeStream, request.stream, at);
      } catch {
        // Best effort as well: the release is recorded in the stream's own event (CODE_MARKS_KEY).
      }
    }
  }

  async #writeReleased(codeStream: string, stream: string, revision: bigint): Promise<void> {
    try {
      await this.#client.appendToStream(codeStream, jsonEvent({ type: CODE_RELEASED, data: { stream } }), { streamState: revision });
    } catch {
      // See #rollback and #releaseAll.
    }
  }

  async #lastReservation(codeStream: string): Promise<Reservation | undefined> {
    try {
      for await (const resolved of this.#client.readStream(codeStream, { direction: BACKWARDS, fromRevision: END, maxCount: 1 })) {
        if (resolved.event) return reservationOf(resolved.event);
      }
      return undefined;
    } catch (error) {
      if (error instanceof StreamNotFoundError) return undefined;
      throw translateError(error);
    }
  }

  async #readMarked(stream: string): Promise<MarkedEvent[]> {
    const events: MarkedEvent[] = [];
    try {
      for await (const resolved of this.#client.readStream(stream)) {
        if (resolved.event) events.push(toRecordedEvent(resolved.event));
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw translateError(error);
    }
    return events;
  }

  async readStream(stream: string): Promise<RecordedEvent[]> {
    return (await this.#readMarked(stream)).map((m) => m.event);
  }

  async readAll(options: ReadAllOptions): Promise<RecordedEvent[]> {
    const { after, limit, categories } = options;
    if (limit <= 0 || categories?.length === 0) return [];
    const events: RecordedEvent[] = [];
    try {
      const read = this.#client.readAll({
        direction: FORWARDS,
        fromPosition: readStartAfter(after),
        maxCount: limit + 1,
        filter: readAllFilter(categories),
      });
      for await (const resolved of read) {
        if (resolved.event === undefined) continue;
        const { event } = toRecordedEvent(resolved.event);
        if (event.position > after) events.push(event);
        if (events.length >= limit) break;
      }
    } catch (error) {
      throw translateError(error);
    }
    return events;
  }

  async headPosition(): Promise<Position> {
    try {
      const read = this.#client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, filter: readAllFilter(undefined) });
      for await (const resolved of read) {
        if (resolved.event) return packPosition(resolved.event.position);
      }
      return 0n;
    } catch (error) {
      throw translateError(error);
    }
  }

  async findCode(reservation: CodeReservation): Promise<string | undefined> {
    const codeStream = codeStreamName(reservation);
    const last = await this.#lastReservation(codeStream);
    if (last?.kind !== 'claimed') return undefined;
    const holder = await this.#readMarked(last.stream);
    return claimStatus(last, codeStream, holder, this.#now(), this.#graceMs) === 'valid' ? last.stream : undefined;
  }

  distance(from: Position, to: Position): number {
    return commitDistance(from, to);
  }

  onAppended(listener: (position: Position) => void): () => void {
    this.#listeners.add(listener);
    if (this.#listeners.size === 1) this.#subscribe();
    return () => {
      if (this.#listeners.delete(listener) && this.#listeners.size === 0) void this.#unsubscribe();
    };
  }

  #notify(position: Position): void {
    for (const l of this.#listeners) l(position);
  }

  /** Live notifications of appends by every instance: $all from its end, system streams left out. */
  #subscribe(): void {
    if (this.#closed || this.#subscription !== undefined) return;
    const subscription = this.#client.subscribeToAll({ fromPosition: END, filter: readAllFilter(undefined) });
    const lost = () => {
      if (this.#subscription !== subscription) return;
      this.#subscription = undefined;
      this.#resubscribeLater();
    };
    subscription.on('data', (resolved) => {
      if (resolved.event) this.#notify(packPosition(resolved.event.position));
    });
    subscription.on('error', lost);
    subscription.on('end', lost);
    this.#subscription = subscription;
  }

  /** After a dropped subscription, listeners hear of the current head, since appends made while it
   * was down were never announced. */
  #resubscribeLater(): void {
    if (this.#closed || this.#listeners.size === 0 || this.#resubscribeTimer !== undefined) return;
    this.#resubscribeTimer = setTimeout(() => {
      this.#resubscribeTimer = undefined;
      if (this.#closed || this.#listeners.size === 0) return;
      this.#subscribe();
      this.headPosition().then(
        (head) => {
          if (head > 0n) this.#notify(head);
        },
        () => undefined,
      );
    }, this.#resubscribeMs);
    this.#resubscribeTimer.unref();
  }

  #unsubscribe(): Promise<void> {
    clearTimeout(this.#resubscribeTimer);
    this.#resubscribeTimer = undefined;
    const subscription = this.#subscription;
    this.#subscription = undefined;
    return subscription === undefined ? Promise.resolve() : subscription.unsubscribe().catch(() => undefined);
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#inflight]);
    this.#listeners.clear();
    await this.#unsubscribe();
    await this.#client.dispose();
  }
}

// ---------------------------------------------------------------------------------------------
// Opening

async function probe(client: KurrentDBClient): Promise<void> {
  for await (const _ of client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 })) break;
}

function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(new Error(`no answer within ${String(ms / 1000)} s`));
    }, ms);
  });
  return Promise.race([work, timeout]).finally(() => {
    clearTimeout(timer);
  });
}

/** Connects and reads one event, so a server that does not answer fails the start-up with a clear
 * message instead of the first request. */
export async function openKurrentEventStore(
  connectionString: string,
  options: KurrentEventStoreOptions & { connectTimeoutMs?: number } = {},
): Promise<KurrentEventStore> {
  const where = redactConnectionString(connectionString);
  let client: KurrentDBClient;
  try {
    client = KurrentDBClient.connectionString(connectionString);
  } catch (error) {
    throw new Error(`EVENTSTORE_URL is not a KurrentDB connection string (${where}): ${(error as Error).message}`, { cause: error });
  }
  try {
    await within(probe(client), options.connectTimeoutMs ?? 10_000);
  } catch (error) {
    await client.dispose().catch(() => undefined);
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `KurrentDB at ${where} does not answer (${reason}); start it (docker compose up -d kurrentdb) or unset EVENTSTORE_URL to use the embedded log`,
      { cause: error },
    );
  }
  return new KurrentEventStore(client, options);
}
