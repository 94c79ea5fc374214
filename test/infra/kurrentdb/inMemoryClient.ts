// A STAND-IN FOR THE KURRENTDB SERVER (and the client's transport), not a KurrentDB: streams in
// memory with the server's expected-revision rules, answering through the client's own error
// classes, so that the REAL KurrentEventStore can be driven through interleavings of concurrent
// appends that a real server cannot be made to produce on demand (an append held between its claim
// and its record, an answer lost after the write, a release that never reaches the reservation
// stream, a read that fails after a write). Only what the adapter's claim protocol relies on is
// modelled: appends at an exact expected revision, optionally the server's idempotency (the same
// event ids at the same expected revision acknowledged without being written again, whatever the
// events say), the call's deadline (an append still held when it has passed, by the server's
// clock, fails as DeadlineExceeded and is not written), answers with or without the position,
// stream reads in both directions, $all reads with stream-name filters, the server's creation time
// of each event. The server's own behaviour (and the client's real wire format) is covered by
// eventStore.containers.spec.ts, against a real server.

import {
  ANY,
  BACKWARDS,
  DeadlineExceededError,
  END,
  NO_STREAM,
  START,
  STREAM_EXISTS,
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

/** One append as the stand-in received it; `deadline` as the call gave it (the client's default
 * when undefined). */
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
  /** As the client's connection-string setting: false answers a conflict with `success: false`. */
  throwOnAppendFailure?: boolean;
  /** KurrentDB's idempotency: an append whose event ids are already in the stream right after its
   * expected revision is acknowledged with the first append's result and writes nothing. */
  idempotent?: boolean;
  /** False answers appends without the position, as some servers do. */
  answersPosition?: boolean;
};

export class InMemoryKurrentClient implements KurrentClient {
  readonly #streams = new Map<string, AllStreamRecordedEvent[]>();
  readonly #all: AllStreamRecordedEvent[] = [];
  readonly #truncated = new Map<string, bigint>();
  readonly #holds: Hold[] = [];
  readonly #readHolds: ReadHold[] = [];
  readonly #clock: () => number;
  readonly #throwOnAppendFailure: boolean;
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
    this.#throwOnAppendFailure = options.throwOnAppendFailure ?? true;
    this.#idempotent = options.idempotent ?? false;
    this.#answersPosition = options.answersPosition ?? true;
  }

  /** Holds the next append that `match` accepts (once). */
  hold(match: (call: AppendCall) => boolean, when: 'before' | 'after' = 'before'): Gate {
    const { gate, reach, wait } = newGate();
    this.#holds.push({ match, when, reach, wait });
    return gate;
  }

  /** Holds the next readStream of a stream `match` accepts (once), before it reads: `open()` lets
   * it read, `fail()` makes it throw. */
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
    const call: AppendCall = { stream, events: Array.isArray(events) ? events : [events], streamState: options.streamState ?? ANY, deadline: options.deadline };
    this.appends.push(call);
    const received = this.#clock();
    await turn();
    const index = this.#holds.findIndex((h) => h.match(call));
    const hold = index < 0 ? undefined : this.#holds.splice(index, 1)[0];
    if (hold?.when === 'before') {
      hold.reach();
      const failure = await hold.wait;
      if (failure !== undefined) throw failure;
      // Held past its deadline: the client gave up and the server never committed it.
      if (call.deadline !== undefined && this.#clock() - received > call.deadline) throw new DeadlineExceededError();
    }
    const result = this.#alreadyWritten(call) ?? this.#apply(call);
    if (hold?.when === 'after') {
      hold.reach();
      const failure = await hold.wait;
      if (failure !== undefined) throw failure;
    }
    if (result instanceof WrongExpectedVersionError) {
      if (this.#throwOnAppendFailure) throw result;
      const current = result.actualState;
      return { success: false, nextExpectedRevision: current === NO_STREAM ? -1n : current };
    }
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
    if (!accepts(streamState, current)) return new WrongExpectedVersionError(undefined, { streamName: stream, expected: streamState, current });
    const written = existing ?? [];
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
    return { success: true, nextExpectedRevision: BigInt(written.length - 1), position: { commit: this.#position, prepare: this.#position } };
  }

  readStream(stream: string, options: ReadStreamOptions = {}): AsyncIterableIterator<ResolvedEvent> {
    this.reads.push({ stream, options });
    const streams = this.#streams;
    const truncatedBefore = this.#truncated.get(stream) ?? 0n;
    const index = this.#readHolds.findIndex((h) => h.match(stream));
    const hold = index < 0 ? undefined : this.#readHolds.splice(index, 1)[0];
    return (async function* () {
      await turn();
      if (hold !== undefined) {
        hold.reach();
        const failure = await hold.wait;
        if (failure !== undefined) throw failure;
      }
      const stored = streams.get(stream);
      if (stored === undefined) throw new StreamNotFoundError(undefined, stream);
      const events = stored.filter((e) => e.revision >= truncatedBefore);
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
    return (async function* () {
      await turn();
      const backwards = options.direction === BACKWARDS;
      const from = options.fromPosition ?? (backwards ? END : START);
      const filter = options.filter;
      const selected = (backwards ? [...all].reverse() : [...all]).filter((e) => {
        const inRange = from === START || from === END || (backwards ? e.position.commit <= from.commit : e.position.commit >= from.commit);
        const kept = filter === undefined || ('prefixes' in filter ? filter.prefixes.some((p) => e.streamId.startsWith(p)) : new RegExp(filter.regex).test(e.streamId));
        return inRange && kept;
      });
      yield* selected.slice(0, Number(options.maxCount ?? selected.length)).map((event) => ({ event }));
    })();
  }

  /** Stream truncation (`$tb`): reads of the stream skip the revisions before it, as the server's do. */
  setStreamMetadata(stream: string, metadata: StreamMetadata): Promise<AppendResult> {
    this.metadataWrites.push({ stream, metadata });
    if (typeof metadata.truncateBefore === 'number') this.#truncated.set(stream, BigInt(metadata.truncateBefore));
    this.#position += 1n;
    return Promise.resolve({ success: true, nextExpectedRevision: 0n, position: { commit: this.#position, prepare: this.#position } });
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
