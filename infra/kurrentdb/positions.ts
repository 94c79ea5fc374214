// Positions in the KurrentDB log as the port sees them: the server's (commit, prepare) pair packed
// into one ordered bigint, the distance between two positions for lag figures, and where a read of
// $all starts for "the events after this position".

import { START, type Position as KurrentPosition, type ReadPosition } from '@kurrent/kurrentdb-client';
import type { Position } from '../../domain/ports.ts';

const TWO_64 = 1n << 64n;
/** What a stream read reports when the server does not know the $all position of an event. */
const UNKNOWN_COMMIT = TWO_64 - 1n;

/** commit·2^64 + prepare: one bigint that sorts like the (commit, prepare) pair. */
export function packPosition(p: KurrentPosition): Position {
  if (p.commit < 0n || p.prepare < 0n || p.prepare >= TWO_64) {
    throw new RangeError(`not a KurrentDB position: ${String(p.commit)}/${String(p.prepare)}`);
  }
  return (p.commit << 64n) + p.prepare;
}

export function unpackPosition(p: Position): KurrentPosition {
  if (p < 0n) throw new RangeError(`not a packed position: ${String(p)}`);
  return { commit: p >> 64n, prepare: p & (TWO_64 - 1n) };
}

/** The position of a recorded event; 0n when the server did not say (stream reads before 22.6). */
export function positionOf(p: KurrentPosition | undefined): Position {
  return p === undefined || p.commit >= UNKNOWN_COMMIT ? 0n : packPosition(p);
}

/** Where a forward read of $all starts for "after `after`": reads are inclusive of their start
 * position (the server keeps events with TFPos >= from), so the caller drops the event at `after`. */
export function readStartAfter(after: Position): ReadPosition {
  return after === 0n ? START : unpackPosition(after);
}

/** Bytes of transaction log between two positions: the difference of their commit positions. */
export function commitDistance(from: Position, to: Position): number {
  const gap = unpackPosition(to).commit - unpackPosition(from).commit;
  return gap > 0n ? Number(gap) : 0;
}
