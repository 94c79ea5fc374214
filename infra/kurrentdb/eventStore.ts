// The production event log: the EventStore port over KurrentDB (or EventStoreDB) through
// @kurrent/kurrentdb-client. Appends go with the exact expected revision (never ANY); unique codes
// are reservation streams taken by the claim protocol of codeClaims.ts, since servers before 25.1
// have no multi-stream transaction. The parts:
// - positions.ts  the port's one-bigint positions, distances and $all read starts;
// - streams.ts    the readAll filter and expected/actual revisions in the client's terms;
// - metadata.ts   what is stored with each event (code marks included) and read back;
// - codeClaims.ts the claim protocol's decisions (reservation streams, claim status, releases,
//                 the claimant's time budget) and what it assumes of the clocks;
// - errors.ts     the client's failures as the port's errors, transient ones as 503;
// - this file     the adapter (the I/O around those decisions) and how it is opened.
// Tests: eventStore.unit.spec.ts (the pure parts, and the real client without a server),
// claimProtocol.unit.spec.ts (the adapter over an in-memory stand-in of the client, under chosen
// interleavings), eventStore.containers.spec.ts (the contract on a real server).

import {
  BACKWARDS,
  END,
  FORWARDS,
  KurrentDBClient,
  NO_STREAM,
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
  type AppendRequest,
  type AppendResult,
  type CodeReservation,
  type EventStore,
  type Position,
  type ReadAllOptions,
  type RecordedEvent,
} from '../../domain/ports.ts';
import { StoreUnavailableError } from '../../domain/shared/errors.ts';
import { redactCredentials } from '../redact.ts';
import {
  CLAIM_GRACE_MS,
  CODE_CLAIMED,
  CODE_RELEASED,
  claimDecision,
  codeMarksOf,
  codeStreamName,
  holdOf,
  recordDeadline,
  releaseRevision,
  releasedCodes,
  reservationOf,
  type ReservationStream,
} from './codeClaims.ts';
import { refusedAppend, refusedForSure, translateError } from './errors.ts';
import { duplicateOf, sameId, toRecordedEvent, toStoredMetadata, type CodeMarks, type MarkedEvent } from './metadata.ts';
import { commitDistance, packPosition, positionOf, readStartAfter } from './positions.ts';
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
  /** This instance's clock, compared with the server's time of a claim to see whether it is stale
   * (it must be within CLOCK_MARGIN_MS of the server's: see codeClaims.ts). */
  now?: () => number;
  /** A monotonic clock (ms) timing a claimant's claims against its record append; performance.now. */
  monotonicNow?: () => number;
  /** The client's deadline for a call (its connection string's defaultDeadline, 10 s unless set):
   * a record append after claims gets the smaller of it and what is left of the claims' budget. */
  appendDeadlineMs?: number;
};

/** The client's own default deadline for a call. */
export const CLIENT_DEFAULT_DEADLINE_MS = 10_000;

/** A claim written by an append; `givesBack` when the append may give it back if refused (the code
 * was free: not a claim again of a code the stream had claimed already). */
type TakenClaim = { codeStream: string; revision: bigint; givesBack: boolean };

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
  readonly #monotonicNow: () => number;
  readonly #appendDeadlineMs: number;
  #subscription: AllStreamSubscription | undefined;
  #resubscribeTimer: NodeJS.Timeout | undefined;
  #closed = false;

  constructor(client: KurrentClient, options: KurrentEventStoreOptions = {}) {
    this.#client = client;
    this.#graceMs = options.claimGraceMs ?? CLAIM_GRACE_MS;
    this.#resubscribeMs = options.resubscribeMs ?? 1_000;
    this.#now = options.now ?? Date.now;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
    this.#appendDeadlineMs = options.appendDeadlineMs ?? CLIENT_DEFAULT_DEADLINE_MS;
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
      if (retried !== undefined) return retried.result;
    }
    const events = recordEvents(request);
    const claimsSent = this.#monotonicNow();
    const taken = await this.#claimAll(request);
    const deadline = await this.#deadline(request, taken, claimsSent);
    let written: ClientAppendResult;
    try {
      written = await this.#appendTo(request.stream, events, expectedState(request.expected), deadline);
    } catch (error) {
      return this.#failed(request, taken, keyed, error);
    }
    // The record landed: whatever fails from here on gives back no claim.
    const position = await this.#positionOf(request.stream, written).catch((error: unknown) => new StoreUnavailableError('EVENT_STORE', error));
    await this.#releaseAll(request);
    if (position instanceof StoreUnavailableError) throw position;
    const result = { revision: Number(written.nextExpectedRevision), position };
    this.#notify(result.position);
    return result;
  }

  /** The record append's deadline when it claimed codes (none otherwise: the client's own). Past
   * half the grace period since the first claim was sent, the record is not sent at all: a checker
   * may take the claims over from then on (see codeClaims.ts), so they are given back instead. */
  async #deadline(request: AppendRequest, taken: readonly TakenClaim[], claimsSent: number): Promise<number | undefined> {
    if (taken.length === 0) return undefined;
    const elapsed = this.#monotonicNow() - claimsSent;
    const deadline = recordDeadline(elapsed, this.#graceMs, this.#appendDeadlineMs);
    if (deadline !== undefined) return deadline;
    await this.#rollback(request.stream, taken);
    const late = new Error(`claims of ${request.stream} took ${String(Math.round(elapsed))} ms, more than half the claim grace period: its record was not sent`);
    throw new StoreUnavailableError('EVENT_STORE', late);
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
   * as `success: false` (throwOnAppendFailure=false in the connection string). */
  async #appendTo(stream: string, events: EventData | EventData[], streamState: AppendStreamState, deadline?: number): Promise<ClientAppendResult> {
    const written = await this.#client.appendToStream(stream, events, deadline === undefined ? { streamState } : { streamState, deadline });
    if (!written.success) throw refusedAppend(stream, streamState, written);
    return written;
  }

  /** The position of an append's last event: the server's answer has it, servers that leave it
   * out are asked for it. */
  async #positionOf(stream: string, written: ClientAppendResult): Promise<Position> {
    if (written.position !== undefined) return packPosition(written.position);
    const at = { direction: BACKWARDS, fromRevision: written.nextExpectedRevision, maxCount: 1, ...FROM_LEADER } as const;
    for await (const resolved of this.#client.readStream(stream, at)) {
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
      for (const c of claims) taken.push(await this.#claim(c, request, first.id));
    } catch (error) {
      await this.#rollback(request.stream, taken);
      throw error;
    }
    return taken;
  }

  /** Writes a claim of `code` for the request's stream naming `eventId` (also when the stream
   * claimed the code already: two appends never share a claim). */
  async #claim(code: CodeReservation, request: AppendRequest, eventId: string): Promise<TakenClaim> {
    const codeStream = codeStreamName(code);
    const { stream } = request;
    for (let lost = 0; ; lost++) {
      const { expected, givesBack } = await this.#claimable(code, codeStream, stream);
      // Free at every read, yet every claim lost the race for the revision: a busy reservation
      // stream, not a taken code. A conflict, which the command retries after a while.
      if (lost === CLAIM_ATTEMPTS) throw new WrongExpectedRevisionError(stream, request.expected, request.expected);
      const claimed = jsonEvent({ type: CODE_CLAIMED, data: { stream, eventId, at: new Date(this.#now()).toISOString() } });
      try {
        const written = await this.#appendTo(codeStream, claimed, expected);
        return { codeStream, revision: written.nextExpectedRevision, givesBack };
      } catch (error) {
        const failure = translateError(error);
        // Another claimant wrote first: read again and decide again.
        if (!(failure instanceof WrongExpectedRevisionError)) throw failure;
      }
    }
  }

  /** The expected revision to claim at; CodeTakenError when another stream holds the code or may. */
  async #claimable(code: CodeReservation, codeStream: string, stream: string): Promise<{ expected: AppendStreamState; givesBack: boolean }> {
    const decision = claimDecision(await this.#reservation(codeStream), stream);
    switch (decision.kind) {
      case 'free':
        return { expected: decision.expected, givesBack: true };
      case 'ours':
        return { expected: decision.expected, givesBack: false };
      case 'held': {
        const holder = await this.#readMarked(decision.last.stream);
        if (holdOf(decision.last, codeStream, holder, this.#now(), this.#graceMs) !== 'free') throw new CodeTakenError(code.scope, code.code);
        return { expected: decision.expected, givesBack: true };
      }
    }
  }

  /** Best effort: a claim left behind is recognised as stale by the next claimant. Safe whenever
   * the record's events were not written (claims are taken before, and kept after an unsure write),
   * or were written by another request that does not mark the code; a claim again of the stream's
   * own claim stays, as another append of the stream may rely on it. */
  async #rollback(stream: string, taken: readonly TakenClaim[]): Promise<void> {
    for (const t of taken) if (t.givesBack) await this.#writeReleased(t.codeStream, stream, t.revision);
  }

  async #releaseAll(request: AppendRequest): Promise<void> {
    const released = releasedCodes(request);
    const releasing = request.events[0];
    if (released.length === 0 || releasing === undefined) return;
    // Best effort as well: the release is recorded in the stream's own event (CODE_MARKS_KEY), and a
    // claim the stream released there is stale for the next claimant.
    const holder = await this.#readMarked(request.stream).catch(() => undefined);
    if (holder === undefined) return;
    for (const r of released) {
      const codeStream = codeStreamName(r);
      const reservation = await this.#reservation(codeStream).catch(() => undefined);
      const at = reservation === undefined ? undefined : releaseRevision(reservation, request.stream, holder, releasing.id);
      if (at !== undefined) await this.#writeReleased(codeStream, request.stream, at);
    }
  }

  async #writeReleased(codeStream: string, stream: string, revision: bigint): Promise<void> {
    try {
      await this.#appendTo(codeStream, jsonEvent({ type: CODE_RELEASED, data: { stream } }), revision);
    } catch {
      // See #rollback and #releaseAll.
    }
  }

  /** A reservation stream's last claim or release and its revision. The last event decides, unless
   * it is of another type (written by another tool): then the events before it are read too. */
  async #reservation(codeStream: string): Promise<ReservationStream> {
    let revision: ReservationStream['revision'] = NO_STREAM;
    try {
      const newest = { direction: BACKWARDS, fromRevision: END, maxCount: 1, ...FROM_LEADER } as const;
      for await (const resolved of this.#client.readStream(codeStream, newest)) {
        if (!resolved.event) continue;
        revision = resolved.event.revision;
        const last = reservationOf(resolved.event);
        if (last !== undefined) return { last, revision };
      }
      if (revision === NO_STREAM) return { last: undefined, revision };
      for await (const resolved of this.#client.readStream(codeStream, { direction: BACKWARDS, fromRevision: revision, ...FROM_LEADER })) {
        const last = resolved.event === undefined ? undefined : reservationOf(resolved.event);
        if (last !== undefined) return { last, revision };
      }
      return { last: undefined, revision };
    } catch (error) {
      if (error instanceof StreamNotFoundError) return { last: undefined, revision: NO_STREAM };
      throw translateError(error);
    }
  }

  async #readMarked(stream: string, from = 0, limit?: number): Promise<MarkedEvent[]> {
    const events: MarkedEvent[] = [];
    const options: ReadStreamOptions = {
      ...FROM_LEADER,
      ...(from > 0 ? { direction: FORWARDS, fromRevision: BigInt(from) } : {}),
      ...(limit === undefined ? {} : { maxCount: BigInt(limit) }),
    };
    try {
      for await (const resolved of this.#client.readStream(stream, options)) {
        if (resolved.event) events.push(toRecordedEvent(resolved.event));
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw translateError(error);
    }
    return events;
  }

  async readStream(stream: string, options: { from?: number; limit?: number } = {}): Promise<RecordedEvent[]> {
    if (options.limit !== undefined && options.limit <= 0) return [];
    return (await this.#readMarked(stream, options.from ?? 0, options.limit)).map((m) => m.event);
  }

  /**
   * Truncates each stream before its next revision (`$tb` in the stream's metadata): reads of it
   * answer nothing from then on, and the server's next scavenge removes the events from disk (their
   * positions in $all are never reused; until the scavenge, $all reads still return them). The
   * stream itself may be appended to again, from the next revision. Answers the events truncated.
   */
  async purge(streams: readonly string[]): Promise<number> {
    let removed = 0;
    for (const stream of streams) {
      const events = await this.#readMarked(stream);
      const last = events.at(-1)?.event.revision;
      if (last === undefined) continue;
      try {
        await this.#client.setStreamMetadata(stream, { truncateBefore: last + 1 });
      } catch (error) {
        throw translateError(error);
      }
      removed += events.length;
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
        for (const event of page) if (wanted === undefined || wanted.has(event.type)) events.push(event);
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
    const read = this.#client.readAll({ direction: FORWARDS, fromPosition: readStartAfter(after), maxCount: count + 1, filter: readAllFilter(categories), ...FROM_LEADER });
    for await (const resolved of read) {
      if (resolved.event === undefined) continue;
      const { event } = toRecordedEvent(resolved.event);
      if (event.position > after) page.push(event);
      if (page.length >= count) break;
    }
    return page;
  }

  async headPosition(): Promise<Position> {
    try {
      const read = this.#client.readAll({ direction: BACKWARDS, fromPosition: END, maxCount: 1, filter: readAllFilter(undefined), ...FROM_LEADER });
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
    const { last } = await this.#reservation(codeStream);
    if (last === undefined) return undefined;
    const holder = await this.#readMarked(last.stream);
    return holdOf(last, codeStream, holder, this.#now(), this.#graceMs) === 'held' ? last.stream : undefined;
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

/** A connection string fit for a message: the password replaced. */

/** The connection string's defaultDeadline (ms), read as the client reads its keys (case and `_`
 * or `-` ignored); the client's default without one. */
export function defaultDeadlineOf(connectionString: string): number {
  const query = connectionString.split('?')[1] ?? '';
  for (const pair of query.split('&')) {
    const [key = '', value = ''] = pair.split('=');
    if (key.trim().toLowerCase().replace(/[_-]/g, '') !== 'defaultdeadline') continue;
    const ms = Number.parseInt(value.trim(), 10);
    if (ms > 0) return ms;
  }
  return CLIENT_DEFAULT_DEADLINE_MS;
}

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
 * message instead of the first request. The clocks of the instances must be within
 * CLOCK_MARGIN_MS of the server's (codeClaims.ts): that is not checked here, as it would take a
 * write on every start. */
export async function openKurrentEventStore(
  connectionString: string,
  options: KurrentEventStoreOptions & { connectTimeoutMs?: number } = {},
): Promise<KurrentEventStore> {
  const where = redactCredentials(connectionString);
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
  return new KurrentEventStore(client, { appendDeadlineMs: defaultDeadlineOf(connectionString), ...options });
}
