// Unique codes on a log without multi-stream transactions (KurrentDB before 25.1): the claim
// protocol's pure decisions. The I/O around them is in eventStore.ts.
//
// A code is the reservation stream `<scope>Code-<code>`, holding CodeClaimed{stream, eventId, at}
// and CodeReleased{stream} events, each written at the exact revision of the stream's last event,
// so concurrent claimants serialise on it; events of other types (written by other tools) are
// passed over: the last claim or release decides. Which record holds the code is said by the
// record's own stream: the first event of every append lists the codes it claimed and released
// (its marks). The reservation stream only says whose stream to ask:
// - claiming: an empty reservation stream, or one whose last claim or release is the claimant's own
//   release, is claimed at its revision; the claimant's own claim is claimed again (a fresh claim
//   naming this append's first event: two appends of one stream never share a claim); a claim or
//   release by another stream is checked against that stream (holdOf), and taken over only when
//   that stream does not hold the code. A claimant that keeps losing the race for the revision to
//   others while the code stays free gives up with a conflict on its record's stream, not
//   CodeTakenError, which only a holder (or a claim that may still become one) causes;
// - a claim holds while the holder's marks say the code is claimed (its claiming event, or another
//   append of the holder, took it and no later one released it); otherwise it is stale once its
//   claiming event is in the holder's stream (a claiming event always marks its code: one that does
//   not is another request's event under the same id) or once it is older than the grace period,
//   and pending before that (its append may be on its way); a release does not free a code the
//   releaser's marks still say it holds (such releases were left by the earlier adapter, which let
//   two appends of one stream share a claim);
// - timing: a claimant sends its record append only within half the grace period of sending its
//   first claim (by its own monotonic clock), with a deadline within the rest of that half; past
//   it, it gives its fresh claims back and fails as unavailable. The other half is the margin for
//   an append the server commits after the client gave up on it, and for clock offsets: a checker
//   compares its own clock with the server's time of the claim (`created`), so EVERY INSTANCE'S
//   CLOCK MUST BE WITHIN CLOCK_MARGIN_MS (10 s) OF THE SERVER'S (keep both on NTP). A checker
//   whose clock runs ahead by d takes a claim over at grace - d of the server's time, leaving
//   grace/2 - d for a late commit; one ahead by more than grace/2 may take over a claim whose
//   record is still landing. The adapter cannot check this at start without a write: the only
//   server time it reads anyway, the newest event's, bounds the server's clock from below only;
// - an append the server refused for sure gives back the claims it took of a free code (CodeReleased
//   at exactly the claim's revision, which fails harmlessly once anything came after); a claim of a
//   code the stream had claimed already is kept, since the earlier append may still be in flight.
//   A refused append whose ids turn out to be in the stream already (a retry that got there first,
//   or another request under the same idempotency key) answers that append's result and gives back
//   the fresh claims that the landed event does not mark;
// - after an append that releases a code, CodeReleased is written at the reservation stream's
//   revision only when its last claim is the stream's own and its event comes before the releasing
//   one: a later or missing claiming event is a re-claim racing the release, and the re-claim wins.

import { NO_STREAM, type AppendStreamState } from '@kurrent/kurrentdb-client';
import type { AppendRequest, CodeReservation } from '../../domain/ports.ts';
import { isRecord, sameId, type CodeMarks, type MarkedEvent, type StoredEvent } from './metadata.ts';

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

/** A claim stays unproven (its holder's append may still be on its way) for this long after the
 * server wrote it; after that, a claim whose holder never wrote the claiming event is stale. The
 * claimant sends its record within the first half (recordDeadline), the second is the margin. */
export const CLAIM_GRACE_MS = 60_000;

/** How far every instance's clock may be from the server's (see the header: not checked). */
export const CLOCK_MARGIN_MS = 10_000;

/** The deadline (ms) of a record append whose first claim was sent `elapsedMs` ago: what is left
 * of half the grace period, at most the client's usual deadline; undefined when less than a
 * millisecond is left (the append must not be sent). */
export function recordDeadline(elapsedMs: number, graceMs: number, usualDeadlineMs: number): number | undefined {
  const left = Math.floor(graceMs / 2 - elapsedMs);
  return left >= 1 ? Math.min(left, usualDeadlineMs) : undefined;
}

export const CODE_CLAIMED = 'CodeClaimed';
export const CODE_RELEASED = 'CodeReleased';

/** A claim or release of a reservation stream. `at` (epoch ms) is when the server wrote the claim;
 * the claimant's own clock (`data.at`) only for events that come without the server's time. */
export type Reservation = { kind: 'claimed'; stream: string; eventId: string; at: number } | { kind: 'released'; stream: string };
export type Claim = Extract<Reservation, { kind: 'claimed' }>;

/** A reservation stream as read: its last claim or release (undefined when it has none), and the
 * revision of its last event of any type (NO_STREAM when it has none), at which it is written next. */
export type ReservationStream = { last: Reservation | undefined; revision: bigint | typeof NO_STREAM };

/** The claim or release an event of a reservation stream is; undefined for an event of any other
 * type, which says nothing about the code. */
export function reservationOf(stored: Pick<StoredEvent, 'type' | 'data' | 'created'>): Reservation | undefined {
  const data = isRecord(stored.data) ? stored.data : {};
  const stream = typeof data.stream === 'string' ? data.stream : '';
  if (stored.type === CODE_CLAIMED) {
    const eventId = typeof data.eventId === 'string' ? data.eventId : '';
    const serverTime = stored.created?.getTime() ?? Number.NaN;
    const at = Number.isNaN(serverTime) ? Date.parse(typeof data.at === 'string' ? data.at : '') : serverTime;
    return { kind: 'claimed', stream, eventId, at };
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

export type ClaimStatus = 'valid' | 'pending' | 'stale';

/** Whether a claim holds, checked against the holder's own stream: valid while the holder's marks
 * say the code is claimed (by the claiming event, or by another append of the holder: a concurrent
 * one that claimed again, or, with the earlier adapter, one that shared the claim); otherwise stale
 * once the claiming event is in the holder's stream (a claiming event always marks its code, so
 * one that does not, or that a later event released, is no claim of it: an event of another
 * request under the same id, or a release whose CodeReleased was lost), pending while the claiming
 * event is missing and the claim is younger than the grace period, and stale after (the claimant
 * crashed between claim and append, or its append was refused and the give-back lost). */
export function claimStatus(
  claim: Claim,
  codeStream: string,
  holder: readonly MarkedEvent[],
  nowMs: number,
  graceMs: number,
): ClaimStatus {
  if (lastMark(holder, codeStream) === 'claimed') return 'valid';
  if (holder.some((e) => sameId(e.event.id, claim.eventId))) return 'stale';
  return nowMs - claim.at <= graceMs ? 'pending' : 'stale';
}

/** What the stream named by a reservation stream's last claim or release has of the code: it holds
 * it, may hold it (a pending claim), or not ('free': the code may be claimed at the reservation
 * stream's revision). A release frees the code unless the releaser's own marks still claim it (a
 * release the earlier adapter wrote while another append of the same stream, sharing the claim,
 * took the code). */
export function holdOf(
  last: Reservation,
  codeStream: string,
  holder: readonly MarkedEvent[],
  nowMs: number,
  graceMs: number,
): 'held' | 'pending' | 'free' {
  if (last.kind === 'released') return lastMark(holder, codeStream) === 'claimed' ? 'held' : 'free';
  const status = claimStatus(last, codeStream, holder, nowMs, graceMs);
  return status === 'valid' ? 'held' : status === 'pending' ? 'pending' : 'free';
}

/** The revision at which `stream`, having written `releasingEventId`, may write CodeReleased: the
 * reservation stream's, when its last claim or release is the stream's own claim and the claiming
 * event comes before the releasing one. A claim whose event is later or not (yet) in the stream
 * belongs to an append that claimed the code again and wins over the release; if that append never
 * lands, the claim goes stale after the grace. */
export function releaseRevision(
  { last, revision }: ReservationStream,
  stream: string,
  holder: readonly Pick<MarkedEvent, 'event'>[],
  releasingEventId: string,
): bigint | undefined {
  if (last?.kind !== 'claimed' || last.stream !== stream || revision === NO_STREAM) return undefined;
  const claimedAt = holder.findIndex((e) => sameId(e.event.id, last.eventId));
  const releasedAt = holder.findIndex((e) => sameId(e.event.id, releasingEventId));
  return claimedAt >= 0 && claimedAt < releasedAt ? revision : undefined;
}
