// A STAND-IN FOR THE KURRENTDB SERVER's storage, not a KurrentDB: streams in memory with the
// server's expected-revision rules, answering through the client's own error classes. It is the
// model behind grpcStandIn.ts, which serves it over gRPC to the REAL @kurrent/kurrentdb-client (its
// batch-append path and its Rust reader), so that the real KurrentEventStore can be driven through
// interleavings of concurrent appends that a real server cannot be made to produce on demand (an
// append held between its claim and its record, an answer lost after the write, a release that
// never reaches the reservation stream, a read that fails after a write, a commit that lands long
// after its deadline). Only what the adapter relies on is modelled: appends at an exact expected
// revision, optionally the server's idempotency (the same event ids at the same expected revision
// acknowledged without being written again, whatever the events say), commits that land whenever
// the server gets to them (as KurrentDB's batch append: the call's deadline does not stop a
// complete request), answers with or without the position, stream reads in both directions, $all
// reads with stream-name filters, the server's creation time of each event, stream metadata
// (`$tb`, `$maxCount`: truncation, which reads skip, and a scavenge that removes what it covers
// from $all too), tombstones (reads and appends answer StreamDeleted). The server's own behaviour
// is covered by eventStore.containers.spec.ts, against a real server.

import { randomUUID } from 'node:crypto';
import {
  ANY,
  BACKWARDS,
  END,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  StreamDeletedError,
  StreamNotFoundError,
  WrongExpectedVersionError,
  type AllStreamRecordedEvent,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type AppendResult,
  type StreamMetadata,
  type AppendStreamState,
  type AppendToStreamOptions,
  type CurrentStreamState,
  type EventData,
  type ReadAllOptions,
  type ReadStreamOptions,
  type ResolvedEvent,
} from '@kurrent/kurrentdb-client';
import type { KurrentClient } from '../../../infra/kurrentdb/eventStore.ts';

/** One append as the stand-in received it; `deadline` as the call gave it (ms from when it was
 * received; the client's default when undefined). */
export type AppendCall = { stream: string; events: readonly EventData[]; streamState: AppendStreamState; deadline: number | undefined };

/** An append held by the test: `reached` once the stand-in has it; `open()` lets it go on, `fail()`
 * makes it throw. Held 'before' it is applied, nothing is written until it is let go (or ever, when
 * it fails); held 'after', it is written and only its answer waits (a lost answer when it fails). */
export type Gate = { reached: Promise<undefined>; open(): void; fail(error: Error): void };

type Hold = { match: (call: AppendCall) => boolean; when: 'before' | 'after'; reach: () => void; wait: Promise<Error | undefined> };
type ReadHold = { match: (stream: string) => boolean; reach: () => void; wait: Promise<Error | undefined> };

/** A gate for a held call: the holder's side (`reach`, then `wait`) and the test's side. */
function newGate(): { gate: Gate; reach: () => void; wait: Promise<Error | undefined> } {
  const reached = Promise.withResolvers<undefined>();
  const settled = Promise.withResolvers<Error | undefined>();
  return {
    gate: {
      reached: reached.promise,
      open: () => {
        settled.resolve(undefined);
      },
      fail: (error) => {
        settled.resolve(error);
      },
    },
    reach: () => {
      reached.resolve(undefined);
    },
    wait: settled.promise,
  };
}

export type InMemoryClientOptions = {
  /** The server's clock, stamped on every event as `created`. */
  clock?: () => number;
  /** KurrentDB's idempotency: an append whose event ids are already in the stream right after its
   * expected revision is acknowledged with the first append's result and writes nothing. */
  idempotent?: boolean;
  /** False answers appends without the position, as some servers do. */
  answersPosition?: boolean;
};

export class InMemoryKurrentClient implements KurrentClient {
  readonly #streams = new Map<string, AllStreamRecordedEvent[]>();
  readonly #all: AllStreamRecordedEvent[] = [];
  /** Streams' truncation as their metadata says: `$tb` (truncate before) and `$maxCount`. */
  readonly #metadata = new Map<string, { truncateBefore?: bigint; maxCount?: bigint }>();
  readonly #tombstoned = new Set<string>();
  readonly #holds: Hold[] = [];
  readonly #readHolds: ReadHold[] = [];
  readonly #clock: () => number;
  readonly #idempotent: boolean;
  readonly #answersPosition: boolean;
  #position = 0n;
  /** Every read (of a stream, or of '$all') with its options, for tests that check how the adapter reads. */
  readonly reads: { stream: string; options: ReadStreamOptions | ReadAllOptions }[] = [];
  /** Every stream metadata written (setStreamMetadata), in order. */
  readonly metadataWrites: { stream: string; metadata: StreamMetadata }[] = [];
  /** Every append as received, written or not. */
  readonly appends: AppendCall[] = [];

  constructor(options: InMemoryClientOptions = {}) {
    this.#clock = options.clock ?? Date.now;
    this.#idempotent = options.idempotent ?? false;
    this.#answersPosition = options.answersPosition ?? true;
  }

  /** Holds the next append that `match` accepts (once). */
  hold(match: (call: AppendCall) => boolean, when: 'before' | 'after' = 'before'): Gate {
    const { gate, reach, wait } = newGate();
    this.#holds.push({ match, when, reach, wait });
    return gate;
  }

  /** Holds the next read of a stream `match` accepts ('$all' for a read of $all) once, before it
   * reads: `open()` lets it read, `fail()` makes it throw. */
  holdRead(match: (stream: string) => boolean): Gate {
    const { gate, reach, wait } = newGate();
    this.#readHolds.push({ match, reach, wait });
    return gate;
  }

  /** The names of the streams written so far. */
  streamNames(): string[] {
    return [...this.#streams.keys()];
  }

  /** The events of a stream as stored (type, data, created). */
  events(stream: string): readonly AllStreamRecordedEvent[] {
    return this.#streams.get(stream) ?? [];
  }

  async appendToStream(stream: string, events: EventData | EventData[], options: AppendToStreamOptions = {}): Promise<AppendResult> {
    const call: AppendCall = {
      stream,
      events: Array.isArray(events) ? events : [events],
      streamState: options.streamState ?? ANY,
      deadline: options.deadline,
    };
    this.appends.push(call);
    await turn();
    const index = this.#holds.findIndex((h) => h.match(call));
    const hold = index < 0 ? undefined : this.#holds.splice(index, 1)[0];
    if (hold?.when === 'before') {
      hold.reach();
      const failure = await hold.wait;
      if (failure !== undefined) throw failure;
    }
    // KurrentDB commits a complete request whenever it gets to it, past the call's deadline too.
    if (this.#tombstoned.has(stream)) throw StreamDeletedError.fromStreamName(stream);
    const result = this.#alreadyWritten(call) ?? this.#apply(call);
    if (hold?.when === 'after') {
      hold.reach();
      const failure = await hold.wait;
      if (failure !== undefined) throw failure;
    }
    // The client's throwOnAppendFailure=false is the client's: the server always refuses.
    if (result instanceof WrongExpectedVersionError) throw result;
    return this.#answersPosition || !result.success ? result : { success: true, nextExpectedRevision: result.nextExpectedRevision };
  }

  /** With `idempotent`, the first append's result when the call's ids follow its expected revision. */
  #alreadyWritten({ stream, events, streamState }: AppendCall): AppendResult | undefined {
    const existing = this.#streams.get(stream);
    if (!this.#idempotent || existing === undefined || (typeof streamState !== 'bigint' && streamState !== NO_STREAM)) return undefined;
    const from = streamState === NO_STREAM ? 0 : Number(streamState) + 1;
    const run = existing.slice(from, from + events.length);
    const last = run.at(-1);
    if (last === undefined || run.length !== events.length || run.some((e, i) => e.id !== events[i]?.id)) return undefined;
    return { success: true, nextExpectedRevision: last.revision, position: last.position };
  }

  #apply({ stream, events, streamState }: AppendCall): AppendResult | WrongExpectedVersionError {
    const existing = this.#streams.get(stream);
    const current: CurrentStreamState = existing === undefined ? NO_STREAM : BigInt(existing.length - 1);
    if (!accepts(streamState, current))
      return new WrongExpectedVersionError(undefined, { streamName: stream, expected: streamState, current });
    const written = existing ?? [];
    if (stream.startsWith('$$')) this.#setMetadata(stream.slice(2), events);
    for (const e of events) {
      this.#position += 100n;
      const recorded = {
        streamId: stream,
        id: e.id,
        revision: BigInt(written.length),
        type: e.type,
        created: new Date(this.#clock()),
        position: { commit: this.#position, prepare: this.#position },
        ...(e.contentType === 'application/json'
          ? { isJson: true as const, data: structuredClone(e.data), metadata: structuredClone(e.metadata) }
          : { isJson: false as const, data: e.data, metadata: e.metadata }),
      };
      written.push(recorded);
      this.#all.push(recorded);
    }
    this.#streams.set(stream, written);
    return {
      success: true,
      nextExpectedRevision: BigInt(written.length - 1),
      position: { commit: this.#position, prepare: this.#position },
    };
  }

  readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterableIterator<ResolvedEvent> {
    this.reads.push({ stream, options });
    const streams = this.#streams;
    const tombstoned = this.#tombstoned.has(stream);
    const first = this.#firstReadable(stream);
    const index = this.#readHolds.findIndex((h) => h.match(stream));
    const hold = index < 0 ? undefined : this.#readHolds.splice(index, 1)[0];
    return (async function* () {
      await turn();
      if (hold !== undefined) {
        hold.reach();
        const failure = await hold.wait;
        if (failure !== undefined) throw failure;
      }
      if (tombstoned) throw StreamDeletedError.fromStreamName(stream);
      const stored = streams.get(stream);
      if (stored === undefined) throw new StreamNotFoundError(undefined, stream);
      const events = stored.filter((e) => e.revision >= first);
      const backwards = options.direction === BACKWARDS;
      const from = options.fromRevision ?? (backwards ? END : START);
      const ordered = backwards ? [...events].reverse() : [...events];
      const started = ordered.filter((e) => from === START || from === END || (backwards ? e.revision <= from : e.revision >= from));
      yield* started.slice(0, Number(options.maxCount ?? started.length)).map((event) => ({ event }));
    })();
  }

  readAll(options: ReadAllOptions = {}): AsyncIterableIterator<AllStreamResolvedEvent> {
    this.reads.push({ stream: '$all', options });
    const all = this.#all;
    const index = this.#readHolds.findIndex((h) => h.match('$all'));
    const hold = index < 0 ? undefined : this.#readHolds.splice(index, 1)[0];
    return (async function* () {
      await turn();
      if (hold !== undefined) {
        hold.reach();
        const failure = await hold.wait;
        if (failure !== undefined) throw failure;
      }
      const backwards = options.direction === BACKWARDS;
      const from = options.fromPosition ?? (backwards ? END : START);
      const filter = options.filter;
      const selected = (backwards ? [...all].reverse() : [...all]).filter((e) => {
        const inRange = from === START || from === END || (backwards ? e.position.commit <= from.commit : e.position.commit >= from.commit);
        const kept =
          filter === undefined ||
          ('prefixes' in filter ? filter.prefixes.some((p) => e.streamId.startsWith(p)) : new RegExp(filter.regex).test(e.streamId));
        return inRange && kept;
      });
      yield* selected.slice(0, Number(options.maxCount ?? selected.length)).map((event) => ({ event }));
    })();
  }

  /** Stream metadata, written as the client writes it (a `$metadata` event in `$$<stream>`). */
  setStreamMetadata(stream: string, metadata: StreamMetadata): Promise<AppendResult> {
    const data = {
      ...(metadata.truncateBefore === undefined ? {} : { $tb: metadata.truncateBefore }),
      ...(metadata.maxCount === undefined ? {} : { $maxCount: metadata.maxCount }),
    };
    return this.appendToStream(`$$${stream}`, {
      id: randomUUID(),
      type: '$metadata',
      contentType: 'application/json',
      data,
      metadata: undefined,
    });
  }

  /** A `$metadata` event's truncation, as the server reads it. */
  #setMetadata(stream: string, events: readonly EventData[]): void {
    const data = events.at(-1)?.data as { $tb?: unknown; $maxCount?: unknown } | undefined;
    const big = (v: unknown) => (typeof v === 'number' || typeof v === 'bigint' ? BigInt(v) : undefined);
    const truncateBefore = big(data?.$tb);
    const maxCount = big(data?.$maxCount);
    this.metadataWrites.push({
      stream,
      metadata: {
        ...(truncateBefore === undefined ? {} : { truncateBefore: Number(truncateBefore) }),
        ...(maxCount === undefined ? {} : { maxCount: Number(maxCount) }),
      },
    });
    this.#metadata.set(stream, {
      ...(truncateBefore === undefined ? {} : { truncateBefore }),
      ...(maxCount === undefined ? {} : { maxCount }),
    });
  }

  /** The first revision reads of a stream return: after `$tb`, and within the last `$maxCount`. */
  #firstReadable(stream: string): bigint {
    const { truncateBefore = 0n, maxCount } = this.#metadata.get(stream) ?? {};
    const count = BigInt(this.#streams.get(stream)?.length ?? 0);
    const kept = maxCount === undefined ? 0n : count - maxCount;
    return truncateBefore > kept ? truncateBefore : kept;
  }

  /** Hard-deletes a stream, as `tombstoneStream` does: reads and appends answer StreamDeleted for good. */
  tombstone(stream: string): void {
    this.#tombstoned.add(stream);
  }

  /** What a scavenge does: the truncated events leave $all as well. */
  scavenge(): void {
    const kept = this.#all.filter((e) => e.revision >= this.#firstReadable(e.streamId));
    this.#all.splice(0, this.#all.length, ...kept);
  }

  subscribeToAll(): AllStreamSubscription {
    throw new Error('subscriptions are not part of the in-memory stand-in');
  }

  dispose(): Promise<void> {
    return Promise.resolve();
  }
}

function accepts(expected: AppendStreamState, current: CurrentStreamState): boolean {
  if (expected === ANY) return true;
  if (expected === STREAM_EXISTS) return current !== NO_STREAM;
  return expected === current;
}

/** Every call answers in a later turn of the event loop, as a server would, so concurrent calls interleave. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
