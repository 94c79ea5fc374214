// Unique codes on a log without multi-stream transactions (KurrentDB before 25.1): the claim
// protocol's pure decisions. The I/O around them is in eventStore.ts.
//
// A code is the reservation stream `<scope>Code-<code>`, holding CodeClaimed{stream, eventId,
// revision, at} and CodeReleased{stream} events, each written at the exact revision of the
// stream's last event, so concurrent claimants serialise on it; events of other types (written by
// other tools) are passed over: the last claim or release decides. Which record holds the code is
// said by the record's own stream: the first event of every append lists the codes it claimed and
// released (its marks). The reservation stream only says whose stream to ask:
// - claiming: an empty reservation stream, or one whose last claim or release is the claimant's own
//   release, is claimed at its revision; the claimant's own claim is claimed again (a fresh claim
//   naming this append's first event: two appends of one stream never share a claim); a claim or
//   release by another stream is checked against that stream (holdOf), and taken over only when
//   that stream does not hold the code. A claimant that keeps losing the race for the revision to
//   others while the code stays free gives up with a conflict on its record's stream, not
//   CodeTakenError, which only a holder (or a claim that may still become one) causes;
// - a claim holds while the holder's marks say the code is claimed (its claiming event, or another
//   append of the holder, took it and no later one released it). It is void once the holder's
//   stream has a fence naming it (below), and stale once its claiming event is in the holder's
//   stream without marking it (a claiming event always marks its code: one that does not is
//   another request's event under the same id, or a release whose CodeReleased was lost). While
//   its claiming event is missing it is pending (its append may be on its way) for the grace
//   period, by the server's time of the claim; after that it has expired, and a claimant fences it
//   before taking the code over;
// - THE FENCE: a claimant taking over an expired claim first appends `adapter:CodeClaimVoided`
//   {codeStream, claimRevision} to the holder's stream, at exactly the revision it read that stream
//   at. The holder's record append was made at an expected revision no later than that (it read
//   the stream before it claimed, and a stream only grows), so once the fence is in, that append
//   can never commit, however late the server gets to it; if the record landed first, the fence is
//   refused, and a fresh read finds the claim valid. So no commit, early or late, makes a second
//   holder: this needs no bound on when the server commits an append, and no agreement of clocks
//   (a clock far off only fences a claimant early, which then fails with a conflict and, on its
//   retry, finds the code taken). Fences are the adapter's: reads never return them, and an append
//   whose expected revision only fences passed since is made again after them, unless a fence
//   voids one of its own claims. A holder's stream that was deleted (tombstoned) takes no append
//   again: its expired claim is void without a fence; one truncated whole (a purged record) reads
//   as empty at any revision, and is fenced at the revision the server names, if it still reads
//   empty (nothing landed since);
// - an append the server refused for sure gives back the claims it took of a free code (CodeReleased
//   at exactly the claim's revision, which fails harmlessly once anything came after); a claim of a
//   code the stream had claimed already is kept, since the earlier append may still be in flight.
//   A refused append whose ids turn out to be in the stream already (a retry that got there first,
//   or another request under the same idempotency key) answers that append's result and gives back
//   the fresh claims that the landed event does not mark;
// - after an append that releases a code, CodeReleased is written at the reservation stream's
//   revision only when its last claim is the stream's own and its claiming event is in the stream
//   at the revision the claim names, before the releasing one (one event read): a later or missing
//   claiming event is a re-claim racing the release, and the re-claim wins. CodeReleased only
//   spares the next claimant a read: a release in the holder's marks frees the code without it;
// - a reservation stream that was deleted (tombstoned) takes no claim again: the code moves to the
//   next generation, `<scope>Code-<code>!1`, `!2`… (`!` is never in an encoded code). Deleting, or
//   truncating (`$tb`, `$maxAge`, `$maxCount`), a reservation stream forgets its last claim: the
//   code reads as free while the record that holds it keeps it. Never do either to `*Code-*`
//   streams (the adapter does not); a truncated stream is claimed at its real revision, which the
//   server's refusal of a claim at no_stream names.

import { NO_STREAM, type AppendStreamState } from '@kurrent/kurrentdb-client';
import type { AppendRequest, CodeReservation, RecordedEvent } from '../../domain/ports.ts';
import { CODE_CLAIM_VOIDED, isRecord, sameId, type CodeMarks, type Fence, type MarkedEvent, type StoredEvent } from './metadata.ts';

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

/** The stream of a code's `generation`: the reservation stream, then after each deletion of it the
 * next (`!` is never in an encoded code, so no generation is another code's stream). */
export const generationStream = (codeStream: string, generation: number): string =>
  generation === 0 ? codeStream : `${codeStream}!${String(generation)}`;

/** How many deleted generations of one code a reader passes before it gives up (a deletion is an
 * operator's doing, and each costs a read). */
export const MAX_GENERATIONS = 16;

/** Whether an event is the adapter's own, which no reader of the log sees: a claim or release in a
 * reservation stream (`<scope>Code-…`), or a fence. By type and stream both: a record category may
 * well end in `Code` (`promoCode-<uuid>`), and its events are records. */
export const isAdapterEvent = (e: Pick<RecordedEvent, 'type' | 'stream'>): boolean =>
  e.type === CODE_CLAIM_VOIDED || ((e.type === CODE_CLAIMED || e.type === CODE_RELEASED) && /^[^-]*Code-/.test(e.stream));

/** The codes an append gives up: those it releases and does not claim again in the same request
 * (a release-and-claim of one code keeps it). */
export function releasedCodes(request: Pick<AppendRequest, 'claim' | 'release'>): CodeReservation[] {
  const claimed = new Set((request.claim ?? []).map(codeStreamName));
  return (request.release ?? []).filter((r) => !claimed.has(codeStreamName(r)));
}

/** The marks of an append, or undefined when it neither claims nor releases. */
export function codeMarksOf(request: Pick<AppendRequest, 'claim' | 'release'>): CodeMarks | undefined {
  const claimed = (request.claim ?? []).map(codeStreamName);
  const released = releasedCodes(request).map(codeStreamName);
  return claimed.length === 0 && released.length === 0 ? undefined : { claimed, released };
}

/** A claim stays pending (its holder's append may still be on its way) for this long after the
 * server wrote it; after that, a claim whose holder never wrote the claiming event has expired, and
 * is fenced and taken over. Liveness only: the fence, not this time, keeps a late commit out. */
export const CLAIM_GRACE_MS = 60_000;

export const CODE_CLAIMED = 'CodeClaimed';
export const CODE_RELEASED = 'CodeReleased';

/** A claim or release of a reservation stream. `at` (epoch ms) is when the server wrote the claim;
 * the claimant's own clock (`data.at`) only for events that come without the server's time.
 * `claimRevision` is the claim's own revision in the reservation stream, `landsAt` the revision its
 * claiming event was to have in the holder's stream (absent in claims of earlier adapters). */
export type Reservation =
  | { kind: 'claimed'; stream: string; eventId: string; at: number; claimStream: string; claimRevision: bigint; landsAt?: number }
  | { kind: 'released'; stream: string };
export type Claim = Extract<Reservation, { kind: 'claimed' }>;

/** A reservation stream as read: its name (the code's current generation), its last claim or
 * release (undefined when it has none), and the revision of its last event of any type (NO_STREAM
 * when it has none), at which it is written next. */
export type ReservationStream = { name: string; last: Reservation | undefined; revision: bigint | typeof NO_STREAM };

/** The claim or release an event of a reservation stream is; undefined for an event of any other
 * type, which says nothing about the code. */
export function reservationOf(stored: Pick<StoredEvent, 'type' | 'data' | 'created' | 'revision' | 'streamId'>): Reservation | undefined {
  const data = isRecord(stored.data) ? stored.data : {};
  const stream = typeof data.stream === 'string' ? data.stream : '';
  if (stored.type === CODE_CLAIMED) {
    const eventId = typeof data.eventId === 'string' ? data.eventId : '';
    const serverTime = stored.created?.getTime() ?? Number.NaN;
    const at = Number.isNaN(serverTime) ? Date.parse(typeof data.at === 'string' ? data.at : '') : serverTime;
    const landsAt = typeof data.revision === 'number' ? { landsAt: data.revision } : {};
    return { kind: 'claimed', stream, eventId, at, claimStream: stored.streamId, claimRevision: stored.revision, ...landsAt };
  }
  if (stored.type === CODE_RELEASED) return { kind: 'released', stream };
  return undefined;
}

/** What a claimant does given the reservation stream: claim at `expected` ('free' for a code
 * nobody claimed or the claimant itself released, 'ours' for its own claim, which it claims again),
 * or first ask the stream the last claim or release names ('held', see holdOf), and claim at
 * `expected` if that stream does not hold the code. */
export type ClaimDecision =
  | { kind: 'free'; expected: AppendStreamState }
  | { kind: 'ours'; expected: AppendStreamState }
  | { kind: 'held'; last: Reservation; expected: AppendStreamState };

export function claimDecision({ last, revision }: ReservationStream, claimant: string): ClaimDecision {
  if (last === undefined) return { kind: 'free', expected: revision };
  if (last.stream !== claimant) return { kind: 'held', last, expected: revision };
  return last.kind === 'claimed' ? { kind: 'ours', expected: revision } : { kind: 'free', expected: revision };
}

/** The latest word of a stream's own events about a code: claimed or released. */
export function lastMark(events: readonly Pick<MarkedEvent, 'marks'>[], codeStream: string): 'claimed' | 'released' | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const marks = events[i]?.marks;
    // An append that releases and re-claims the same code keeps it (older appends marked both).
    if (marks?.claimed.includes(codeStream) === true) return 'claimed';
    if (marks?.released.includes(codeStream) === true) return 'released';
  }
  return undefined;
}

export type ClaimStatus = 'valid' | 'pending' | 'expired' | 'stale';

/** Whether a claim holds, checked against the holder's own stream: valid while the holder's marks
 * say the code is claimed (by the claiming event, or by another append of the holder: a concurrent
 * one that claimed again, or, with the earlier adapter, one that shared the claim); otherwise stale
 * once a fence voids it or its claiming event is in the holder's stream (a claiming event always
 * marks its code, so one that does not, or that a later event released, is no claim of it: an
 * event of another request under the same id, or a release whose CodeReleased was lost), pending
 * while the claiming event is missing and the claim is younger than the grace period, expired after
 * (the claimant crashed between claim and append, its append was refused and the give-back lost,
 * or the server has not committed it yet): then only a fence makes it stale. */
export function claimStatus(claim: Claim, codeStream: string, holder: readonly MarkedEvent[], nowMs: number, graceMs: number): ClaimStatus {
  if (lastMark(holder, codeStream) === 'claimed') return 'valid';
  if (holder.some((e) => sameId(e.event.id, claim.eventId) || voids(e.fence, claim))) return 'stale';
  return nowMs - claim.at <= graceMs ? 'pending' : 'expired';
}

/** Whether a fence voids the claim at `claimRevision` of the reservation stream `claimStream`. */
const voids = (fence: Fence | undefined, claim: Pick<Claim, 'claimStream' | 'claimRevision'>): boolean =>
  fence?.codeStream === claim.claimStream && fence.claimRevision === claim.claimRevision;

/** Whether a fence among `events` voids one of `claims` (an append's own). */
export const voidsAny = (
  events: readonly Pick<MarkedEvent, 'fence'>[],
  claims: readonly Pick<Claim, 'claimStream' | 'claimRevision'>[],
): boolean => events.some((e) => claims.some((c) => voids(e.fence, c)));

/** What the stream named by a reservation stream's last claim or release has of the code: it holds
 * it, may hold it (a pending claim), not ('free': the code may be claimed at the reservation
 * stream's revision), or not unless its claim's append still lands ('fence': fence it first). A
 * release frees the code unless the releaser's own marks still claim it (a release the earlier
 * adapter wrote while another append of the same stream, sharing the claim, took the code). */
export function holdOf(
  last: Reservation,
  codeStream: string,
  holder: readonly MarkedEvent[],
  nowMs: number,
  graceMs: number,
): 'held' | 'pending' | 'fence' | 'free' {
  if (last.kind === 'released') return lastMark(holder, codeStream) === 'claimed' ? 'held' : 'free';
  switch (claimStatus(last, codeStream, holder, nowMs, graceMs)) {
    case 'valid':
      return 'held';
    case 'pending':
      return 'pending';
    case 'expired':
      return 'fence';
    case 'stale':
      return 'free';
  }
}

/** The revision at which `stream`, whose releasing append landed from revision `releasedFrom`, may
 * write CodeReleased: the reservation stream's, when its last claim or release is the stream's own
 * claim and `claimingEvent` (the holder's event at the revision the claim named) is the claim's, and
 * before the release. A claim whose event is later or not (yet) there belongs to an append that
 * claimed the code again and wins over the release; if that append never lands, the claim expires. */
export function releaseRevision(
  { last, revision }: ReservationStream,
  stream: string,
  claimingEvent: Pick<RecordedEvent, 'id' | 'revision'> | undefined,
  releasedFrom: number,
): bigint | undefined {
  if (last?.kind !== 'claimed' || last.stream !== stream || revision === NO_STREAM || claimingEvent === undefined) return undefined;
  return sameId(claimingEvent.id, last.eventId) && claimingEvent.revision < releasedFrom ? revision : undefined;
}
