// The production event log: the EventStore port over KurrentDB (or EventStoreDB) through
// @kurrent/kurrentdb-client. Appends go with the exact expected revision (never ANY); unique codes
// are reservation streams taken by the claim protocol of codeClaims.ts, since servers before 25.1
// have no multi-stream transaction. The parts:
// - positions.ts  the port's one-bigint positions, distances and $all read starts;
// - streams.ts    the readAll filter and expected/actual revisions in the client's terms;
// - metadata.ts   what is stored with each event (code marks included) and read back;
// - codeClaims.ts the claim protocol's decisions (reservation streams and their generations,
//                 claim status, fences, releases) and why no late commit makes a second holder;
// - errors.ts     the client's failures as the port's errors: transient ones as 503, size
//                 refusals as 413;
// - this file     the adapter (the I/O around those decisions, every call bounded by the
//                 deadline) and how it is opened.
// Tests: eventStore.unit.spec.ts (the pure parts; the real client without a server and against the
// gRPC stand-in of grpcStandIn.ts), claimProtocol.unit.spec.ts (the adapter and the real client over
// the stand-in, under chosen interleavings), eventStore.standIn.int.spec.ts (the contract over the
// stand-in), eventStore.containers.spec.ts (the contract on a real server).

import {
  AccessDeniedError,
  BACKWARDS,
  END,
  FORWARDS,
  KurrentDBClient,
  NO_STREAM,
  START,
  StreamDeletedError,
  StreamNotFoundError,
  jsonEvent,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type AppendResult as ClientAppendResult,
  type AppendStreamState,
  type AppendToStreamOptions,
  type EventData,
  type ReadAllOptions as ClientReadAllOptions,
  type ReadStreamOptions,
  type ResolvedEvent,
  type StreamMetadata,
  type SubscribeToAllOptions,
} from '@kurrent/kurrentdb-client';
import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type AppendOutcome,
  type AppendRequest,
  type AppendResult,
  type CodeReservation,
  type EventStore,
  type Position,
  type ReadAllOptions,
  type RecordedEvent,
} from '../../domain/ports.ts';
import { AppendTooLargeError, StoreUnavailableError } from '../../domain/shared/errors.ts';
import { redactCredentials } from '../redact.ts';
import {
  CLAIM_GRACE_MS,
  CODE_CLAIMED,
  CODE_RELEASED,
  MAX_GENERATIONS,
  claimDecision,
  codeMarksOf,
  codeStreamName,
  generationStream,
  holdOf,
  isAdapterEvent,
  releaseRevision,
  releasedCodes,
  reservationOf,
  voidsAny,
  type Claim,
  type ReservationStream,
} from './codeClaims.ts';
import { pastDeadline, refusedAppend, refusedForSure, translateError } from './errors.ts';
import {
  CODE_CLAIM_VOIDED,
  duplicateOf,
  fenceData,
  sameId,
  toRecordedEvent,
  toStoredMetadata,
  type CodeMarks,
  type MarkedEvent,
} from './metadata.ts';
import { commitDistance, packPosition, readStartAfter } from './positions.ts';
import { expectedState, readAllFilter } from './streams.ts';

/** The record's events as stored, the first one carrying the append's code marks. Made before any
 * claim, so nothing between the claims and the record append can fail but the append itself. */
function recordEvents(request: AppendRequest): EventData[] {
  const marks = codeMarksOf(request);
  return request.events.map((e, i) =>
    jsonEvent({ id: e.id, type: e.type, data: e.data, metadata: toStoredMetadata(e, i === 0 ? marks : undefined) }),
  );
}

/** What the adapter uses of the client (KurrentDBClient has it all). */
export type KurrentClient = {
  appendToStream(streamName: string, events: EventData | EventData[], options?: AppendToStreamOptions): Promise<ClientAppendResult>;
  readStream(streamName: string, options?: ReadStreamOptions): AsyncIterableIterator<ResolvedEvent>;
  readAll(options?: ClientReadAllOptions): AsyncIterableIterator<AllStreamResolvedEvent>;
  subscribeToAll(options?: SubscribeToAllOptions): AllStreamSubscription;
  /** Writes a stream's metadata (`$tb`, truncate before: the log retention's purge). */
  setStreamMetadata(streamName: string, metadata: StreamMetadata): Promise<ClientAppendResult>;
  dispose(): Promise<void>;
};

export type KurrentEventStoreOptions = {
  /** See CLAIM_GRACE_MS. */
  claimGraceMs?: number;
  /** Delay before a dropped $all subscription is opened again. */
  resubscribeMs?: number;
  /** This instance's clock, compared with the server's time of a claim to see whether it expired
   * (for liveness only: the fence keeps a late commit out whatever the clocks say, codeClaims.ts). */
  now?: () => number;
  /** The largest append the server takes (its MaxAppendSize, counted as it counts: each event's
   * data, metadata and twice its type's length): a larger one is refused here as a 413, before
   * any claim. EVENTSTORE_MAX_APPEND_BYTES; 1 MiB, the default up to KurrentDB 25.1. */
  maxAppendBytes?: number;
  /** How long this adapter waits for one call: a read, an append (the client waits for a batch
   * append without end), closing (the connection string's defaultDeadline, 10 s unless set). */
  deadlineMs?: number;
};

/** The client's own default deadline for a call. */
export const CLIENT_DEFAULT_DEADLINE_MS = 10_000;

/** KurrentDB's default MaxAppendSize up to 25.1 (256 MiB from 26.0). */
export const DEFAULT_MAX_APPEND_BYTES = 1024 * 1024;

/** The setting that sets maxAppendBytes, named in the 413. */
const MAX_APPEND_SETTING = 'EVENTSTORE_MAX_APPEND_BYTES';

/** An append's size as KurrentDB counts it against MaxAppendSize (Event.SizeOnDisk, summed): the
 * data and metadata as sent (JSON, UTF-8) and the type's UTF-16 length twice. */
export function appendSize(events: readonly EventData[]): number {
  const bytes = (v: unknown): number =>
    v === undefined ? 0 : v instanceof Uint8Array ? v.length : Buffer.byteLength(JSON.stringify(v), 'utf8');
  return events.reduce((sum, e) => sum + bytes(e.data) + bytes(e.metadata) + e.type.length * 2, 0);
}

/** A claim written by an append: the code's stream (as the marks name it), the generation's stream
 * it was written to and its revision there; `givesBack` when the append may give it back if refused
 * (the code was free: not a claim again of a code the stream had claimed already). */
type TakenClaim = { codeStream: string; claimStream: string; claimRevision: bigint; givesBack: boolean };

/** How many times a record append is made again after fences that void none of its claims. */
const FENCE_HOPS = 3;

/** Concurrent claimants of one code race on the reservation stream's revision; a loser reads again,
 * and after this many lost races gives up with a conflict on its record's stream. */
const CLAIM_ATTEMPTS = 3;

/** Every read the protocol and the commands rely on goes to the leader: a follower may not have the
 * last claim or the last event yet, and the projector's "a short batch saw everything up to the head
 * read before it" needs the head and the batch from the same, current, node. */
const FROM_LEADER = { requiresLeader: true } as const;

export class KurrentEventStore implements EventStore {
  readonly #client: KurrentClient;
  readonly #listeners = new Set<(p: Position) => void>();
  readonly #inflight = new Set<Promise<unknown>>();
  readonly #graceMs: number;
  readonly #resubscribeMs: number;
  readonly #now: () => number;
  readonly #deadlineMs: number;
  readonly #maxAppendBytes: number;
  /** The highest head this instance answered (headPosition never goes back). */
  #head = 0n;
  #subscription: AllStreamSubscription | undefined;
  #resubscribeTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(client: KurrentClient, options: KurrentEventStoreOptions = {}) {
    this.#client = client;
    this.#graceMs = options.claimGraceMs ?? CLAIM_GRACE_MS;
    this.#resubscribeMs = options.resubscribeMs ?? 1_000;
    this.#now = options.now ?? Date.now;
    this.#deadlineMs = options.deadlineMs ?? CLIENT_DEFAULT_DEADLINE_MS;
    this.#maxAppendBytes = options.maxAppendBytes ?? DEFAULT_MAX_APPEND_BYTES;
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

  /** One append per stream, all issued at once: KurrentDB has no transaction over several streams
   * before 25.1, and none is needed where each stream is judged alone (appendMany's contract). */
  appendMany(requests: readonly AppendRequest[]): Promise<AppendOutcome[]> {
    return Promise.all(
      requests.map((request) =>
        this.append(request).then(
          (result): AppendOutcome => ({ ok: true, result }),
          (error: unknown): AppendOutcome => ({ ok: false, error }),
        ),
      ),
    );
  }

  async #append(request: AppendRequest): Promise<AppendResult> {
    const keyed = request.events.some((e) => e.metadata.idempotencyKey !== undefined);
    // KurrentDB acknowledges some retries as successes without saying so, and writes others again
    // when the expected revision has moved on: look for the ids first.
    if (keyed) {
      const retried = await this.#duplicate(request);
      if (retried !== undefined) return retried.result;
    }
    const events = recordEvents(request);
    const size = appendSize(events);
    if (size > this.#maxAppendBytes) throw new AppendTooLargeError(size, this.#maxAppendBytes, MAX_APPEND_SETTING);
    const taken = await this.#claimAll(request);
    let written: ClientAppendResult;
    try {
      written = await this.#appendRecord(request, events, taken);
    } catch (error) {
      return this.#failed(request, taken, keyed, error);
    }
    // The record landed: whatever fails from here on gives back no claim.
    const position = await this.#positionOf(request.stream, written).catch(
      (error: unknown) => new StoreUnavailableError('EVENT_STORE', error),
    );
    await this.#releaseAll(request, Number(written.nextExpectedRevision) - events.length + 1);
    if (position instanceof StoreUnavailableError) throw position;
    const result = { revision: Number(written.nextExpectedRevision), position };
    this.#notify(result.position);
    return result;
  }

  /** The record append, at the request's expected revision, or again after fences (codeClaims.ts)
   * that passed since and void none of this append's claims: fences are no events of the record's. */
  async #appendRecord(request: AppendRequest, events: EventData[], taken: readonly TakenClaim[]): Promise<ClientAppendResult> {
    let expected = expectedState(request.expected);
    for (let hop = 0; ; hop++) {
      try {
        return await this.#appendTo(request.stream, events, expected);
      } catch (error) {
        const conflict = translateError(error, request);
        if (!(conflict instanceof WrongExpectedRevisionError) || conflict.actual === 'no_stream' || hop === FENCE_HOPS) throw error;
        const after = expected === NO_STREAM ? 0 : Number(expected) + 1;
        // Behind the expectation (it names a revision not yet written): no fence passed.
        if (conflict.actual < after) throw error;
        const passed = await this.#readMarked(request.stream, { from: after, limit: conflict.actual - after + 1 });
        if (passed.length === 0 || passed.some((m) => m.fence === undefined) || voidsAny(passed, taken)) throw error;
        expected = BigInt(conflict.actual);
      }
    }
  }

  /** The record append failed: a conflict may be a concurrent retry of the same request (or another
   * request under the same key) that got there first, answered with its result; a refusal gives
   * back the codes this append took; then it fails. Only the record append's own errors come here. */
  async #failed(request: AppendRequest, taken: readonly TakenClaim[], keyed: boolean, error: unknown): Promise<AppendResult> {
    const failure = translateError(error, request);
    if (keyed && failure instanceof WrongExpectedRevisionError) {
      const retried = await this.#duplicate(request).catch(() => undefined);
      if (retried !== undefined) {
        // The claims name the landed event; those it does not mark are no claims of its request's.
        const unmarked = taken.filter((t) => retried.marks?.claimed.includes(t.codeStream) !== true);
        await this.#rollback(request.stream, unmarked);
        return retried.result;
      }
    }
    if (refusedForSure(failure)) await this.#rollback(request.stream, taken);
    throw failure;
  }

  /** The first result again (with the marks of its first event) when the ids are already in the
   * stream; a conflict when only some are. */
  async #duplicate(request: AppendRequest): Promise<{ result: AppendResult; marks: CodeMarks | undefined } | undefined> {
    const marked = await this.#readMarked(request.stream);
    const events = marked.map((m) => m.event);
    const ids = request.events.map((e) => e.id);
    const found = duplicateOf(events, ids);
    if (found === undefined) return undefined;
    if (found === 'partial') throw new WrongExpectedRevisionError(request.stream, request.expected, events.at(-1)?.revision ?? 'no_stream');
    return { result: found, marks: marked.find((m) => sameId(m.event.id, ids[0] ?? ''))?.marks };
  }

  /** Appends at exactly `streamState`; a conflict throws also when the client was told to answer it
   * as `success: false` (throwOnAppendFailure=false, which openKurrentEventStore refuses). The
   * revision in such an answer is not the stream's: the client's batch-append path reports
   * `BigInt(hasCurrentStreamRevision())`, 1 for any existing stream; so it is read from the stream. */
  async #appendTo(stream: string, events: EventData | EventData[], streamState: AppendStreamState): Promise<ClientAppendResult> {
    const written = await this.#bounded('append', this.#client.appendToStream(stream, events, { streamState, deadline: this.#deadlineMs }));
    if (!written.success) throw refusedAppend(stream, streamState, await this.#currentRevision(stream));
    return written;
  }

  /** A call's answer within the deadline: the client waits for a batch append without end (it only
   * tells the server the deadline, which a complete request does not heed), so this adapter stops
   * waiting; the call's outcome is then unknown, as after the server's own timeout. */
  #bounded<T>(what: 'append' | 'read', call: Promise<T>): Promise<T> {
    return within(call, this.#deadlineMs, () => pastDeadline(what, this.#deadlineMs));
  }

  /** The revision of a stream's last event, NO_STREAM when it has none. */
  async #currentRevision(stream: string): Promise<bigint | typeof NO_STREAM> {
    const [last] = await this.#readMarked(stream, { backwards: true, limit: 1 });
    return last === undefined ? NO_STREAM : BigInt(last.event.revision);
  }

  /** The position of an append's last event: the server's answer has it, servers that leave it
   * out are asked for it. */
  async #positionOf(stream: string, written: ClientAppendResult): Promise<Position> {
    if (written.position !== undefined) return packPosition(written.position);
    const [last] = await this.#readMarked(stream, { from: Number(written.nextExpectedRevision), backwards: true, limit: 1 });
    return last?.event.position ?? 0n;
  }

  // Claims are taken in one order (by reservation stream) so two appends claiming the same codes
  // cannot each hold one and lose the other.
  async #claimAll(request: AppendRequest): Promise<TakenClaim[]> {
    const first = request.events[0];
    const claims = [...(request.claim ?? [])].sort((a, b) => (codeStreamName(a) < codeStreamName(b) ? -1 : 1));
    const taken: TakenClaim[] = [];
    if (first === undefined) return taken;
    try {
      for (const c of claims) taken.push(await this.#claim(c, request, first.id));
    } catch (error) {
      await this.#rollback(request.stream, taken);
      throw error;
    }
    return taken;
  }

  /** Writes a claim of `code` for the request's stream naming `eventId` and the revision the record
   * is to land at (also when the stream claimed the code already: two appends never share a claim). */
  async #claim(code: CodeReservation, request: AppendRequest, eventId: string): Promise<TakenClaim> {
    const codeStream = codeStreamName(code);
    const { stream } = request;
    const landsAt = request.expected === 'no_stream' ? 0 : request.expected + 1;
    // The revision the server named when it refused a claim: a truncated reservation stream reads
    // as empty, yet is written at its real revision.
    let refusedAt: bigint | undefined;
    for (let lost = 0; ; lost++) {
      const found = await this.#claimable(code, codeStream, stream);
      // Free at every read, yet every claim lost the race for the revision: a busy reservation
      // stream, not a taken code. A conflict, which the command retries after a while.
      if (lost === CLAIM_ATTEMPTS) throw new WrongExpectedRevisionError(stream, request.expected, request.expected);
      if (found === 'raced') continue;
      const { reservation, givesBack } = found;
      const expected = reservation.revision === NO_STREAM && refusedAt !== undefined ? refusedAt : reservation.revision;
      const claimed = jsonEvent({
        type: CODE_CLAIMED,
        data: { stream, eventId, revision: landsAt, at: new Date(this.#now()).toISOString() },
      });
      try {
        const written = await this.#appendTo(reservation.name, claimed, expected);
        return { codeStream, claimStream: reservation.name, claimRevision: written.nextExpectedRevision, givesBack };
      } catch (error) {
        // Another claimant wrote first, or the generation was deleted meanwhile: read again and decide again.
        if (error instanceof StreamDeletedError) continue;
        const failure = translateError(error, undefined, true);
        if (!(failure instanceof WrongExpectedRevisionError)) throw failure;
        refusedAt = failure.actual === 'no_stream' ? undefined : BigInt(failure.actual);
      }
    }
  }

  /** The reservation stream to claim at; CodeTakenError when another stream holds the code or may;
   * 'raced' when the holder's stream moved on while this claimant fenced it (decide again). */
  async #claimable(
    code: CodeReservation,
    codeStream: string,
    stream: string,
  ): Promise<{ reservation: ReservationStream; givesBack: boolean } | 'raced'> {
    const reservation = await this.#reservation(codeStream);
    const decision = claimDecision(reservation, stream);
    switch (decision.kind) {
      case 'free':
        return { reservation, givesBack: true };
      case 'ours':
        return { reservation, givesBack: false };
      case 'held': {
        const holder = await this.#readMarked(decision.last.stream);
        switch (holdOf(decision.last, codeStream, holder, this.#now(), this.#graceMs)) {
          case 'held':
          case 'pending':
            throw new CodeTakenError(code.scope, code.code);
          case 'fence':
            if (decision.last.kind === 'claimed' && !(await this.#fence(decision.last, holder))) return 'raced';
            return { reservation, givesBack: true };
          case 'free':
            return { reservation, givesBack: true };
        }
      }
    }
  }

  /** Fences an expired claim in its holder's stream, at the revision it was read at: true once no
   * append made under the claim can land any more (the fence is in, or the stream was deleted and
   * takes no append again); false when the stream moved on meanwhile (its record may have landed). */
  async #fence(claim: Claim, holder: readonly MarkedEvent[]): Promise<boolean> {
    const last = holder.at(-1)?.event.revision;
    let at: AppendStreamState = last === undefined ? NO_STREAM : BigInt(last);
    const fence = jsonEvent({
      type: CODE_CLAIM_VOIDED,
      data: fenceData({ codeStream: claim.claimStream, claimRevision: claim.claimRevision }),
    });
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#appendTo(claim.stream, fence, at);
        return true;
      } catch (error) {
        if (error instanceof StreamDeletedError) return true;
        const failure = translateError(error, undefined, true);
        if (!(failure instanceof WrongExpectedRevisionError)) throw failure;
        // A stream truncated whole (a purged record) reads as empty at any revision: fenced at the
        // one the server names while it still reads empty (nothing landed since the truncation).
        const truncated =
          last === undefined && failure.actual !== 'no_stream' && attempt === 0 && (await this.#readMarked(claim.stream)).length === 0;
        if (!truncated) return false;
        at = BigInt(failure.actual);
      }
    }
  }

  /** Best effort: a claim left behind is recognised as stale by the next claimant. Safe whenever
   * the record's events were not written (claims are taken before, and kept after an unsure write),
   * or were written by another request that does not mark the code; a claim again of the stream's
   * own claim stays, as another append of the stream may rely on it. */
  async #rollback(stream: string, taken: readonly TakenClaim[]): Promise<void> {
    for (const t of taken) if (t.givesBack) await this.#writeReleased(t.claimStream, stream, t.claimRevision);
  }

  /** After an append that landed from revision `releasedFrom` and releases codes: CodeReleased where
   * the claim is the stream's own and its claiming event came before (one event of the stream read,
   * at the revision the claim names). Best effort as well: the release is recorded in the stream's
   * own event (CODE_MARKS_KEY), and a claim the stream released there is stale for the next claimant. */
  async #releaseAll(request: AppendRequest, releasedFrom: number): Promise<void> {
    for (const r of releasedCodes(request)) {
      const reservation = await this.#reservation(codeStreamName(r)).catch(() => undefined);
      const last = reservation?.last;
      if (reservation === undefined || last?.kind !== 'claimed' || last.stream !== request.stream || last.landsAt === undefined) continue;
      const [claiming] = await this.#readMarked(request.stream, { from: last.landsAt, limit: 1 }).catch(() => []);
      const at = releaseRevision(reservation, request.stream, claiming?.event, releasedFrom);
      if (at !== undefined) await this.#writeReleased(reservation.name, request.stream, at);
    }
  }

  async #writeReleased(codeStream: string, stream: string, revision: bigint): Promise<void> {
    try {
      await this.#appendTo(codeStream, jsonEvent({ type: CODE_RELEASED, data: { stream } }), revision);
    } catch {
      // See #rollback and #releaseAll.
    }
  }

  /** A code's reservation stream: its first generation that was not deleted. */
  async #reservation(codeStream: string): Promise<ReservationStream> {
    for (let generation = 0; generation < MAX_GENERATIONS; generation++) {
      const found = await this.#readReservation(generationStream(codeStream, generation));
      if (found !== 'deleted') return found;
    }
    throw new Error(`${codeStream}: its first ${String(MAX_GENERATIONS)} reservation streams were deleted`);
  }

  /** A reservation stream's last claim or release and its revision. The last event decides, unless
   * it is of another type (written by another tool): then the events before it are read too. */
  async #readReservation(name: string): Promise<ReservationStream | 'deleted'> {
    const found: ReservationStream = { name, last: undefined, revision: NO_STREAM };
    try {
      const newest = { direction: BACKWARDS, fromRevision: END, maxCount: 1, ...FROM_LEADER } as const;
      await this.#drain(this.#client.readStream(name, newest), (resolved) => {
        if (!resolved.event) return;
        found.revision = resolved.event.revision;
        found.last = reservationOf(resolved.event);
      });
      const { revision } = found;
      if (found.last !== undefined || revision === NO_STREAM) return found;
      await this.#drain(this.#client.readStream(name, { direction: BACKWARDS, fromRevision: revision, ...FROM_LEADER }), (resolved) => {
        found.last = resolved.event === undefined ? undefined : reservationOf(resolved.event);
        return found.last === undefined;
      });
      return found;
    } catch (error) {
      if (error instanceof StreamNotFoundError) return { name, last: undefined, revision: NO_STREAM };
      if (error instanceof StreamDeletedError) return 'deleted';
      throw translateError(error);
    }
  }

  /** A stream's events, forwards from `from` or backwards from its end, at most `limit`; none when
   * the stream does not exist or was deleted (a tombstoned stream never has events again). */
  async #readMarked(stream: string, read: { from?: number; limit?: number; backwards?: boolean } = {}): Promise<MarkedEvent[]> {
    const { from, limit, backwards = false } = read;
    const events: MarkedEvent[] = [];
    const options: ReadStreamOptions = {
      ...FROM_LEADER,
      direction: backwards ? BACKWARDS : FORWARDS,
      fromRevision: from === undefined ? (backwards ? END : START) : BigInt(from),
      ...(limit === undefined ? {} : { maxCount: BigInt(limit) }),
    };
    try {
      await this.#drain(this.#client.readStream(stream, options), (resolved) => {
        if (resolved.event) events.push(toRecordedEvent(resolved.event));
      });
    } catch (error) {
      if (error instanceof StreamNotFoundError || error instanceof StreamDeletedError) return [];
      throw translateError(error);
    }
    return events;
  }

  /** Reads a client's read to its end (or until `each` answers false) within the call deadline:
   * the client gives its Rust reader none, so a server that stops answering would hold the read,
   * and the request, for good. The abandoned read is left to the client. */
  async #drain<T>(read: AsyncIterableIterator<T>, each: (item: T) => unknown): Promise<void> {
    const ends = performance.now() + this.#deadlineMs;
    for (;;) {
      const next = await within(read.next(), ends - performance.now(), () => pastDeadline('read', this.#deadlineMs));
      if (next.done === true) return;
      if (each(next.value) === false) {
        void read.return?.().catch(() => undefined);
        return;
      }
    }
  }

  async readStream(stream: string, options: { from?: number; limit?: number } = {}): Promise<RecordedEvent[]> {
    if (options.limit !== undefined && options.limit <= 0) return [];
    return (await this.#readMarked(stream, options)).filter((m) => m.event.type !== CODE_CLAIM_VOIDED).map((m) => m.event);
  }

  /**
   * Truncates each stream before its next revision (`$tb` in the stream's metadata): reads of it
   * answer nothing from then on, and the server's next scavenge removes the events from disk (their
   * positions in $all are never reused; until the scavenge, $all reads still return them). The
   * stream itself may be appended to again, from the next revision. Answers the events truncated:
   * from its first readable event to its last, each read alone.
   */
  async purge(streams: readonly string[]): Promise<number> {
    let removed = 0;
    for (const stream of streams) {
      const [last] = await this.#readMarked(stream, { backwards: true, limit: 1 });
      const [first] = await this.#readMarked(stream, { limit: 1 });
      if (last === undefined || first === undefined) continue;
      try {
        await this.#bounded('append', this.#client.setStreamMetadata(stream, { truncateBefore: last.event.revision + 1 }));
      } catch (error) {
        throw translateError(error, undefined, true);
      }
      removed += last.event.revision - first.event.revision + 1;
    }
    return removed;
  }

  async readAll(options: ReadAllOptions): Promise<RecordedEvent[]> {
    const { after, limit, categories, types } = options;
    if (limit <= 0 || categories?.length === 0 || types?.length === 0) return [];
    // $all is filtered by stream name on the server; event types are picked here, reading on
    // until `limit` of them or the end of $all, so a short answer means there are no more.
    const wanted = types === undefined ? undefined : new Set(types);
    const events: RecordedEvent[] = [];
    let from = after;
    try {
      const count = limit + 1;
      for (;;) {
        const page = await this.#readAllPage(from, count, categories);
        events.push(...page.filter((event) => !isAdapterEvent(event) && (wanted === undefined || wanted.has(event.type))));
        if (events.length >= limit) return events.slice(0, limit);
        const last = page.at(-1);
        if (last === undefined || page.length < count) return events;
        from = last.position;
      }
    } catch (error) {
      throw translateError(error);
    }
  }

  /** Events of $all after a position (exclusive), at most `count`. */
  async #readAllPage(after: Position, count: number, categories: readonly string[] | undefined): Promise<RecordedEvent[]> {
    const page: RecordedEvent[] = [];
    const read = this.#client.readAll({
      direction: FORWARDS,
      fromPosition: readStartAfter(after),
      maxCount: count + 1,
      filter: readAllFilter(categories),
      ...FROM_LEADER,
    });
    await this.#drain(read, (resolved) => {
      if (resolved.event === undefined) return;
      const { event } = toRecordedEvent(resolved.event);
      if (event.position > after) page.push(event);
      return page.length < count;
    });
    return page;
  }

  /** The newest event of $all, of any stream: a scavenge removes truncated events from $all, so the
   * newest record event can go back after a purge, but never the newest event of the log (the
   * purge's own `$metadata` event is newer than what it truncates, and a scavenge never touches the
   * chunk being written). And never below what this instance answered before. */
  async headPosition(): Promise<Position> {
    try {
      const read = this.#client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, ...FROM_LEADER });
      await this.#drain(read, (resolved) => {
        const position = resolved.event === undefined ? undefined : packPosition(resolved.event.position);
        if (position !== undefined && position > this.#head) this.#head = position;
        return false;
      });
      return this.#head;
    } catch (error) {
      throw translateError(error);
    }
  }

  async findCode(reservation: CodeReservation): Promise<string | undefined> {
    const codeStream = codeStreamName(reservation);
    const { last } = await this.#reservation(codeStream);
    if (last === undefined) return undefined;
    const holder = await this.#readMarked(last.stream);
    return holdOf(last, codeStream, holder, this.#now(), this.#graceMs) === 'held' ? last.stream : undefined;
  }

  /** Waits for what is under way, within the deadline, and lets the client go (its dispose waits
   * for its open streams, so it gets the deadline too). */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await within(Promise.allSettled([...this.#inflight]), this.#deadlineMs).catch(() => undefined);
    this.#listeners.clear();
    await within(this.#unsubscribe(), this.#deadlineMs).catch(() => undefined);
    await within(this.#client.dispose(), this.#deadlineMs).catch(() => undefined);
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
}

// ---------------------------------------------------------------------------------------------
// Opening

/** A connection-string setting, read as the client reads its keys (case and `_` or `-` ignored). */
function settingOf(connectionString: string, name: string): string | undefined {
  const query = connectionString.split('?')[1] ?? '';
  for (const pair of query.split('&')) {
    const [key = '', value = ''] = pair.split('=');
    if (key.trim().toLowerCase().replace(/[_-]/g, '') === name.toLowerCase()) return value.trim();
  }
  return undefined;
}

/** The connection string's defaultDeadline (ms); the client's default without one. */
export function defaultDeadlineOf(connectionString: string): number {
  const ms = Number.parseInt(settingOf(connectionString, 'defaultDeadline') ?? '', 10);
  return ms > 0 ? ms : CLIENT_DEFAULT_DEADLINE_MS;
}

async function probe(client: KurrentDBClient): Promise<void> {
  for await (const _ of client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1 })) break;
}

/** `work`'s outcome, or after `ms` the error `late` makes: the work goes on, unobserved. */
function within<T>(
  work: Promise<T>,
  ms: number,
  late: () => Error = () => new Error(`no answer within ${String(ms / 1000)} s`),
): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => {
        reject(late());
      },
      Math.max(0, ms),
    );
  });
  work.catch(() => undefined);
  return Promise.race([work, timeout]).finally(() => {
    clearTimeout(timer);
  });
}

/** Connects and reads one event of $all, so a server that does not answer, or a user who may not
 * read $all, fails the start-up with a clear message instead of the first request. */
export async function openKurrentEventStore(
  connectionString: string,
  options: KurrentEventStoreOptions & { connectTimeoutMs?: number } = {},
): Promise<KurrentEventStore> {
  const where = redactCredentials(connectionString);
  // The client's batch-append path then answers every conflict with a wrong revision (1 for any
  // stream), which the commands choose between retrying and 412 on.
  if (settingOf(connectionString, 'throwOnAppendFailure')?.toLowerCase() === 'false') {
    throw new Error(
      `EVENTSTORE_URL sets throwOnAppendFailure=false (${where}): the client then reports conflicts with a wrong revision; remove the setting`,
    );
  }
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
    if (error instanceof AccessDeniedError) {
      throw new Error(
        `KurrentDB at ${where} refuses its user a read of $all, which the event log needs: give EVENTSTORE_URL a user in $admins or $ops`,
        { cause: error },
      );
    }
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(
      `KurrentDB at ${where} does not answer (${reason}); start it (docker compose up -d kurrentdb) or unset EVENTSTORE_URL to use the embedded log`,
      { cause: error },
    );
  }
  return new KurrentEventStore(client, { deadlineMs: defaultDeadlineOf(connectionString), ...options });
}
