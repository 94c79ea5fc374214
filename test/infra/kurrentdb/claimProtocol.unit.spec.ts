// The KurrentDB adapter's claim protocol (infra/kurrentdb/codeClaims.ts) under interleavings of
// concurrent appends: the REAL KurrentEventStore over the REAL @kurrent/kurrentdb-client, talking
// gRPC to a stand-in of the server (grpcStandIn.ts, which advertises BatchAppend, so appends take
// the client's production batch-append path) whose in-memory model holds, lets go or fails chosen
// appends and reads, so that each interleaving runs the same way every time: appends of one stream
// racing for a code, a claim naming another request's event under the same id, a record that
// commits long after its claim, failures after the record landed, lost races for a free code,
// reservation streams with events of other types. The server-level behaviour is covered by
// eventStore.containers.spec.ts.

import { randomUUID } from 'node:crypto';
import {
  AccessDeniedError,
  DeadlineExceededError,
  KurrentDBClient,
  UnavailableError,
  jsonEvent,
  NO_STREAM,
} from '@kurrent/kurrentdb-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CodeTakenError, WrongExpectedRevisionError, type AppendRequest, type NewEvent } from '../../../domain/ports.ts';
import { handleCommand } from '../../../application/commands.ts';
import type { CommandContext, CommandSpec } from '../../../domain/shared/commandHandler.ts';
import { runtimeOf } from '../../support/runtime.ts';
import { StoreUnavailableError } from '../../../domain/shared/errors.ts';
import { CLAIM_GRACE_MS, CODE_CLAIMED, CODE_RELEASED, codeStreamName } from '../../../infra/kurrentdb/codeClaims.ts';
import { KurrentEventStore } from '../../../infra/kurrentdb/eventStore.ts';
import { CODE_CLAIM_VOIDED, CODE_MARKS_KEY, toStoredMetadata } from '../../../infra/kurrentdb/metadata.ts';
import { packPosition } from '../../../infra/kurrentdb/positions.ts';
import { startGrpcStandIn, type GrpcStandIn, type GrpcStandInOptions } from './grpcStandIn.ts';
import { InMemoryKurrentClient, type AppendCall } from './inMemoryClient.ts';

const T0 = Date.parse('2025-06-01T12:00:00Z');
const X = { scope: 'user', code: 'X' };
const CODE_STREAM = codeStreamName(X);
const S = 'user-S';
const T = 'user-T';

const anEvent = (): NewEvent => ({
  id: randomUUID(),
  type: 'UserCreated',
  schemaVersion: 1,
  data: {},
  metadata: { actor: 'tester', at: 't' },
});
const claiming = (stream: string, expected: AppendRequest['expected'], event = anEvent()): AppendRequest => ({
  stream,
  expected,
  events: [event],
  claim: [X],
});
/** The record append (not a claim) whose first event is `event`. */
const recordOf = (event: NewEvent) => (call: AppendCall) => call.events[0]?.id === event.id;

type ReservationEvent = { type: string; stream: unknown; eventId?: unknown };

/** The stand-ins and real clients a test opened, closed after it. */
const opened: { standIn: GrpcStandIn; real: KurrentDBClient }[] = [];
afterEach(async () => {
  for (const { standIn, real } of opened.splice(0)) {
    await real.dispose();
    await standIn.close();
  }
});

/** A stand-in of the server and a real client connected to it (`query` added to its connection string). */
async function connect(options: GrpcStandInOptions = {}, query?: string): Promise<{ model: InMemoryKurrentClient; real: KurrentDBClient }> {
  const standIn = await startGrpcStandIn(options);
  const real = KurrentDBClient.connectionString(standIn.url(query));
  opened.push({ standIn, real });
  return { model: standIn.model, real };
}

describe('the KurrentDB claim protocol under interleavings (the real client against a gRPC stand-in of the server)', () => {
  /** The stand-in's model: its gates, its events, the appends it received. */
  let client: InMemoryKurrentClient;
  /** The real client, connected to the stand-in. */
  let real: KurrentDBClient;
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

  /** The stand-in replaced by one with these options (the server's clock still at T0 unless given). */
  const useClient = async (options: GrpcStandInOptions = {}, query?: string): Promise<void> => {
    ({ model: client, real } = await connect({ clock: () => T0, ...options }, query));
    store = instanceAt(T0);
  };

  beforeEach(async () => {
    instanceAt = (at) => new KurrentEventStore(real, { now: () => at });
    await useClient();
  });

  it('reads $all by event type, reading on past pages without a match until the limit or the end', async () => {
    const types = [...Array.from({ length: 7 }, () => 'Common'), 'Rare', ...Array.from({ length: 9 }, () => 'Common'), 'Rare'];
    await store.append({ stream: S, expected: 'no_stream', events: types.map((t) => ({ ...anEvent(), type: t })) });
    const rare = await store.readAll({ after: 0n, limit: 2, categories: [S.split('-')[0] ?? ''], types: ['Rare'] });
    expect(rare.map((e) => e.revision)).toEqual([7, 17]);
    const one = await store.readAll({ after: 0n, limit: 1, types: ['Rare'] });
    expect(one.map((e) => e.revision)).toEqual([7]);
    expect(await store.readAll({ after: one[0]?.position ?? 0n, limit: 1, types: ['Rare'] })).toHaveLength(1);
    expect(await store.readAll({ after: rare[1]?.position ?? 0n, limit: 1, types: ['Rare'] })).toEqual([]);
  });

  it('reads a stream from a revision (the fold cache reads only the tail), asking the leader', async () => {
    await store.append({ stream: S, expected: 'no_stream', events: [anEvent(), anEvent(), anEvent()] });
    expect((await store.readStream(S, { from: 1 })).map((e) => e.revision)).toEqual([1, 2]);
    expect(await store.readStream(S, { from: 3 })).toEqual([]);
    expect(await store.readStream('user-none', { from: 1 })).toEqual([]);
    expect(client.reads.filter((r) => r.stream === S).at(-1)?.options).toMatchObject({ fromRevision: 3n, requiresLeader: true });
  });

  it('purges streams by truncating each before its next revision ($tb): reads answer nothing, a missing stream counts 0', async () => {
    await store.append({ stream: S, expected: 'no_stream', events: [anEvent(), anEvent(), anEvent()] });
    await store.append({ stream: T, expected: 'no_stream', events: [anEvent()] });
    expect(await store.purge([S, 'user-none'])).toBe(3);
    expect(client.metadataWrites).toEqual([{ stream: S, metadata: { truncateBefore: 3 } }]);
    expect(await store.readStream(S)).toEqual([]);
    expect(await store.readStream(T)).toHaveLength(1);
    expect(await store.purge([S])).toBe(0);
    expect(client.metadataWrites).toHaveLength(1);
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
    await client.appendToStream(CODE_STREAM, jsonEvent({ type: CODE_CLAIMED, data: { stream: S, eventId: randomUUID(), at: 't' } }), {
      streamState: 1n,
    });
    await expectHeldByS();
  });

  it('reads from the leader whatever the protocol or a command relies on', async () => {
    await store.append(claiming(S, 'no_stream'));
    await store.append({
      stream: S,
      expected: 0,
      events: [{ ...anEvent(), metadata: { actor: 'tester', at: 't', idempotencyKey: 'k' } }],
      release: [X],
    });
    await store.append(claiming(T, 'no_stream'));
    await store.findCode(X);
    await store.readStream(S);
    await store.readAll({ after: 0n, limit: 10, categories: ['user'] });
    await store.headPosition();
    expect(client.reads.length).toBeGreaterThan(8);
    expect(client.reads.filter((r) => r.options.requiresLeader !== true)).toEqual([]);
  });

  const Y = { scope: 'user', code: 'Y' };
  /** An event under idempotency key `k`, its id fixed as keyed ids are (same key, same id). */
  const keyedEvent = (id: string, data: Record<string, unknown> = {}): NewEvent => ({
    ...anEvent(),
    id,
    data,
    metadata: { actor: 'tester', at: 't', idempotencyKey: 'k' },
  });
  const foreignEvent = () => jsonEvent({ type: 'AuditNote', data: { stream: T, note: 'written by another tool' } });

  describe('a claim naming an event of another request under the same id (V1)', () => {
    it('gives back, when its refused append finds its ids landed, the claims the landed event does not mark', async () => {
      const id = randomUUID();
      const a1 = keyedEvent(id, { code: 'X' });
      const heldA = client.hold(recordOf(a1));
      const a = store.append({ stream: S, expected: 'no_stream', events: [a1], claim: [X] });
      await heldA.reached; // A has claimed X naming `id`; its record waits
      // B, same key and id, another body: claims Y and lands first.
      await store.append({ stream: S, expected: 'no_stream', events: [keyedEvent(id, { code: 'Y' })], claim: [Y] });
      heldA.open();
      expect(await a).toEqual({ revision: 0, position: expect.any(BigInt) as bigint, duplicate: true });
      expect(reservations()).toEqual([
        { type: CODE_CLAIMED, stream: S, eventId: id },
        { type: CODE_RELEASED, stream: S },
      ]);
      expect(await instanceAt(T0 + 10 * CLAIM_GRACE_MS).findCode(Y)).toBe(S);
      await store.append(claiming(T, 'no_stream'));
      expect(await store.findCode(X)).toBe(T);
    });

    it.each([
      { how: 'the server acknowledged the ids as a retry (KurrentDB’s idempotency)', idempotent: true },
      { how: 'its give-back was lost', idempotent: false },
    ])('frees at once a code whose claim names a landed event that does not mark it: $how', async ({ idempotent }) => {
      await useClient({ idempotent });
      if (!idempotent) {
        const lost = client.hold((call) => call.stream === CODE_STREAM && call.events[0]?.type === CODE_RELEASED);
        void lost.reached.then(() => {
          lost.fail(new UnavailableError());
        });
      }
      const id = randomUUID();
      const a1 = keyedEvent(id, { code: 'X' });
      const heldA = client.hold(recordOf(a1));
      const a = store.append({ stream: S, expected: 'no_stream', events: [a1], claim: [X] });
      await heldA.reached;
      await store.append({ stream: S, expected: 'no_stream', events: [keyedEvent(id, { code: 'Y' })], claim: [Y] });
      heldA.open();
      await a;
      expect(client.events(S)).toHaveLength(1);
      expect(reservations()).toEqual([{ type: CODE_CLAIMED, stream: S, eventId: id }]);
      // Well within the grace period: the claiming event is there, and does not claim X.
      expect(await store.findCode(X)).toBeUndefined();
      await store.append(claiming(T, 'no_stream'));
      expect(await store.findCode(X)).toBe(T);
      expect(await store.findCode(Y)).toBe(S);
    });

    it('keeps a code the holder claimed before when a claim again of it names another request’s event', async () => {
      await useClient({ idempotent: true });
      await store.append(claiming(S, 'no_stream'));
      const id = randomUUID();
      const a1 = keyedEvent(id, { name: 'a' });
      const heldA = client.hold(recordOf(a1));
      const a = store.append({ stream: S, expected: 0, events: [a1], claim: [X] }); // claims X again
      await heldA.reached;
      await store.append({ stream: S, expected: 0, events: [keyedEvent(id, { name: 'b' })] }); // claims nothing
      heldA.open();
      await a; // acknowledged by the server as a retry of B
      expect(reservations().at(-1)).toEqual({ type: CODE_CLAIMED, stream: S, eventId: id });
      // The claiming event does not mark X, but S's first event claimed it and nothing released it.
      await expectHeldByS();
    });
  });

  describe('a record the server commits late: the fence (V2)', () => {
    /** The server's clock, which the tests move; the stand-in stamps claims with it. */
    let server: number;
    beforeEach(async () => {
      server = T0;
      await useClient({ clock: () => server });
    });
    const fences = () => client.events(S).filter((e) => e.type === CODE_CLAIM_VOIDED);

    it('keeps out a record committed after its expired claim was fenced and taken over: only the taker holds the code', async () => {
      const a1 = anEvent();
      const heldA = client.hold(recordOf(a1));
      const a = store.append(claiming(S, 'no_stream', a1));
      await heldA.reached; // claimed, its record sent and not yet committed
      server = T0 + CLAIM_GRACE_MS / 2;
      await expect(instanceAt(server).append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
      server = T0 + CLAIM_GRACE_MS + 1_000;
      await instanceAt(server).append(claiming(T, 'no_stream'));
      expect(fences()).toHaveLength(1);
      heldA.open(); // the server gets to it now, long after the grace period
      await expect(a).rejects.toMatchObject({ name: 'WrongExpectedRevisionError', stream: S });
      expect(client.events(S).map((e) => e.type)).toEqual([CODE_CLAIM_VOIDED]);
      expect(await store.readStream(S)).toEqual([]);
      expect(await instanceAt(server).findCode(X)).toBe(T);
      // The command's retry reads again and finds the code taken.
      await expect(store.append(claiming(S, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
    });

    it('lets a record that lands before the fence keep the code: the fence is refused and the taker finds it held', async () => {
      const a1 = anEvent();
      const heldA = client.hold(recordOf(a1));
      const a = store.append(claiming(S, 'no_stream', a1));
      await heldA.reached;
      server = T0 + CLAIM_GRACE_MS + 1_000;
      const fence = client.hold((call) => call.stream === S && call.events[0]?.type === CODE_CLAIM_VOIDED);
      const t = instanceAt(server).append(claiming(T, 'no_stream'));
      await fence.reached; // T read S without A's record and is fencing it
      heldA.open();
      await a; // A's record lands first
      fence.open();
      await expect(t).rejects.toBeInstanceOf(CodeTakenError);
      expect(fences()).toEqual([]);
      await expectHeldByS();
    });

    it('fences early, never doubly, for a checker whose clock runs far ahead of the server’s', async () => {
      const a1 = anEvent();
      const heldA = client.hold(recordOf(a1));
      const a = store.append(claiming(S, 'no_stream', a1));
      await heldA.reached;
      await instanceAt(T0 + 3_600_000).append(claiming(T, 'no_stream')); // its clock an hour ahead
      heldA.open();
      await expect(a).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      expect(await store.findCode(X)).toBe(T);
      expect(client.events(S).map((e) => e.type)).toEqual([CODE_CLAIM_VOIDED]);
    });

    it('makes a record again after a fence that voids none of its claims, which readers never see', async () => {
      const a1 = anEvent();
      const heldA = client.hold(recordOf(a1));
      const a = store.append(claiming(S, 'no_stream', a1));
      await heldA.reached;
      heldA.fail(new DeadlineExceededError()); // A crashed: its record never commits
      await expect(a).rejects.toBeInstanceOf(StoreUnavailableError);
      server = T0 + CLAIM_GRACE_MS + 1_000;
      await instanceAt(server).append(claiming(T, 'no_stream'));
      // S, created by its fence alone, reads as no stream: a create of S at no_stream lands after it.
      expect(await store.readStream(S)).toEqual([]);
      const created = await instanceAt(server).append({ stream: S, expected: 'no_stream', events: [anEvent()], claim: [Y] });
      expect(created.revision).toBe(1);
      expect((await store.readStream(S)).map((e) => e.revision)).toEqual([1]);
      expect(await store.readAll({ after: 0n, limit: 10, categories: ['user'] })).toHaveLength(2);
      expect((await store.readAll({ after: 0n, limit: 10 })).map((e) => e.type)).toEqual(['UserCreated', 'UserCreated']);
      expect(await instanceAt(server).findCode(Y)).toBe(S);
      // the next write of S at the revision it read
      expect((await store.append({ stream: S, expected: 1, events: [anEvent()] })).revision).toBe(2);
    });

    it('answers a keyed retry with the revision it wrote at, not its place among the events read (a fence leaves a revision out)', async () => {
      const a = store.append(claiming(S, 'no_stream'));
      const heldA = client.hold((call) => call.stream === S);
      await heldA.reached;
      heldA.fail(new DeadlineExceededError());
      await expect(a).rejects.toBeInstanceOf(StoreUnavailableError);
      server = T0 + CLAIM_GRACE_MS + 1_000;
      await instanceAt(server).append(claiming(T, 'no_stream')); // fences S at revision 0
      const spec: CommandSpec<number> = {
        resource: 'USER',
        stream: S,
        initial: () => 0,
        evolve: (n) => n + 1,
        decide: () => ({ events: [{ type: 'UserCreated', data: {} }] }),
        schemaVersion: 1,
      };
      const ctx: CommandContext = { actor: 'alice', now: new Date(server), newId: randomUUID, idempotencyKey: 'k-1', requestHash: 'h-1' };
      expect(await handleCommand(spec, ctx, runtimeOf(instanceAt(server)))).toMatchObject({ version: 1, written: true });
      expect(await handleCommand(spec, ctx, runtimeOf(instanceAt(server)))).toMatchObject({ version: 1, written: false, state: 1 });
    });
  });

  describe('deleted and truncated streams (V6)', () => {
    it('moves a code whose reservation stream was deleted (tombstoned) to its next generation', async () => {
      await store.append(claiming(S, 'no_stream'));
      await store.append({ stream: S, expected: 0, events: [anEvent()], release: [X] });
      client.tombstone(CODE_STREAM);
      expect(await store.findCode(X)).toBeUndefined();
      await store.append(claiming(T, 'no_stream'));
      expect(client.events(`${CODE_STREAM}!1`).map((e) => e.type)).toEqual([CODE_CLAIMED]);
      expect(await store.findCode(X)).toBe(T);
      await expect(store.append(claiming('user-U', 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
    });

    it('frees, once expired, a code whose holder’s stream was deleted: no append can land on it', async () => {
      let server = T0;
      await useClient({ clock: () => server });
      const a = store.append(claiming(S, 'no_stream'));
      const heldA = client.hold((call) => call.stream === S);
      await heldA.reached;
      heldA.fail(new DeadlineExceededError());
      await expect(a).rejects.toBeInstanceOf(StoreUnavailableError);
      client.tombstone(S);
      expect(await store.findCode(X)).toBeUndefined();
      await expect(store.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
      server = T0 + CLAIM_GRACE_MS + 1_000;
      await instanceAt(server).append(claiming(T, 'no_stream'));
      expect(await instanceAt(server).findCode(X)).toBe(T);
    });

    it('frees, once expired, a code whose holder’s stream was purged (truncated whole): fenced at its real revision', async () => {
      let server = T0;
      await useClient({ clock: () => server });
      await store.append(claiming(S, 'no_stream'));
      await store.append({ stream: S, expected: 0, events: [anEvent()] });
      await store.purge([S]);
      await expect(store.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
      server = T0 + CLAIM_GRACE_MS + 1_000;
      await instanceAt(server).append(claiming(T, 'no_stream'));
      expect(client.events(S).map((e) => e.type)).toEqual(['UserCreated', 'UserCreated', CODE_CLAIM_VOIDED]);
      expect(await instanceAt(server).findCode(X)).toBe(T);
    });

    it('claims a reservation stream truncated whole ($tb; $maxAge once every event is old), which reads as empty, at its real revision', async () => {
      await store.append(claiming(S, 'no_stream'));
      await store.append({ stream: S, expected: 0, events: [anEvent()], release: [X] });
      await real.setStreamMetadata(CODE_STREAM, { truncateBefore: client.events(CODE_STREAM).length });
      expect(await store.findCode(X)).toBeUndefined();
      await store.append(claiming(T, 'no_stream'));
      expect(client.events(CODE_STREAM).map((e) => e.type)).toEqual([CODE_CLAIMED, CODE_RELEASED, CODE_CLAIMED]);
      expect(await store.findCode(X)).toBe(T);
    });
  });

  describe('reads of one event where one is enough, the head and categories (V7)', () => {
    const oneEvent = (stream: string) => client.reads.filter((r) => r.stream === stream).map((r) => r.options.maxCount);

    it('purges with two reads of one event each, counting what the truncation covers', async () => {
      await store.append({ stream: S, expected: 'no_stream', events: [anEvent(), anEvent(), anEvent()] });
      expect(await store.purge([S])).toBe(3);
      await store.append({ stream: S, expected: 2, events: [anEvent(), anEvent()] });
      client.reads.length = 0;
      expect(await store.purge([S])).toBe(2);
      expect(oneEvent(S)).toEqual([1n, 1n]);
    });

    it('releases with reads of one event: the reservation stream’s last and the claiming event', async () => {
      await store.append(claiming(S, 'no_stream'));
      await store.append({ stream: S, expected: 0, events: [anEvent(), anEvent(), anEvent()] });
      client.reads.length = 0;
      await store.append({ stream: S, expected: 3, events: [anEvent()], release: [X] });
      expect(reservations().map((r) => r.type)).toEqual([CODE_CLAIMED, CODE_RELEASED]);
      expect(oneEvent(S)).toEqual([1n]);
      expect(oneEvent(CODE_STREAM)).toEqual([1n]);
    });

    it('never answers a head below one it answered, nor below the log’s newest event after a purge and a scavenge', async () => {
      await store.append({ stream: S, expected: 'no_stream', events: [anEvent()] });
      await store.append({ stream: T, expected: 'no_stream', events: [anEvent()] });
      const before = await store.headPosition();
      await store.purge([T]);
      client.scavenge();
      const fresh = instanceAt(T0);
      expect(await fresh.headPosition()).toBeGreaterThanOrEqual(before);
      expect(await store.headPosition()).toBeGreaterThanOrEqual(before);
      expect(await store.readAll({ after: 0n, limit: 10 })).toHaveLength(1);
    });

    it('reads a record category whose name ends in Code, and never the reservation streams', async () => {
      const promo = `promoCode-${randomUUID()}`;
      await store.append({
        stream: promo,
        expected: 'no_stream',
        events: [{ ...anEvent(), type: 'PromoCodeCreated' }],
        claim: [{ scope: 'promo', code: 'SUMMER' }],
      });
      expect((await store.readAll({ after: 0n, limit: 10 })).map((e) => e.stream)).toEqual([promo]);
      expect((await store.readAll({ after: 0n, limit: 10, categories: ['promoCode'] })).map((e) => e.type)).toEqual(['PromoCodeCreated']);
      expect(await store.readAll({ after: 0n, limit: 10, categories: ['promo'] })).toEqual([]);
    });
  });

  describe('every call bounded on the adapter’s side (V2)', () => {
    const quick = () => new KurrentEventStore(real, { now: () => T0, deadlineMs: 1_000 });
    // The client's connections up first (its Rust reader and its batch-append stream), so the
    // deadline times only the call that is never answered.
    beforeEach(async () => {
      await store.append({ stream: 'user-warm', expected: 'no_stream', events: [anEvent()] });
      await store.readStream('user-warm');
    });

    it('answers 503 when an append is not answered within the deadline; the claims stay, and a late commit holds the code', async () => {
      const a1 = anEvent();
      const heldA = client.hold(recordOf(a1)); // the server never answers: the client waits without end
      await expect(quick().append(claiming(S, 'no_stream', a1))).rejects.toMatchObject({
        code: 'EVENT_STORE.UNAVAILABLE',
        retryAfterSeconds: 1,
      });
      expect(reservations().map((r) => r.type)).toEqual([CODE_CLAIMED]);
      await expect(store.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
      heldA.open();
      await expect.poll(() => client.events(S).length).toBe(1);
      await expectHeldByS();
    });

    it('answers 503 when a read is not answered within the deadline', async () => {
      client.holdRead((stream) => stream === S);
      await expect(quick().readStream(S)).rejects.toMatchObject({ code: 'EVENT_STORE.UNAVAILABLE', retryAfterSeconds: 1 });
      client.holdRead((stream) => stream === '$all');
      await expect(quick().readAll({ after: 0n, limit: 10 })).rejects.toMatchObject({ code: 'EVENT_STORE.UNAVAILABLE' });
    });

    it('closes within the deadline while an append is never answered', async () => {
      client.hold((call) => call.stream === S);
      const store = quick();
      const append = store.append({ stream: S, expected: 'no_stream', events: [anEvent()] });
      append.catch(() => undefined);
      await expect(store.close()).resolves.toBeUndefined();
      await expect(append).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  });

  describe('errors after the record landed (V3)', () => {
    it.each([
      { title: 'a non-transient error', error: () => new AccessDeniedError(undefined as never) },
      { title: 'an unavailable server', error: () => new UnavailableError() },
    ])('answers 503 and gives back no claim when reading the position of a landed append fails: $title', async ({ error }) => {
      await useClient({ answersPosition: false });
      const read = client.holdRead((stream) => stream === S);
      void read.reached.then(() => {
        read.fail(error());
      });
      await expect(store.append(claiming(S, 'no_stream'))).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(client.events(S)).toHaveLength(1);
      expect(reservations().map((r) => r.type)).toEqual([CODE_CLAIMED]);
      await expectHeldByS();
    });

    it('reads the position of its own last event when the server’s answer leaves it out', async () => {
      await useClient({ answersPosition: false });
      const result = await store.append({ stream: S, expected: 'no_stream', events: [anEvent(), anEvent()], claim: [X] });
      await store.append({ stream: T, expected: 'no_stream', events: [anEvent()] });
      expect(result).toEqual({ revision: 1, position: packPosition(client.events(S)[1]?.position ?? { commit: 0n, prepare: 0n }) });
      expect(client.reads.filter((r) => r.options.requiresLeader !== true)).toEqual([]);
    });
  });

  describe('a claimant losing every race for the revision (V4)', () => {
    /** Holds S's next CLAIM_ATTEMPTS claims of X, each time letting `meanwhile` write first. */
    const loseEveryRace = async (meanwhile: (race: number) => Promise<unknown>): Promise<void> => {
      for (let race = 1; race <= 3; race++) {
        const claim = client.hold((call) => call.stream === CODE_STREAM && (call.events[0]?.data as { stream?: unknown }).stream === S);
        await claim.reached;
        await meanwhile(race);
        claim.open();
      }
    };
    /** Another stream's release, which leaves the code free but moves the revision on. */
    const releaseByU = () => client.appendToStream(CODE_STREAM, jsonEvent({ type: CODE_RELEASED, data: { stream: 'user-U' } }));

    it('answers a conflict on its record’s stream, not CodeTakenError, when the code stayed free', async () => {
      const a = store.append(claiming(S, 'no_stream'));
      const failed = expect(a).rejects.toMatchObject({ name: 'WrongExpectedRevisionError', stream: S, expected: 'no_stream' });
      await loseEveryRace(releaseByU);
      await failed;
      expect(reservations().filter((r) => r.type === CODE_CLAIMED)).toEqual([]);
      expect(await store.findCode(X)).toBeUndefined();
      await store.append(claiming(S, 'no_stream')); // the command's retry
      expect(await store.findCode(X)).toBe(S);
    });

    it('answers CodeTakenError when the last race went to a claimant that holds the code', async () => {
      const a = store.append(claiming(S, 'no_stream'));
      const failed = expect(a).rejects.toBeInstanceOf(CodeTakenError);
      await loseEveryRace((race) => (race < 3 ? releaseByU() : instanceAt(T0).append(claiming(T, 'no_stream'))));
      await failed;
      expect(await store.findCode(X)).toBe(T);
    });
  });

  describe('events of other types in a reservation stream (V5)', () => {
    it('passes over them: the last claim or release decides, and the next one is written after them', async () => {
      await store.append(claiming(S, 'no_stream'));
      await client.appendToStream(CODE_STREAM, foreignEvent());
      expect(await store.findCode(X)).toBe(S);
      await expect(store.append(claiming(T, 'no_stream'))).rejects.toBeInstanceOf(CodeTakenError);
      await store.append({ stream: S, expected: 0, events: [anEvent()], release: [X] });
      await client.appendToStream(CODE_STREAM, foreignEvent());
      expect(client.events(CODE_STREAM).map((e) => e.type)).toEqual([CODE_CLAIMED, 'AuditNote', CODE_RELEASED, 'AuditNote']);
      expect(await store.findCode(X)).toBeUndefined();
      await store.append(claiming(T, 'no_stream'));
      expect(await store.findCode(X)).toBe(T);
      expect(client.reads.filter((r) => r.options.requiresLeader !== true)).toEqual([]);
    });

    it('claims a reservation stream holding only events of other types at its revision', async () => {
      await client.appendToStream(CODE_STREAM, [foreignEvent(), foreignEvent()]);
      await store.append(claiming(S, 'no_stream'));
      expect(client.events(CODE_STREAM).map((e) => e.type)).toEqual(['AuditNote', 'AuditNote', CODE_CLAIMED]);
      await expectHeldByS();
    });
  });

  describe.each([
    { throwOnAppendFailure: true, title: 'conflicts thrown' },
    { throwOnAppendFailure: false, title: 'conflicts answered as success: false (throwOnAppendFailure=false)' },
  ])('with $title', ({ throwOnAppendFailure }) => {
    beforeEach(async () => {
      await useClient({}, throwOnAppendFailure ? undefined : 'throwOnAppendFailure=false');
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
    const event = () =>
      jsonEvent({ type: 'T', data: {}, metadata: toStoredMetadata({ metadata: { actor: 'a', at: 't' }, schemaVersion: 1 }) });
    await client.appendToStream('s-1', event(), { streamState: NO_STREAM });
    await expect(client.appendToStream('s-1', event(), { streamState: NO_STREAM })).rejects.toMatchObject({
      expectedState: 'no_stream',
      actualState: 0n,
    });
    await expect(client.appendToStream('s-1', event(), { streamState: 1n })).rejects.toMatchObject({ actualState: 0n });
    expect(await client.appendToStream('s-1', event(), { streamState: 0n })).toMatchObject({ success: true, nextExpectedRevision: 1n });
  });

  it('acknowledges ids already written after the expected revision without writing them (idempotent), and answers without positions when told', async () => {
    const client = new InMemoryKurrentClient({ idempotent: true, answersPosition: false });
    const first = jsonEvent({ id: randomUUID(), type: 'T', data: { body: 1 } });
    const written = await client.appendToStream('s-1', first, { streamState: NO_STREAM });
    expect(written).toEqual({ success: true, nextExpectedRevision: 0n });
    const again = jsonEvent({ id: first.id, type: 'T', data: { body: 2 } });
    expect(await client.appendToStream('s-1', again, { streamState: NO_STREAM })).toEqual({ success: true, nextExpectedRevision: 0n });
    expect(client.events('s-1').map((e) => e.data)).toEqual([{ body: 1 }]);
    await expect(client.appendToStream('s-1', again, { streamState: 0n })).resolves.toMatchObject({ nextExpectedRevision: 1n });
  });

  it('commits an append held past its deadline (as KurrentDB does a complete batch append), and fails held reads', async () => {
    let server = T0;
    const client = new InMemoryKurrentClient({ clock: () => server });
    const held = client.hold((call) => call.stream === 's-1');
    const append = client.appendToStream('s-1', jsonEvent({ type: 'T', data: {} }), { streamState: NO_STREAM, deadline: 1_000 });
    await held.reached;
    server += 60_000;
    held.open();
    await expect(append).resolves.toMatchObject({ success: true, nextExpectedRevision: 0n });
    expect(client.events('s-1')).toHaveLength(1);
    expect(client.appends.map((call) => call.deadline)).toEqual([1_000]);
    const read = client.holdRead((stream) => stream === 's-1');
    const reading = (async () => {
      for await (const _ of client.readStream('s-1')) break;
    })();
    await read.reached;
    read.fail(new UnavailableError());
    await expect(reading).rejects.toBeInstanceOf(UnavailableError);
  });
});
