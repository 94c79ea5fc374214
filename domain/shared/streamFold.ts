// A stream's state as a fold of its events: what a fold is, and folding events onto one. Pure: the
// folds kept between commands, and the reads of the log that bring them up to date, are the
// application layer's (application/streamFold.ts).

import type { Position, RecordedEvent } from '../ports.ts';

export type FoldSpec<S> = {
  /** Names the kind of state: streams of one category share a fold. */
  resource: string;
  stream: string;
  initial: () => S;
  evolve: (state: S, event: RecordedEvent) => S;
};

export type Folded<S> = {
  state: S;
  /** Revision of the last event folded; undefined when the stream does not exist. */
  version: number | undefined;
  position: Position | undefined;
  /** `actor \n key` of every Idempotency-Key the stream's events were written under. */
  keys: ReadonlySet<string>;
};

export const keyOf = (actor: string, idempotencyKey: string): string => `${actor}\n${idempotencyKey}`;

/** Folds events onto a folded state. */
export function foldOnto<S>(spec: FoldSpec<S>, base: Folded<S>, events: readonly RecordedEvent[]): Folded<S> {
  if (events.length === 0) return base;
  const keys = new Set(base.keys);
  for (const e of events) if (e.metadata.idempotencyKey !== undefined) keys.add(keyOf(e.metadata.actor, e.metadata.idempotencyKey));
  const last = events.at(-1);
  return { state: events.reduce(spec.evolve, base.state), version: last?.revision, position: last?.position, keys };
}
