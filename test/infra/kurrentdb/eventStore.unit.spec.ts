// The KurrentDB adapter's pure parts (positions, code streams, metadata, idempotent retries, the
// claim protocol's decisions, error translation) on the client's real error classes, and how the
// adapter fails when no server answers. The adapter against a real server: eventStore.containers.spec.ts.

import { StoreUnavailableError } from '../../../domain/shared/errors.ts';
import fc from 'fast-check';
import {
  AccessDeniedError,
  CancelledError,
  DeadlineExceededError,
  KurrentDBClient,
  NotLeaderError,
  StreamDeletedError,
  StreamNotFoundError,
  TimeoutError,
  UnavailableError,
  UnknownError,
  WrongExpectedVersionError,
} from '@kurrent/kurrentdb-client';
import { describe, expect, it } from 'vitest';
import { CodeTakenError, WrongExpectedRevisionError, type EventMetadata, type RecordedEvent } from '../../../domain/ports.ts';
import {
  CODE_MARKS_KEY,
  KurrentEventStore,
  actualRevision,
  claimDecision,
  claimStatus,
  codeMarksOf,
  codeStreamName,
  commitDistance,
  decodeCode,
  duplicateOf,
  encodeCode,
  expectedState,
  fromStoredMetadata,
  lastMark,
  openKurrentEventStore,
  packPosition,
  positionOf,
  readAllFilter,
  readStartAfter,
  redactConnectionString,
  refusedForSure,
  releaseRevision,
  reservationOf,
  toRecordedEvent,
  toStoredMetadata,
  translateError,
  unpackPosition,
  type Claim,
  type MarkedEvent,
} from '../../../infra/kurrentdb/eventStore.ts';

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
// Log positions are signed 64-bit on the server: commit stays below 2^63.
const logPosition = fc.bigInt({ min: 0n, max: (1n << 63n) - 1n });
const pair = fc.record({ commit: logPosition, prepare: u64 });

describe('positions', () => {
  it('pack and unpack round-trip', () => {
    fc.assert(
      fc.property(pair, (p) => {
        expect(unpackPosition(packPosition(p))).toEqual(p);
      }),
    );
  });

  it('packing keeps the (commit, prepare) order', () => {
    fc.assert(
      fc.property(pair, pair, (a, b) => {
        const pairOrder = a.commit === b.commit ? Math.sign(Number(a.prepare - b.prepare)) : Math.sign(Number(a.commit - b.commit));
        const packed = packPosition(a) - packPosition(b);
        expect(packed === 0n ? 0 : packed > 0n ? 1 : -1).toBe(pairOrder);
      }),
    );
  });

  it('refuses what is no position', () => {
    expect(() => packPosition({ commit: 1n, prepare: 1n << 64n })).toThrow(RangeError);
    expect(() => packPosition({ commit: -1n, prepare: 0n })).toThrow(RangeError);
    expect(() => unpackPosition(-1n)).toThrow(RangeError);
  });

  it('reads an unknown position as 0n', () => {
    expect(positionOf(undefined)).toBe(0n);
    expect(positionOf({ commit: (1n << 64n) - 1n, prepare: (1n << 64n) - 1n })).toBe(0n);
    expect(positionOf({ commit: 5n, prepare: 5n })).toBe((5n << 64n) + 5n);
  });

  it('starts a read of $all at the start or at the given position (the adapter drops it: reads are inclusive)', () => {
    expect(readStartAfter(0n)).toBe('start');
    expect(readStartAfter(packPosition({ commit: 700n, prepare: 650n }))).toEqual({ commit: 700n, prepare: 650n });
  });

  it('measures distance in bytes of commit position, 0 when not ahead', () => {
    const at = (commit: bigint, prepare = commit) => packPosition({ commit, prepare });
    expect(commitDistance(at(100n), at(350n))).toBe(250);
    expect(commitDistance(at(350n), at(100n))).toBe(0);
    expect(commitDistance(at(100n, 100n), at(100n, 180n))).toBe(0);
    expect(commitDistance(0n, at(4096n))).toBe(4096);
  });
});

describe('streams and filters', () => {
  const printableCode = fc.stringMatching(/^[!-~]{1,40}$/);

  it('encodes codes reversibly into stream-name-safe text', () => {
    fc.assert(
      fc.property(printableCode, (code) => {
        const encoded = encodeCode(code);
        expect(encoded).toMatch(/^[A-Za-z0-9_.~%-]+$/);
        expect(decodeCode(encoded)).toBe(code);
      }),
    );
    expect(encodeCode('AB-1_x.y~z')).toBe('AB-1_x.y~z');
    expect(encodeCode('a/b%c$d e')).toBe('a%2Fb%25c%24d%20e');
    expect(encodeCode('Ab')).not.toBe(encodeCode('AB'));
  });

  it('names reservation streams <scope>Code-<code>, outside the scope category itself', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][A-Za-z]{0,20}$/), printableCode, (scope, code) => {
        const name = codeStreamName({ scope, code });
        expect(name.slice(0, name.indexOf('-'))).toBe(`${scope}Code`);
        expect(name.startsWith(`${scope}-`)).toBe(false);
      }),
    );
    expect(codeStreamName({ scope: 'userGroup', code: 'ADMINS' })).toBe('userGroupCode-ADMINS');
  });

  it('filters readAll by category prefix, or leaves out only the system streams', () => {
    expect(readAllFilter(['userGroup', 'user'])).toMatchObject({ filterOn: 'streamName', prefixes: ['userGroup-', 'user-'] });
    const all = readAllFilter(undefined);
    expect(all).toMatchObject({ filterOn: 'streamName', regex: '^[^$]' });
    const regex = new RegExp('regex' in all ? all.regex : '');
    expect(regex.test('$stats-0.0.0.0:2113')).toBe(false);
    expect(regex.test('$ce-user')).toBe(false);
    expect(regex.test('user-1')).toBe(true);
  });

  it('maps expected and actual revisions', () => {
    expect(expectedState('no_stream')).toBe('no_stream');
    expect(expectedState(0)).toBe(0n);
    expect(expectedState(41)).toBe(41n);
    expect(actualRevision('no_stream')).toBe('no_stream');
    expect(actualRevision(-1n)).toBe('no_stream');
    expect(actualRevision(7n)).toBe(7);
  });
});

describe('metadata', () => {
  const text = fc.string({ maxLength: 20 });
  const metadata: fc.Arbitrary<EventMetadata> = fc.record(
    { actor: text, at: text, requestId: text, correlationId: text, causationId: text, idempotencyKey: text, requestHash: text },
    { requiredKeys: ['actor', 'at'] },
  );
  const names = fc.array(fc.stringMatching(/^[a-z]{1,8}Code-[A-Z0-9]{1,6}$/), { maxLength: 3 });

  it('round-trips through JSON with the schema version and the code marks, which readers do not see', () => {
    fc.assert(
      fc.property(metadata, fc.integer({ min: 1, max: 99 }), fc.option(fc.record({ claimed: names, released: names }), { nil: undefined }), (m, v, marks) => {
        const stored = JSON.parse(JSON.stringify(toStoredMetadata({ metadata: m, schemaVersion: v }, marks))) as unknown;
        const read = fromStoredMetadata(stored);
        expect(read.metadata).toEqual(m);
        expect(read.schemaVersion).toBe(v);
        expect(read.marks).toEqual(marks);
        expect(read.metadata).not.toHaveProperty(CODE_MARKS_KEY);
        expect(read.metadata).not.toHaveProperty('schemaVersion');
      }),
    );
  });

  it('reads events written by other tools as schema version 1', () => {
    expect(fromStoredMetadata(undefined)).toEqual({ metadata: { actor: '', at: '' }, schemaVersion: 1, marks: undefined });
    expect(fromStoredMetadata(new Uint8Array([1, 2]))).toEqual({ metadata: { actor: '', at: '' }, schemaVersion: 1, marks: undefined });
    expect(fromStoredMetadata({ actor: 'a' }).metadata).toEqual({ actor: 'a', at: '' });
  });

  it('marks only appends that claim or release', () => {
    expect(codeMarksOf({})).toBeUndefined();
    expect(codeMarksOf({ claim: [], release: [] })).toBeUndefined();
    expect(codeMarksOf({ claim: [{ scope: 's', code: 'Y' }], release: [{ scope: 's', code: 'X' }] })).toEqual({
      claimed: ['sCode-Y'],
      released: ['sCode-X'],
    });
  });

  it('turns a stored event into the port’s recorded event', () => {
    const { event, marks } = toRecordedEvent({
      streamId: 'user-1',
      id: 'e1',
      revision: 3n,
      type: 'UserRenamed',
      data: { name: 'b' },
      metadata: { actor: 'a', at: 't', schemaVersion: 2, [CODE_MARKS_KEY]: { claimed: ['userCode-B'], released: [] } },
      position: { commit: 900n, prepare: 900n },
    });
    expect(event).toEqual({
      id: 'e1',
      stream: 'user-1',
      revision: 3,
      position: packPosition({ commit: 900n, prepare: 900n }),
      type: 'UserRenamed',
      schemaVersion: 2,
      data: { name: 'b' },
      metadata: { actor: 'a', at: 't' },
    });
    expect(marks).toEqual({ claimed: ['userCode-B'], released: [] });
  });
});

describe('idempotent retries', () => {
  const stream = (ids: string[]) => ids.map((id, revision) => ({ id, revision, position: BigInt(100 * (revision + 1)) }));

  it('answers the first result when every id is already there in order, even after the stream moved on', () => {
    expect(duplicateOf(stream(['a', 'b', 'c']), ['a', 'b'])).toEqual({ revision: 1, position: 200n, duplicate: true });
    expect(duplicateOf(stream(['x', 'a', 'b']), ['a', 'b'])).toEqual({ revision: 2, position: 300n, duplicate: true });
    expect(duplicateOf(stream(['6f1c0a2e-0000-4000-8000-00000000abcd']), ['6F1C0A2E-0000-4000-8000-00000000ABCD'])).toMatchObject({ duplicate: true });
  });

  it('is no retry when no id is there, and a conflict when only some are', () => {
    expect(duplicateOf([], ['a'])).toBeUndefined();
    expect(duplicateOf(stream(['x', 'y']), ['a', 'b'])).toBeUndefined();
    expect(duplicateOf(stream(['a']), ['a', 'b'])).toBe('partial');
    expect(duplicateOf(stream(['a', 'x', 'b']), ['a', 'b'])).toBe('partial');
    expect(duplicateOf(stream(['x', 'b']), ['a', 'b'])).toBe('partial');
  });
});

describe('the claim protocol', () => {
  const codeStream = 'sCode-X';
  const now = Date.parse('2025-06-01T12:00:00Z');
  const claim = (over: Partial<Claim> = {}): Claim => ({
    kind: 'claimed',
    revision: 4n,
    stream: 's-holder',
    eventId: 'e-claim',
    at: new Date(now - 1_000).toISOString(),
    ...over,
  });
  const ev = (id: string, marks?: { claimed?: string[]; released?: string[] }): MarkedEvent => ({
    event: { id } as RecordedEvent,
    marks: marks === undefined ? undefined : { claimed: marks.claimed ?? [], released: marks.released ?? [] },
  });

  it('claims an empty stream with no_stream and a released one at its revision', () => {
    expect(claimDecision(undefined, 's-a')).toEqual({ kind: 'free', expected: 'no_stream' });
    expect(claimDecision({ kind: 'released', revision: 7n, stream: 's-b' }, 's-a')).toEqual({ kind: 'free', expected: 7n });
  });

  it('knows its own claim and defers another stream’s claim to the holder check', () => {
    expect(claimDecision(claim({ stream: 's-a' }), 's-a')).toEqual({ kind: 'ours' });
    expect(claimDecision(claim(), 's-a')).toEqual({ kind: 'held', claim: claim() });
  });

  it('holds a claim whose event the holder wrote and has not released since', () => {
    const holder = [ev('e0'), ev('e-claim', { claimed: [codeStream] }), ev('e2')];
    expect(claimStatus(claim(), codeStream, holder, now, 60_000)).toBe('valid');
    // also long after the grace period
    expect(claimStatus(claim(), codeStream, holder, now + 3_600_000, 60_000)).toBe('valid');
    expect(claimStatus(claim({ eventId: 'E-CLAIM' }), codeStream, holder, now, 60_000)).toBe('valid');
  });

  it('waits for a young claim whose holder has not written yet, and takes an old one over', () => {
    expect(claimStatus(claim(), codeStream, [], now, 60_000)).toBe('pending');
    expect(claimStatus(claim(), codeStream, [ev('other')], now + 120_000, 60_000)).toBe('stale');
    expect(claimStatus(claim({ at: 'not a date' }), codeStream, [], now, 60_000)).toBe('stale');
  });

  it('takes over a claim the holder released in its own stream (the CodeReleased append was lost)', () => {
    const released = [ev('e-claim', { claimed: [codeStream] }), ev('e1', { released: [codeStream], claimed: ['sCode-Y'] })];
    expect(claimStatus(claim(), codeStream, released, now, 60_000)).toBe('stale');
    const reclaimed = [...released, ev('e2', { claimed: [codeStream] })];
    expect(claimStatus(claim(), codeStream, reclaimed, now, 60_000)).toBe('valid');
  });

  it('reads the latest mark of a code, a release-and-claim in one append keeping it', () => {
    expect(lastMark([], codeStream)).toBeUndefined();
    expect(lastMark([ev('a', { claimed: [codeStream] }), ev('b')], codeStream)).toBe('claimed');
    expect(lastMark([ev('a', { claimed: [codeStream], released: [codeStream] })], codeStream)).toBe('claimed');
    expect(lastMark([ev('a', { claimed: [codeStream] }), ev('b', { released: [codeStream] })], codeStream)).toBe('released');
  });

  it('releases only its own claim, at the claim’s revision', () => {
    expect(releaseRevision(claim({ stream: 's-a' }), 's-a')).toBe(4n);
    expect(releaseRevision(claim(), 's-a')).toBeUndefined();
    expect(releaseRevision({ kind: 'released', revision: 5n, stream: 's-a' }, 's-a')).toBeUndefined();
    expect(releaseRevision(undefined, 's-a')).toBeUndefined();
  });

  it('reads reservation events and refuses strangers', () => {
    expect(reservationOf({ streamId: codeStream, type: 'CodeClaimed', revision: 0n, data: { stream: 's-1', eventId: 'e', at: 't' } })).toEqual({
      kind: 'claimed',
      revision: 0n,
      stream: 's-1',
      eventId: 'e',
      at: 't',
    });
    expect(reservationOf({ streamId: codeStream, type: 'CodeReleased', revision: 1n, data: { stream: 's-1' } })).toEqual({
      kind: 'released',
      revision: 1n,
      stream: 's-1',
    });
    expect(() => reservationOf({ streamId: codeStream, type: 'Other', revision: 2n, data: {} })).toThrow(/unexpected event Other/);
  });
});

describe('error translation', () => {
  it('turns WrongExpectedVersion into the port’s error, with the request’s expectation when given', () => {
    const wev = new WrongExpectedVersionError(undefined, { streamName: 's-1', expected: 3n, current: 5n });
    const e = translateError(wev);
    expect(e).toBeInstanceOf(WrongExpectedRevisionError);
    expect(e).toMatchObject({ stream: 's-1', expected: 3, actual: 5 });
    expect(translateError(wev, { stream: 's-1', expected: 'no_stream' })).toMatchObject({ expected: 'no_stream', actual: 5 });
    const missing = new WrongExpectedVersionError(undefined, { streamName: 's-2', expected: 0n, current: 'no_stream' });
    expect(translateError(missing)).toMatchObject({ stream: 's-2', expected: 0, actual: 'no_stream' });
    const onNoStream = new WrongExpectedVersionError(undefined, { streamName: 's-3', expected: 'no_stream', current: 0n });
    expect(translateError(onNoStream)).toMatchObject({ expected: 'no_stream', actual: 0 });
  });

  it('turns an unreachable, slow or changing server into a 503 with the error body', () => {
    const notLeader = new NotLeaderError({
      message: 'not leader',
      metadata: { 'leader-endpoint-host': 'node2', 'leader-endpoint-port': '2113' },
    } as unknown as ConstructorParameters<typeof NotLeaderError>[0]);
    for (const cause of [new UnavailableError(), new DeadlineExceededError(), new CancelledError(), new TimeoutError(), notLeader]) {
      const e = translateError(cause);
      expect(e).toBeInstanceOf(StoreUnavailableError);
      expect(e).toMatchObject({ code: 'EVENT_STORE.UNAVAILABLE', status: 'SERVICE_UNAVAILABLE', httpStatus: 503, cause });
    }
  });

  it('converts raw gRPC errors first (appends report a refused connection that way)', () => {
    const raw = Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14, details: 'No connection established' });
    expect(translateError(raw)).toBeInstanceOf(StoreUnavailableError);
    const deadline = Object.assign(new Error('4 DEADLINE_EXCEEDED'), { code: 4, details: 'Deadline exceeded' });
    expect(translateError(deadline)).toBeInstanceOf(StoreUnavailableError);
  });

  it('treats the Rust reader’s deadline and closed-connection reports as unavailability, other unknowns not', () => {
    expect(translateError(new UnknownError(undefined, 'Deadline exceeded'))).toBeInstanceOf(StoreUnavailableError);
    expect(translateError(new UnknownError(undefined, 'Connection is closed.'))).toBeInstanceOf(StoreUnavailableError);
    const other = new UnknownError(undefined, 'something else');
    expect(translateError(other)).toBe(other);
  });

  it('leaves other errors as they are', () => {
    const notFound = new StreamNotFoundError(undefined, 's-1');
    expect(translateError(notFound)).toBe(notFound);
    const taken = new CodeTakenError('s', 'X');
    expect(translateError(taken)).toBe(taken);
    const plain = new Error('boom');
    expect(translateError(plain)).toBe(plain);
    const odd = Object.assign(new Error('odd'), { code: 99 });
    expect(translateError(odd)).toBe(odd);
    expect(translateError('text')).toEqual(new Error('text'));
  });

  it('gives claims back only when the server certainly refused the append', () => {
    expect(refusedForSure(new WrongExpectedRevisionError('s-1', 0, 1))).toBe(true);
    expect(refusedForSure(new StreamDeletedError(undefined, 's-1'))).toBe(true);
    expect(refusedForSure(new AccessDeniedError())).toBe(true);
    // the write may have committed before the answer was lost
    expect(refusedForSure(translateError(new DeadlineExceededError()))).toBe(false);
    expect(refusedForSure(translateError(new UnavailableError()))).toBe(false);
    expect(refusedForSure(new UnknownError(undefined, 'something else'))).toBe(false);
    expect(refusedForSure(new Error('boom'))).toBe(false);
  });

  it('redacts the password of a connection string', () => {
    expect(redactConnectionString('kurrentdb://admin:changeit@db:2113?tls=true')).toBe('kurrentdb://admin:***@db:2113?tls=true');
    expect(redactConnectionString('kurrentdb://db:2113?tls=false')).toBe('kurrentdb://db:2113?tls=false');
  });
});

describe('without a server (a closed local port, through the real client)', () => {
  const nowhere = 'kurrentdb://admin:secret@127.0.0.1:1?tls=false';

  it('fails to open fast, saying where and why, without the password', async () => {
    const started = Date.now();
    const opening = openKurrentEventStore(nowhere, { connectTimeoutMs: 5_000 });
    await expect(opening).rejects.toThrow(/KurrentDB at kurrentdb:\/\/admin:\*\*\*@127\.0\.0\.1:1\?tls=false does not answer/);
    await expect(opening).rejects.not.toThrow(/secret/);
    expect(Date.now() - started).toBeLessThan(6_000);
    await expect(openKurrentEventStore('nonsense://x')).rejects.toThrow(/not a KurrentDB connection string/);
  });

  it('answers reads and appends with StoreUnavailableError, and survives a subscription that cannot connect', async () => {
    const store = new KurrentEventStore(KurrentDBClient.connectionString('kurrentdb://127.0.0.1:1?tls=false'), { resubscribeMs: 50 });
    const seen: bigint[] = [];
    const off = store.onAppended((p) => seen.push(p));
    await expect(store.readStream('s-1')).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.readAll({ after: 0n, limit: 10, categories: ['s'] })).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.headPosition()).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(store.findCode({ scope: 's', code: 'X' })).rejects.toBeInstanceOf(StoreUnavailableError);
    const event = { id: crypto.randomUUID(), type: 'T', schemaVersion: 1, data: {}, metadata: { actor: 'a', at: 't' } };
    await expect(store.append({ stream: 's-1', expected: 'no_stream', events: [event] })).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(
      store.append({ stream: 's-1', expected: 'no_stream', events: [event], claim: [{ scope: 's', code: 'X' }] }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    off();
    expect(seen).toEqual([]);
    await store.close();
    await expect(store.append({ stream: 's-1', expected: 'no_stream', events: [event] })).rejects.toThrow(/closed/);
  });
});
