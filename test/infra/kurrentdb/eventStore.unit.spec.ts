// The KurrentDB adapter's pure parts (positions, streams and filters, metadata, idempotent retries,
// the claim protocol's decisions, error translation) on the client's real error classes, and how
// the adapter fails, through the real client, when no server answers or a server fails every call.
// The claim protocol under interleavings: claimProtocol.unit.spec.ts. The adapter against a real
// server: eventStore.containers.spec.ts.

import { status as grpcStatus } from '@grpc/grpc-js';
import { handleCommand } from '../../../application/commands.ts';
import type { CommandContext, CommandSpec } from '../../../domain/shared/commandHandler.ts';
import { runtimeOf } from '../../support/runtime.ts';
import { StoreUnavailableError } from '../../../domain/shared/errors.ts';
import fc from 'fast-check';
import {
  AccessDeniedError,
  CancelledError,
  DeadlineExceededError,
  KurrentDBClient,
  NO_STREAM,
  NotLeaderError,
  StreamDeletedError,
  StreamNotFoundError,
  TimeoutError,
  UnavailableError,
  UnknownError,
  WrongExpectedVersionError,
  type Filter,
} from '@kurrent/kurrentdb-client';
import { describe, expect, it } from 'vitest';
import {
  CodeTakenError,
  WrongExpectedRevisionError,
  type EventMetadata,
  type NewEvent,
  type RecordedEvent,
} from '../../../domain/ports.ts';
import {
  CLAIM_GRACE_MS,
  claimDecision,
  claimStatus,
  codeMarksOf,
  codeStreamName,
  decodeCode,
  encodeCode,
  holdOf,
  lastMark,
  releaseRevision,
  voidsAny,
  isAdapterEvent,
  generationStream,
  releasedCodes,
  reservationOf,
  type Claim,
  type Reservation,
  type ReservationStream,
} from '../../../infra/kurrentdb/codeClaims.ts';
import { refusedAppend, refusedForSure, translateError } from '../../../infra/kurrentdb/errors.ts';
import {
  CLIENT_DEFAULT_DEADLINE_MS,
  KurrentEventStore,
  defaultDeadlineOf,
  openKurrentEventStore,
} from '../../../infra/kurrentdb/eventStore.ts';
import {
  CODE_MARKS_KEY,
  duplicateOf,
  fromStoredMetadata,
  toRecordedEvent,
  toStoredMetadata,
  type MarkedEvent,
} from '../../../infra/kurrentdb/metadata.ts';
import { commitDistance, packPosition, positionOf, readStartAfter, unpackPosition } from '../../../infra/kurrentdb/positions.ts';
import { actualRevision, expectedState, readAllFilter } from '../../../infra/kurrentdb/streams.ts';
import { StandInFault, startGrpcStandIn } from './grpcStandIn.ts';

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

  it('reads a category’s streams, not those of a category sharing its start nor its reservation streams', () => {
    // What the server keeps for a stream-name filter: names that start with one of the prefixes, or
    // that the regex matches.
    const keeps = (f: Filter, stream: string) =>
      'prefixes' in f ? f.prefixes.some((p) => stream.startsWith(p)) : new RegExp(f.regex).test(stream);
    const user = readAllFilter(['user']);
    expect(keeps(user, 'user-6f1c0a2e')).toBe(true);
    expect(keeps(user, 'userGroup-6f1c0a2e')).toBe(false);
    expect(keeps(user, 'userCode-ADMIN')).toBe(false);
    expect(keeps(user, 'users-1')).toBe(false);
    expect(keeps(user, '$ce-user')).toBe(false);
    const both = readAllFilter(['userGroup', 'user']);
    expect(['user-1', 'userGroup-1', 'userGroupCode-A', 'userCode-A'].filter((s) => keeps(both, s))).toEqual(['user-1', 'userGroup-1']);
    const category = fc.stringMatching(/^[a-z][A-Za-z]{0,10}$/);
    fc.assert(
      fc.property(fc.uniqueArray(category, { minLength: 1, maxLength: 4 }), category, fc.uuid(), (categories, c, id) => {
        expect(keeps(readAllFilter(categories), `${c}-${id}`)).toBe(categories.includes(c));
      }),
    );
  });

  it('reads every stream but the server’s own when no category is given (the adapter’s own events are left out after the read)', () => {
    const all = readAllFilter(undefined);
    const keeps = (stream: string) => ('regex' in all ? new RegExp(all.regex).test(stream) : false);
    expect(['$stats-0.0.0.0:2113', '$ce-user', '$$user-1', '$et-UserCreated'].filter(keeps)).toEqual([]);
    expect(['user-1', 'userGroupType-6f1c', 'a', 'codes-1', 'userCodeless-1', 'promoCode-6f1c'].every(keeps)).toBe(true);
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
      fc.property(
        metadata,
        fc.integer({ min: 1, max: 99 }),
        fc.option(fc.record({ claimed: names, released: names }), { nil: undefined }),
        (m, v, marks) => {
          const stored = JSON.parse(JSON.stringify(toStoredMetadata({ metadata: m, schemaVersion: v }, marks))) as unknown;
          const read = fromStoredMetadata(stored);
          expect(read.metadata).toEqual(m);
          expect(read.schemaVersion).toBe(v);
          expect(read.marks).toEqual(marks);
          expect(read.metadata).not.toHaveProperty(CODE_MARKS_KEY);
          expect(read.metadata).not.toHaveProperty('schemaVersion');
        },
      ),
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

  it('does not release a code the same append claims (a release-and-claim keeps it)', () => {
    const request = {
      claim: [{ scope: 's', code: 'X' }],
      release: [
        { scope: 's', code: 'X' },
        { scope: 's', code: 'Z' },
      ],
    };
    expect(releasedCodes(request)).toEqual([{ scope: 's', code: 'Z' }]);
    expect(codeMarksOf(request)).toEqual({ claimed: ['sCode-X'], released: ['sCode-Z'] });
    expect(codeMarksOf({ claim: [{ scope: 's', code: 'X' }], release: [{ scope: 's', code: 'X' }] })).toEqual({
      claimed: ['sCode-X'],
      released: [],
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
    expect(duplicateOf(stream(['6f1c0a2e-0000-4000-8000-00000000abcd']), ['6F1C0A2E-0000-4000-8000-00000000ABCD'])).toMatchObject({
      duplicate: true,
    });
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
  const grace = CLAIM_GRACE_MS;
  const claim = (over: Partial<Claim> = {}): Claim => ({
    kind: 'claimed',
    stream: 's-holder',
    eventId: 'e-claim',
    at: now - 1_000,
    claimStream: codeStream,
    claimRevision: 3n,
    ...over,
  });
  const ev = (id: string, marks?: { claimed?: string[]; released?: string[] }): MarkedEvent => ({
    event: { id } as RecordedEvent,
    marks: marks === undefined ? undefined : { claimed: marks.claimed ?? [], released: marks.released ?? [] },
  });

  const at4 = (last: Reservation | undefined): ReservationStream => ({ name: codeStream, last, revision: 4n });
  const fence = (id: string, claimRevision = 3n, stream = codeStream): MarkedEvent => ({
    event: { id } as RecordedEvent,
    marks: undefined,
    fence: { codeStream: stream, claimRevision },
  });

  it('claims an empty stream with no_stream, and its own release or a stream of other events at its revision', () => {
    expect(claimDecision({ name: codeStream, last: undefined, revision: NO_STREAM }, 's-a')).toEqual({
      kind: 'free',
      expected: 'no_stream',
    });
    expect(claimDecision(at4({ kind: 'released', stream: 's-a' }), 's-a')).toEqual({ kind: 'free', expected: 4n });
    expect(claimDecision(at4(undefined), 's-a')).toEqual({ kind: 'free', expected: 4n });
  });

  it('claims its own claim again at its revision, never sharing it, and defers another stream’s claim or release to that stream', () => {
    expect(claimDecision(at4(claim({ stream: 's-a' })), 's-a')).toEqual({ kind: 'ours', expected: 4n });
    expect(claimDecision(at4(claim()), 's-a')).toEqual({ kind: 'held', last: claim(), expected: 4n });
    const released = { kind: 'released', stream: 's-b' } as const;
    expect(claimDecision(at4(released), 's-a')).toEqual({ kind: 'held', last: released, expected: 4n });
  });

  it('holds a claim whose event the holder wrote and has not released since', () => {
    const holder = [ev('e0'), ev('e-claim', { claimed: [codeStream] }), ev('e2')];
    expect(claimStatus(claim(), codeStream, holder, now, grace)).toBe('valid');
    // also long after the grace period
    expect(claimStatus(claim(), codeStream, holder, now + 3_600_000, grace)).toBe('valid');
    expect(claimStatus(claim({ eventId: 'E-CLAIM' }), codeStream, holder, now, grace)).toBe('valid');
  });

  it('waits for a young claim whose holder has not written yet, and fences an expired one before taking it over', () => {
    expect(claimStatus(claim(), codeStream, [], now, grace)).toBe('pending');
    expect(claimStatus(claim(), codeStream, [ev('other')], now + grace + 1_000, grace)).toBe('expired');
    expect(holdOf(claim(), codeStream, [ev('other')], now + grace + 1_000, grace)).toBe('fence');
    expect(claimStatus(claim({ at: Number.NaN }), codeStream, [], now, grace)).toBe('expired');
  });

  it('takes over at once a claim a fence voids, and only that claim', () => {
    expect(claimStatus(claim(), codeStream, [ev('e0'), fence('f')], now, grace)).toBe('stale');
    expect(holdOf(claim(), codeStream, [fence('f')], now, grace)).toBe('free');
    // a fence of another claim (another revision, another generation of the code) voids nothing here
    expect(claimStatus(claim(), codeStream, [fence('f', 2n)], now, grace)).toBe('pending');
    expect(claimStatus(claim(), codeStream, [fence('f', 3n, `${codeStream}!1`)], now, grace)).toBe('pending');
    // the holder's marks still decide: a fence never voids a code the holder claimed by another event
    expect(claimStatus(claim(), codeStream, [ev('e0', { claimed: [codeStream] }), fence('f')], now, grace)).toBe('valid');
    expect(voidsAny([ev('e0'), fence('f')], [{ claimStream: codeStream, claimRevision: 3n }])).toBe(true);
    expect(voidsAny([ev('e0'), fence('f')], [{ claimStream: codeStream, claimRevision: 4n }])).toBe(false);
  });

  it('takes over at once a claim whose event landed without marking the code (another request’s event under the same id)', () => {
    const otherBody = [ev('e-claim', { claimed: ['sCode-Y'] })];
    expect(claimStatus(claim(), codeStream, otherBody, now, grace)).toBe('stale');
    expect(claimStatus(claim(), codeStream, [ev('e-claim')], now, grace)).toBe('stale');
    expect(holdOf(claim(), codeStream, otherBody, now, grace)).toBe('free');
    // … unless an earlier event of the holder claimed it and none released it since: the holder's.
    const heldBefore = [ev('e0', { claimed: [codeStream] }), ...otherBody];
    expect(claimStatus(claim(), codeStream, heldBefore, now + 3_600_000, grace)).toBe('valid');
    const releasedBefore = [ev('e0', { claimed: [codeStream] }), ev('e1', { released: [codeStream] }), ...otherBody];
    expect(claimStatus(claim(), codeStream, releasedBefore, now, grace)).toBe('stale');
  });

  it('holds a claim whose event is not in the holder’s stream when the holder’s own marks claim the code', () => {
    // Another append of the holder claimed the code (a claim again, or a claim shared before claims were not).
    const holder = [ev('e-other', { claimed: [codeStream] })];
    expect(claimStatus(claim(), codeStream, holder, now + 3_600_000, grace)).toBe('valid');
    const releasedSince = [...holder, ev('e-later', { released: [codeStream] })];
    expect(claimStatus(claim(), codeStream, releasedSince, now, grace)).toBe('pending');
    expect(claimStatus(claim(), codeStream, releasedSince, now + 3_600_000, grace)).toBe('expired');
  });

  it('takes over a claim the holder released in its own stream (the CodeReleased append was lost)', () => {
    const released = [ev('e-claim', { claimed: [codeStream] }), ev('e1', { released: [codeStream], claimed: ['sCode-Y'] })];
    expect(claimStatus(claim(), codeStream, released, now, grace)).toBe('stale');
    const reclaimed = [...released, ev('e2', { claimed: [codeStream] })];
    expect(claimStatus(claim(), codeStream, reclaimed, now, grace)).toBe('valid');
  });

  it('frees a released code unless the releaser’s own marks still claim it', () => {
    const release = { kind: 'released', stream: 's-holder' } as const;
    expect(holdOf(release, codeStream, [], now, grace)).toBe('free');
    expect(holdOf(release, codeStream, [ev('a', { claimed: [codeStream] }), ev('b', { released: [codeStream] })], now, grace)).toBe('free');
    expect(holdOf(release, codeStream, [ev('a', { claimed: [codeStream] })], now, grace)).toBe('held');
    expect(holdOf(claim(), codeStream, [], now, grace)).toBe('pending');
    expect(holdOf(claim(), codeStream, [], now + grace + 1, grace)).toBe('fence');
    expect(holdOf(claim(), codeStream, [ev('e-claim', { claimed: [codeStream] })], now, grace)).toBe('held');
  });

  it('reads the latest mark of a code, a release-and-claim in one append keeping it', () => {
    expect(lastMark([], codeStream)).toBeUndefined();
    expect(lastMark([ev('a', { claimed: [codeStream] }), ev('b')], codeStream)).toBe('claimed');
    expect(lastMark([ev('a', { claimed: [codeStream], released: [codeStream] })], codeStream)).toBe('claimed');
    expect(lastMark([ev('a', { claimed: [codeStream] }), ev('b', { released: [codeStream] })], codeStream)).toBe('released');
  });

  it('releases only its own claim whose event is at the revision the claim names, before the release', () => {
    const ours = claim({ stream: 's-a', landsAt: 0 });
    const claiming = { id: 'e-claim', revision: 0 };
    expect(releaseRevision(at4(ours), 's-a', claiming, 1)).toBe(4n);
    expect(releaseRevision(at4(ours), 's-a', { id: 'E-CLAIM', revision: 0 }, 1)).toBe(4n);
    // a claim again by a later event, or by one not (yet) in the stream, wins over the release
    expect(releaseRevision(at4(ours), 's-a', { id: 'e-claim', revision: 2 }, 1)).toBeUndefined();
    expect(releaseRevision(at4(ours), 's-a', { id: 'another', revision: 0 }, 1)).toBeUndefined();
    expect(releaseRevision(at4(ours), 's-a', undefined, 1)).toBeUndefined();
    expect(releaseRevision(at4(claim()), 's-a', claiming, 1)).toBeUndefined();
    expect(releaseRevision(at4({ kind: 'released', stream: 's-a' }), 's-a', claiming, 1)).toBeUndefined();
    expect(releaseRevision(at4(undefined), 's-a', claiming, 1)).toBeUndefined();
    expect(releaseRevision({ name: codeStream, last: undefined, revision: NO_STREAM }, 's-a', claiming, 1)).toBeUndefined();
  });

  it('reads reservation events, a claim’s time from the server’s, and passes over events of other types', () => {
    const created = new Date(now);
    const at = { streamId: codeStream, revision: 7n };
    const data = { stream: 's-1', eventId: 'e', revision: 3, at: new Date(now - 3_600_000).toISOString() };
    expect(reservationOf({ ...at, type: 'CodeClaimed', data, created })).toEqual({
      kind: 'claimed',
      stream: 's-1',
      eventId: 'e',
      at: now,
      claimStream: codeStream,
      claimRevision: 7n,
      landsAt: 3,
    });
    // The claimant's clock only when the server's time is missing; claims of earlier adapters name no revision.
    expect(reservationOf({ ...at, type: 'CodeClaimed', data })).toMatchObject({ at: now - 3_600_000 });
    expect(reservationOf({ ...at, type: 'CodeClaimed', data, created: new Date(Number.NaN) })).toMatchObject({ at: now - 3_600_000 });
    expect(reservationOf({ ...at, type: 'CodeClaimed', data: { stream: 's-1', eventId: 'e' } })).not.toHaveProperty('landsAt');
    expect(reservationOf({ ...at, type: 'CodeReleased', data: { stream: 's-1' } })).toEqual({ kind: 'released', stream: 's-1' });
    expect(reservationOf({ ...at, type: 'Other', data: { stream: 's-1' } })).toBeUndefined();
  });

  it('hides the adapter’s own events from readers, not a record category ending in Code', () => {
    expect(isAdapterEvent({ type: 'CodeClaimed', stream: 'userCode-X' })).toBe(true);
    expect(isAdapterEvent({ type: 'CodeReleased', stream: 'userCode-X!1' })).toBe(true);
    expect(isAdapterEvent({ type: 'adapter:CodeClaimVoided', stream: 'user-1' })).toBe(true);
    expect(isAdapterEvent({ type: 'PromoCodeCreated', stream: 'promoCode-6f1c0a2e' })).toBe(false);
    expect(isAdapterEvent({ type: 'CodeClaimed', stream: 'user-1' })).toBe(false);
    expect(generationStream('userCode-X', 0)).toBe('userCode-X');
    expect(generationStream('userCode-X', 2)).toBe('userCode-X!2');
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
    // gRPC UNKNOWN: the Rust reader reports it as a server-side error, gRPC-js leaves it unknown
    const unknown = Object.assign(new Error('2 UNKNOWN: Server Is Not Ready'), { code: 2, details: 'Server Is Not Ready' });
    expect(translateError(unknown)).toBeInstanceOf(StoreUnavailableError);
    const invalid = Object.assign(new Error('3 INVALID_ARGUMENT: bad'), { code: 3, details: 'bad' });
    expect(translateError(invalid)).not.toBeInstanceOf(StoreUnavailableError);
  });

  it('treats what the Rust reader reports of an unavailable, slow or failing server as unavailability, other unknowns not', () => {
    // Display texts of KurrentDB-Client-Rust's Error, which the bridge passes on as UnknownError.
    const transient = [
      // Error::ServerError (gRPC Unavailable, Internal, Unknown, DataLoss) with tonic up to 0.13, as the bridge has it
      'Server-side error: status: Unavailable, message: "Server Is Not Ready", details: [], metadata: MetadataMap { headers: {} }',
      'Server-side error: status: Internal, message: "Exception was thrown by handler.", details: [], metadata: MetadataMap { headers: {} }',
      'Server-side error: status: Unknown, message: "h2 protocol error: error reading a body from connection", details: [], metadata: MetadataMap { headers: {} }',
      'Server-side error: status: DataLoss, message: "", details: [], metadata: MetadataMap { headers: {} }',
      // … and with later tonic versions (the code printed as its description)
      'Server-side error: code: \'The service is currently unavailable\', message: "Server Too Busy"',
      // Error::Grpc for a cancelled call, as the bridge reports it for a server answering gRPC status 1
      'Unmapped gRPC error: code: The operation was cancelled, message: Server Is Not Ready.',
      'Deadline exceeded',
      'Connection is closed.',
      'gRPC connection error: Max discovery attempt count reached. count: 10',
    ];
    for (const message of transient) {
      const cause = new UnknownError(undefined, message);
      expect(translateError(cause), message).toBeInstanceOf(StoreUnavailableError);
    }
    for (const message of ['Unmapped gRPC error: code: Client specified an invalid argument, message: bad filter.', 'something else']) {
      const other = new UnknownError(undefined, message);
      expect(translateError(other), message).toBe(other);
    }
  });

  it('makes a conflict answered as success: false (throwOnAppendFailure=false) the conflict the client throws otherwise', () => {
    const onMissing = refusedAppend('s-1', 0n, NO_STREAM);
    expect(translateError(onMissing)).toMatchObject({
      name: 'WrongExpectedRevisionError',
      stream: 's-1',
      expected: 0,
      actual: 'no_stream',
    });
    const moved = refusedAppend('s-1', 'no_stream', 3n);
    expect(translateError(moved)).toMatchObject({ expected: 'no_stream', actual: 3 });
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

  it('reads the client’s default deadline from a connection string as the client does', () => {
    expect(defaultDeadlineOf('kurrentdb://db:2113?tls=false')).toBe(CLIENT_DEFAULT_DEADLINE_MS);
    expect(defaultDeadlineOf('kurrentdb://db:2113?tls=false&defaultDeadline=2500')).toBe(2_500);
    expect(defaultDeadlineOf('kurrentdb://db:2113?Default_Deadline=30000&tls=false')).toBe(30_000);
    expect(defaultDeadlineOf('kurrentdb://db:2113?defaultDeadline=0')).toBe(CLIENT_DEFAULT_DEADLINE_MS);
  });
});

/** Reads, the head, a code lookup and an append all answer StoreUnavailableError; returns the
 * event it tried to append. */
async function expectEveryCallUnavailable(store: KurrentEventStore): Promise<NewEvent> {
  await expect(store.readStream('s-1')).rejects.toBeInstanceOf(StoreUnavailableError);
  await expect(store.readAll({ after: 0n, limit: 10, categories: ['s'] })).rejects.toBeInstanceOf(StoreUnavailableError);
  await expect(store.headPosition()).rejects.toBeInstanceOf(StoreUnavailableError);
  await expect(store.findCode({ scope: 's', code: 'X' })).rejects.toBeInstanceOf(StoreUnavailableError);
  const event: NewEvent = { id: crypto.randomUUID(), type: 'T', schemaVersion: 1, data: {}, metadata: { actor: 'a', at: 't' } };
  await expect(store.append({ stream: 's-1', expected: 'no_stream', events: [event] })).rejects.toBeInstanceOf(StoreUnavailableError);
  return event;
}

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
    const event = await expectEveryCallUnavailable(store);
    await expect(
      store.append({ stream: 's-1', expected: 'no_stream', events: [event], claim: [{ scope: 's', code: 'X' }] }),
    ).rejects.toBeInstanceOf(StoreUnavailableError);
    off();
    expect(seen).toEqual([]);
    await store.close();
    await expect(store.append({ stream: 's-1', expected: 'no_stream', events: [event] })).rejects.toThrow(/closed/);
  });
});

describe('opening (the gRPC stand-in, through the real client)', () => {
  it('refuses throwOnAppendFailure=false, under which the client reports every conflict at revision 1', async () => {
    const server = await startGrpcStandIn();
    try {
      await expect(openKurrentEventStore(server.url('throwOnAppendFailure=false'))).rejects.toThrow(
        /throwOnAppendFailure=false .*remove the setting/,
      );
      await expect(openKurrentEventStore(server.url('Throw_On_Append_Failure=FALSE'))).rejects.toThrow(/throwOnAppendFailure=false/);
      const store = await openKurrentEventStore(server.url('throwOnAppendFailure=true'));
      await store.close();
    } finally {
      await server.close();
    }
  });

  it('says that the user may not read $all (it needs $admins or $ops), not that the server does not answer', async () => {
    const server = await startGrpcStandIn({ allowsAll: false });
    try {
      const opening = openKurrentEventStore(server.url());
      await expect(opening).rejects.toThrow(/refuses its user a read of \$all.*\$admins or \$ops/);
      await expect(opening).rejects.not.toThrow(/does not answer/);
    } finally {
      await server.close();
    }
  });
});

describe('against a server that fails every call with a gRPC status (the gRPC stand-in, through the real client)', () => {
  const statuses = [
    { status: grpcStatus.UNAVAILABLE, name: 'Unavailable' },
    { status: grpcStatus.INTERNAL, name: 'Internal' },
    { status: grpcStatus.UNKNOWN, name: 'Unknown' },
    { status: grpcStatus.DATA_LOSS, name: 'DataLoss' },
    { status: grpcStatus.CANCELLED, name: 'Cancelled' },
    { status: grpcStatus.DEADLINE_EXCEEDED, name: 'DeadlineExceeded' },
  ];

  it.each(statuses)('answers reads and appends with StoreUnavailableError for status $status ($name)', async ({ status }) => {
    const server = await startGrpcStandIn({ failEveryCall: { status, message: 'Server Is Not Ready' } });
    const store = new KurrentEventStore(KurrentDBClient.connectionString(server.url()));
    try {
      await expectEveryCallUnavailable(store);
    } finally {
      await store.close();
      await server.close();
    }
  });

  it('leaves a call the server refuses as invalid as it is (a 500: retrying does not help)', async () => {
    const server = await startGrpcStandIn({ failEveryCall: { status: grpcStatus.INVALID_ARGUMENT, message: 'bad filter' } });
    const store = new KurrentEventStore(KurrentDBClient.connectionString(server.url()));
    try {
      const read = store.readStream('s-1');
      await expect(read).rejects.toThrow(/invalid argument/);
      await expect(read).rejects.not.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await store.close();
      await server.close();
    }
  });
});

describe('an append the server refuses on the batch-append path (the gRPC stand-in, through the real client)', () => {
  const anEvent = (): NewEvent => ({ id: crypto.randomUUID(), type: 'T', schemaVersion: 1, data: {}, metadata: { actor: 'a', at: 't' } });

  it.each([
    { kind: 'busy', retryAfter: 1 },
    { kind: 'notReady', retryAfter: 1 },
    { kind: 'timeout', retryAfter: 1 },
    { kind: 'unknown', retryAfter: undefined },
  ] as const)(
    'answers $kind with 503 (Retry-After $retryAfter), not 500, and keeps the claims for the holder check',
    async ({ kind, retryAfter }) => {
      const server = await startGrpcStandIn();
      const store = new KurrentEventStore(KurrentDBClient.connectionString(server.url()));
      try {
        const event = anEvent();
        const held = server.model.hold((call) => call.stream === 's-1');
        void held.reached.then(() => {
          held.fail(new StandInFault(kind));
        });
        const failed = store.append({ stream: 's-1', expected: 'no_stream', events: [event], claim: [{ scope: 's', code: 'X' }] });
        await expect(failed).rejects.toBeInstanceOf(StoreUnavailableError);
        await expect(failed).rejects.toMatchObject({ httpStatus: 503, retryAfterSeconds: retryAfter });
        // The server may still commit a timed-out append: its claim stays, for the holder check.
        expect(server.model.events(codeStreamName({ scope: 's', code: 'X' })).map((e) => e.type)).toEqual(['CodeClaimed']);
      } finally {
        await store.close();
        await server.close();
      }
    },
  );

  const big = (kib: number): NewEvent => ({ ...anEvent(), data: { text: 'x'.repeat(kib * 1024) } });
  const X = { scope: 's', code: 'X' };

  it('refuses a change whose whole append is over EVENTSTORE_MAX_APPEND_BYTES with a 413 naming it, before any claim', async () => {
    const server = await startGrpcStandIn({ maxAppendSize: 64 * 1024 * 1024 });
    const store = new KurrentEventStore(KurrentDBClient.connectionString(server.url()));
    try {
      const failed = store.append({ stream: 's-1', expected: 'no_stream', events: [big(600), big(600)], claim: [X] });
      await expect(failed).rejects.toMatchObject({
        httpStatus: 413,
        code: 'EVENT_STORE.APPEND_TOO_LARGE',
        limit: 1024 * 1024,
        setting: 'EVENTSTORE_MAX_APPEND_BYTES',
      });
      await expect(failed).rejects.toThrow(/EVENTSTORE_MAX_APPEND_BYTES: 1048576 bytes/);
      expect(server.model.appends).toEqual([]);
      // Counted as the server counts: under the limit by the type's length twice is taken.
      await store.append({ stream: 's-1', expected: 'no_stream', events: [big(600), big(300)] });
      // A command answers the resource's TOO_LARGE.
      const spec: CommandSpec<number> = {
        resource: 'USER',
        stream: 's-2',
        initial: () => 0,
        evolve: (n) => n + 1,
        decide: () => ({ events: [big(600), big(600)] }),
        schemaVersion: 1,
      };
      const ctx: CommandContext = { actor: 'a', now: new Date(), newId: () => crypto.randomUUID() };
      await expect(handleCommand(spec, ctx, runtimeOf(store))).rejects.toMatchObject({
        code: 'USER.TOO_LARGE',
        httpStatus: 413,
        message: expect.stringMatching(/EVENTSTORE_MAX_APPEND_BYTES/) as string,
      });
    } finally {
      await store.close();
      await server.close();
    }
  });

  it.each([
    {
      refusal: 'MaxAppendSize',
      options: { maxAppendSize: 512 * 1024 },
      events: () => [big(300), big(300)],
      message: /KurrentDB's MaxAppendSize: 524288 bytes/,
    },
    {
      refusal: 'MaxAppendEventSize',
      options: { maxAppendEventSize: 256 * 1024 },
      events: () => [big(300)],
      message: /KurrentDB's MaxAppendEventSize/,
    },
  ])('answers the server’s refusal by its $refusal with a 413 and gives the claims back', async ({ options, events, message }) => {
    const server = await startGrpcStandIn(options);
    const store = new KurrentEventStore(KurrentDBClient.connectionString(server.url()), { maxAppendBytes: 64 * 1024 * 1024 });
    try {
      const failed = store.append({ stream: 's-1', expected: 'no_stream', events: events(), claim: [X] });
      await expect(failed).rejects.toMatchObject({ httpStatus: 413, code: 'EVENT_STORE.APPEND_TOO_LARGE' });
      await expect(failed).rejects.toThrow(message);
      expect(server.model.events(codeStreamName(X)).map((e) => e.type)).toEqual(['CodeClaimed', 'CodeReleased']);
      expect(server.model.events('s-1')).toEqual([]);
    } finally {
      await store.close();
      await server.close();
    }
  });

  it.each([
    { kind: 'busy', message: /Server Is Too Busy/ },
    { kind: 'notReady', message: /Server Is Not Ready/ },
  ] as const)('answers a read the server refuses as $kind with 503', async ({ kind }) => {
    const server = await startGrpcStandIn();
    const store = new KurrentEventStore(KurrentDBClient.connectionString(server.url()));
    try {
      const held = server.model.holdRead((stream) => stream === 's-1');
      void held.reached.then(() => {
        held.fail(new StandInFault(kind));
      });
      await expect(store.readStream('s-1')).rejects.toMatchObject({ httpStatus: 503, retryAfterSeconds: 1 });
    } finally {
      await store.close();
      await server.close();
    }
  });
});
