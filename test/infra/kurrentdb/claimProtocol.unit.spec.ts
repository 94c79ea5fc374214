// The KurrentDB adapter's claim protocol (infra/kurrentdb/codeClaims.ts) under interleavings of
// concurrent appends: the REAL KurrentEventStore over an in-memory stand-in of the server
// (inMemoryClient.ts), which holds, lets go or fails chosen appends so that each interleaving runs
// the same way every time. The server-level behaviour is covered by eventStore.containers.spec.ts.

import { randomUUID } from 'node:crypto';
import { DeadlineExceededError, UnavailableError, jsonEvent, NO_STREAM } from '@kurrent/kurrentdb-client';
import { beforeEach, describe, expect, it } from 'vitest';
import { CodeTakenError, WrongExpectedRevisionError, type AppendRequest, type NewEvent } from '../../../domain/ports.ts';
import { StoreUnavailableError } from '../../../domain/shared/errors.ts';
import { CLAIM_GRACE_MS, CODE_CLAIMED, CODE_RELEASED, codeStreamName } from '../../../infra/kurrentdb/codeClaims.ts';
import { KurrentEventStore } from '../../../infra/kurrentdb/eventStore.ts';
import { CODE_MARKS_KEY, toStoredMetadata } from '../../../infra/kurrentdb/metadata.ts';
import { InMemoryKurrentClient, type AppendCall } from './inMemoryClient.ts';

const T0 = Date.parse('2025-06-01T12:00:00Z');
const X = { scope: 'user', code: 'X' };
const CODE_STREAM = codeStreamName(X);
const S = 'user-S';
const T = 'user-T';

const anEvent = (): NewEvent => ({ id: randomUUID(), type: 'UserCreated', schemaVersion: 1, data: {}, metadata: { actor: 'tester', at: 't' } });
const claiming = (stream: string, expected: AppendRequest['expected'], event = anEvent()): AppendRequest => ({ stream, expected, events: [event], claim: [X] });
/** The record append (not a claim) whose first event is `event`. */
const recordOf = (event: NewEvent) => (call: AppendCall) => call.events[0]?.id === event.id;

type ReservationEvent = { type: string; stream: unknown; eventId?: unknown };

describe('the KurrentDB claim protocol under interleavings (in-memory stand-in of the server)', () => {
  let client: InMemoryKurrentClient;
  /** An adapter instance whose clock reads `at` (the stand-in's, the server's, stays at T0). */
  let instanceAt: (at: number) => KurrentEventStore;
  let store: KurrentEventStore;
  const reservations = (): ReservationEvent[] =>
    client.events(CODE_STREAM).map((e) => {
      const data = e.data as Record<string, unknown>;
      return e.type === CODE_CLAIMED ? { type: e.type, stream: data.stream, eventId: data.eventId } : { type: e.type, stream: data.stream };
    });
  /** X is S's, for this instance and for one long after the grace period, and T cannot take it. */
  const expectHeldByS = async (): Promise<void> => {
    expect(await store.findCode(X)).toBe(S);
    const later = instanceAt(T0 + 10 * CLAIM_GRACE_MS);
    expect(await later.findCode(X)).toBe(S);
    await expect(later.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
  };

  beforeEach(() => {
    client = new InMemoryKurrentClient({ clock: () => T0 });
    instanceAt = (at) => new KurrentEventStore(client, { now: () => at });
    store = instanceAt(T0);
  });

  it('keeps the code with the record that landed when two appends of one stream claim it and the first is refused', async () => {
    const a1 = anEvent();
    const b1 = anEvent();
    const heldA = client.hold(recordOf(a1));
    const a = store.append(claiming(S, 'no_stream', a1));
    await heldA.reached; // A has claimed X; its record waits
    await store.append(claiming(S, 'no_stream', b1)); // B claims X again, for its own event, and lands
    heldA.open();
    await expect(a).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    // A's give-back at the revision of its own claim was refused: B's claim came after it.
    expect(reservations()).toEqual([
      { type: CODE_CLAIMED, stream: S, eventId: a1.id },
      { type: CODE_CLAIMED, stream: S, eventId: b1.id },
    ]);
    await expectHeldByS();
  });

  it('keeps the code with the stream when the first append’s answer is lost (no give-back) and the second lands', async () => {
    const a1 = anEvent();
    const heldA = client.hold(recordOf(a1));
    const a = store.append(claiming(S, 'no_stream', a1));
    await heldA.reached;
    await store.append(claiming(S, 'no_stream'));
    heldA.fail(new DeadlineExceededError());
    await expect(a).rejects.toBeInstanceOf(StoreUnavailableError);
    await expectHeldByS();
  });

  it('keeps a claim again that the server refused, since the first claimant’s append may still land', async () => {
    const a1 = anEvent();
    const heldA = client.hold(recordOf(a1));
    const a = store.append(claiming(S, 'no_stream', a1));
    await heldA.reached;
    // B claims X again and is refused (S has no event 0 yet): it does not give its claim back.
    await expect(store.append(claiming(S, 0))).rejects.toBeInstanceOf(WrongExpectedRevisionError);
    expect(reservations().map((r) => r.type)).toEqual([CODE_CLAIMED, CODE_CLAIMED]);
    // While A is in flight, T finds X claimed and not yet proven: taken.
    await expect(store.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
    heldA.open();
    await a;
    await expectHeldByS();
  });

  it('lets a claim again win over a release of the same code racing it', async () => {
    await store.append(claiming(S, 'no_stream'));
    // R releases X: written, but its answer (and so its CodeReleased) waits.
    const r1 = anEvent();
    const heldR = client.hold(recordOf(r1), 'after');
    const r = store.append({ stream: S, expected: 0, events: [r1], release: [X] });
    await heldR.reached;
    // B, after R, claims X again; its claim is written, its record waits.
    const b1 = anEvent();
    const heldB = client.hold(recordOf(b1));
    const b = store.append(claiming(S, 1, b1));
    await heldB.reached;
    heldR.open();
    await r;
    // R's release does not cover B's later claim.
    expect(reservations().at(-1)).toEqual({ type: CODE_CLAIMED, stream: S, eventId: b1.id });
    await expect(store.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
    heldB.open();
    await b;
    await expectHeldByS();
  });

  it('takes over the claim of an append that never landed (a crash between claim and append) only after the grace period', async () => {
    const a1 = anEvent();
    const heldA = client.hold(recordOf(a1));
    const a = store.append(claiming(S, 'no_stream', a1));
    await heldA.reached;
    heldA.fail(new DeadlineExceededError());
    await expect(a).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(reservations()).toEqual([{ type: CODE_CLAIMED, stream: S, eventId: a1.id }]);

    const soon = instanceAt(T0 + CLAIM_GRACE_MS / 2);
    expect(await soon.findCode(X)).toBeUndefined();
    await expect(soon.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);

    const later = instanceAt(T0 + CLAIM_GRACE_MS + 1_000);
    await later.append(claiming(T, 'no_stream'));
    expect(await later.findCode(X)).toBe(T);
    expect(await soon.findCode(X)).toBe(T);
  });

  it('judges a claim’s age by the server’s time of the claim, not by the claimant’s clock', async () => {
    const behind = instanceAt(T0 - 3_600_000); // a claimant whose clock is an hour late
    const a1 = anEvent();
    const heldA = client.hold(recordOf(a1));
    const a = behind.append(claiming(S, 'no_stream', a1));
    await heldA.reached;
    heldA.fail(new DeadlineExceededError());
    await expect(a).rejects.toBeInstanceOf(StoreUnavailableError);
    const checker = instanceAt(T0 + 10_000);
    await expect(checker.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
  });

  it('frees a code whose release reached the holder’s stream but not the reservation stream', async () => {
    await store.append(claiming(S, 'no_stream'));
    const lost = client.hold((call) => call.stream === CODE_STREAM && call.events[0]?.type === CODE_RELEASED);
    void lost.reached.then(() => {
      lost.fail(new UnavailableError());
    });
    await store.append({ stream: S, expected: 0, events: [anEvent()], release: [X] });
    expect(reservations().map((r) => r.type)).toEqual([CODE_CLAIMED]);
    expect(await store.findCode(X)).toBeUndefined();
    await store.append(claiming(T, 'no_stream'));
    expect(await store.findCode(X)).toBe(T);
  });

  it('keeps a code that one append both releases and claims', async () => {
    await store.append(claiming(S, 'no_stream'));
    await store.append({ stream: S, expected: 0, events: [anEvent()], claim: [X], release: [X] });
    expect(reservations().map((r) => r.type)).toEqual([CODE_CLAIMED, CODE_CLAIMED]);
    expect((client.events(S)[1]?.metadata as Record<string, unknown>)[CODE_MARKS_KEY]).toEqual({ claimed: [CODE_STREAM], released: [] });
    await expectHeldByS();
  });

  it('holds for its stream a code whose reservation stream lost track of it (left by the adapter that shared claims)', async () => {
    // S's record claims X, but the reservation stream ends with a release by S: the shared claim's
    // give-back by a refused append of S.
    await store.append(claiming(S, 'no_stream'));
    await client.appendToStream(CODE_STREAM, jsonEvent({ type: CODE_RELEASED, data: { stream: S } }), { streamState: 0n });
    await expectHeldByS();
    // … or with a claim by S naming an event that never landed (the claim of the refused append).
    await client.appendToStream(CODE_STREAM, jsonEvent({ type: CODE_CLAIMED, data: { stream: S, eventId: randomUUID(), at: 't' } }), { streamState: 1n });
    await expectHeldByS();
  });

  it('reads from the leader whatever the protocol or a command relies on', async () => {
    await store.append(claiming(S, 'no_stream'));
    await store.append({ stream: S, expected: 0, events: [{ ...anEvent(), metadata: { actor: 'tester', at: 't', idempotencyKey: 'k' } }], release: [X] });
    await store.append(claiming(T, 'no_stream'));
    await store.findCode(X);
    await store.readStream(S);
    await store.readAll({ after: 0n, limit: 10, categories: ['user'] });
    await store.headPosition();
    expect(client.reads.length).toBeGreaterThan(8);
    expect(client.reads.filter((r) => r.options.requiresLeader !== true)).toEqual([]);
  });

  describe.each([
    { throwOnAppendFailure: true, title: 'conflicts thrown' },
    { throwOnAppendFailure: false, title: 'conflicts answered as success: false (throwOnAppendFailure=false)' },
  ])('with $title', ({ throwOnAppendFailure }) => {
    beforeEach(() => {
      client = new InMemoryKurrentClient({ clock: () => T0, throwOnAppendFailure });
      store = instanceAt(T0);
    });

    it('gives a code to exactly one of 16 concurrent claimants on distinct streams', async () => {
      const streams = Array.from({ length: 16 }, () => `user-${randomUUID()}`);
      const outcomes = await Promise.allSettled(streams.map((s) => instanceAt(T0).append(claiming(s, 'no_stream'))));
      const won = streams.filter((_, i) => outcomes[i]?.status === 'fulfilled');
      expect(won).toHaveLength(1);
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(CodeTakenError);
      expect(reservations()).toEqual([{ type: CODE_CLAIMED, stream: won[0], eventId: client.events(won[0] ?? '')[0]?.id }]);
      expect(await store.findCode(X)).toBe(won[0]);
    });

    it('refuses an append at a revision that moved on', async () => {
      await store.append({ stream: S, expected: 'no_stream', events: [anEvent()] });
      await expect(store.append({ stream: S, expected: 'no_stream', events: [anEvent()] })).rejects.toMatchObject({
        name: 'WrongExpectedRevisionError',
        stream: S,
        expected: 'no_stream',
        actual: 0,
      });
      expect(client.events(S)).toHaveLength(1);
    });
  });
});

describe('the in-memory stand-in itself', () => {
  it('applies the server’s expected-revision rules', async () => {
    const client = new InMemoryKurrentClient();
    const event = () => jsonEvent({ type: 'T', data: {}, metadata: toStoredMetadata({ metadata: { actor: 'a', at: 't' }, schemaVersion: 1 }) });
    await client.appendToStream('s-1', event(), { streamState: NO_STREAM });
    await expect(client.appendToStream('s-1', event(), { streamState: NO_STREAM })).rejects.toMatchObject({ expectedState: 'no_stream', actualState: 0n });
    await expect(client.appendToStream('s-1', event(), { streamState: 1n })).rejects.toMatchObject({ actualState: 0n });
    expect(await client.appendToStream('s-1', event(), { streamState: 0n })).toMatchObject({ success: true, nextExpectedRevision: 1n });
    const lenient = new InMemoryKurrentClient({ throwOnAppendFailure: false });
    expect(await lenient.appendToStream('s-2', event(), { streamState: 0n })).toEqual({ success: false, nextExpectedRevision: -1n });
  });
});
