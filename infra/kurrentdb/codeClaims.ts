// Unique codes on a log without multi-stream transactions (KurrentDB before 25.1): the claim
// protocol's pure decisions. The I/O around them is in eventStore.ts.
//
// A code is the reservation stream `<scope>Code-<code>`, holding CodeClaimed{stream, eventId, at}
// and CodeReleased{stream} events, each written at the exact revision of the last event read, so
// concurrent claimants serialise on it. Which record holds the code is said by the record's own
// stream: the first event of every append lists the codes it claimed and released (its marks). The
// reservation stream only says whose stream to ask:
// - claiming: an empty reservation stream, or one whose last event is the claimant's own release,
//   is claimed at that revision; the claimant's own claim is claimed again at its revision (a fresh
//   claim naming this append's first event: two appends of one stream never share a claim); a last
//   event naming another stream is checked against that stream (holdOf), and taken over only when
//   that stream does not hold the code;
// - a claim holds while the holder wrote its event and has not released the code since, or, when its
//   event is not in the holder's stream, while the holder's marks say the code is claimed (another
//   append of the holder took it) or the claim is younger than the grace period (its append may be
//   on its way); a release does not free a code the releaser's marks still say it holds (such
//   releases were left by the earlier adapter, which let two appends of one stream share a claim);
// - an append the server refused for sure gives back the claims it took of a free code (CodeReleased
//   at exactly the claim's revision, which fails harmlessly once anything came after); a claim of a
//   code the stream had claimed already is kept, since the earlier append may still be in flight;
// - after an append that releases a code, CodeReleased is written at the revision of the last claim
//   only when that claim is the stream's own and its event comes before the releasing one: a later
//   or missing claiming event is a re-claim racing the release, and the re-claim wins.

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
 * server wrote it; after that, a claim whose holder never wrote the claiming event is stale. Well
 * above the client's deadline. */
export const CLAIM_GRACE_MS = 60_000;

export const CODE_CLAIMED = 'CodeClaimed';
export const CODE_RELEASED = 'CodeReleased';

/** The last event of a reservation stream. `at` (epoch ms) is when the server wrote the claim; the
 * claimant's own clock (`data.at`) only for events that come without the server's time. */
export type Reservation =
  | { kind: 'claimed'; revision: bigint; stream: string; eventId: string; at: number }
  | { kind: 'released'; revision: bigint; stream: string };
export type Claim = Extract<Reservation, { kind: 'claimed' }>;

export function reservationOf(stored: Pick<StoredEvent, 'streamId' | 'type' | 'data' | 'revision' | 'created'>): Reservation {
  const data = isRecord(stored.data) ? stored.data : {};
  const stream = typeof data.stream === 'string' ? data.stream : '';
  if (stored.type === CODE_CLAIMED) {
    const eventId = typeof data.eventId === 'string' ? data.eventId : '';
    const serverTime = stored.created?.getTime() ?? Number.NaN;
    const at = Number.isNaN(serverTime) ? Date.parse(typeof data.at === 'string' ? data.at : '') : serverTime;
    return { kind: 'claimed', revision: stored.revision, stream, eventId, at };
  }
  if (stored.type === CODE_RELEASED) return { kind: 'released', revision: stored.revision, stream };
  throw new Error(`unexpected event ${stored.type} in reservation stream ${stored.streamId}`);
}

/** What a claimant does given the reservation stream's last event: claim at `expected` ('free' for
 * a code nobody claimed or the claimant itself released, 'ours' for its own claim, which it claims
 * again), or first ask the stream the event names ('held', see holdOf). */
export type ClaimDecision =
  | { kind: 'free'; expected: AppendStreamState }
  | { kind: 'ours'; expected: bigint }
  | { kind: 'held'; last: Reservation };

export function claimDecision(last: Reservation | undefined, claimant: string): ClaimDecision {
  if (last === undefined) return { kind: 'free', expected: NO_STREAM };
  if (last.stream !== claimant) return { kind: 'held', last };
  return last.kind === 'claimed' ? { kind: 'ours', expected: last.revision } : { kind: 'free', expected: last.revision };
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

/** Whether a claim holds, checked against the holder's own stream: valid once the holder wrote the
 * claiming event and has not released the code since, or, while the claiming event is missing, when
 * the holder's marks say the code is claimed (another of its appends took it: a concurrent append
 * that claimed again, or, with the earlier adapter, one that shared the claim); pending while
 * the claiming event is missing and the claim is younger than the grace period; stale otherwise (the
 * claimant crashed between claim and append, or released the code and crashed before saying so in
 * the reservation stream). */
export function claimStatus(
  claim: Claim,
  codeStream: string,
  holder: readonly MarkedEvent[],
  nowMs: number,
  graceMs: number,
): ClaimStatus {
  const index = holder.findIndex((e) => sameId(e.event.id, claim.eventId));
  if (index >= 0) return lastMark(holder.slice(index), codeStream) === 'released' ? 'stale' : 'valid';
  if (lastMark(holder, codeStream) === 'claimed') return 'valid';
  return nowMs - claim.at <= graceMs ? 'pending' : 'stale';
}

/** What the stream named by a reservation stream's last event has of the code: it holds it, may
 * hold it (a pending claim), or not ('free': the code may be claimed at the event's revision). A
 * release frees the code unless the releaser's own marks still claim it (a release the earlier
 * adapter wrote while another append of the same stream, sharing the claim, took the code). */
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

/** The revision at which `stream`, having written `releasingEventId`, may write CodeReleased: when
 * the last event is its own claim and the claiming event comes before the releasing one. A claim
 * whose event is later or not (yet) in the stream belongs to an append that claimed the code again
 * and wins over the release; if that append never lands, the claim goes stale after the grace. */
export function releaseRevision(
  last: Reservation | undefined,
  stream: string,
  holder: readonly Pick<MarkedEvent, 'event'>[],
  releasingEventId: string,
): bigint | undefined {
  if (last?.kind !== 'claimed' || last.stream !== stream) return undefined;
  const claimedAt = holder.findIndex((e) => sameId(e.event.id, last.eventId));
  const releasedAt = holder.findIndex((e) => sameId(e.event.id, releasingEventId));
  return claimedAt >= 0 && claimedAt < releasedAt ? last.revision : undefined;
}
