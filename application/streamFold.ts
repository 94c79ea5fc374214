// A stream's state, folded once and then kept up to date from the events after it. Commands and
// reads of one record otherwise re-read and re-fold its whole stream every time, which grows with
// every version (60 versions of a large record were 1.8 s per write). The log stays the only truth:
// every use reads the events after the cached revision, so writes of other processes are seen.
// The cache belongs to one runtime (one log), bounded in bytes, and forgets the least recently
// used streams first. It needs `evolve` to return new states rather than change the one it gets
// (every fold here does).

import type { EventStore } from '../domain/ports.ts';
import { jsonBytes } from '../domain/shared/json.ts';
import { foldOnto, type FoldSpec, type Folded } from '../domain/shared/streamFold.ts';

type Entry = Folded<unknown> & { bytes: number; used: boolean };

/** Total size of the states kept per log (their JSON). */
const BUDGET_BYTES = 64 * 1024 * 1024;
/** An eviction frees down to this, so the next ones are many writes away. */
const EVICT_TO_BYTES = (BUDGET_BYTES / 8) * 7;

/**
 * Least recently used, approximately (the "second chance" clock): a hit only marks its entry, and
 * the Map is reordered only when it is over budget. Moving an entry to the back on every hit (delete
 * and set again) left a deleted slot behind each time, and V8's Map walks those until it rehashes:
 * a log type read by every log create made each lookup 60 µs slower after 70,000 creates, and log
 * creates fell from 2,700/s to 1,400/s in a minute.
 */
export class FoldCache {
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;

  get(name: string): Entry | undefined {
    const entry = this.#entries.get(name);
    if (entry !== undefined) entry.used = true;
    return entry;
  }

  set(name: string, folded: Folded<unknown>): void {
    const bytes = jsonBytes(folded.state);
    if (bytes > BUDGET_BYTES / 4) {
      this.delete(name);
      return;
    }
    // Replacing a key's value keeps its place (no deleted slot), so it counts as used; a new key
    // is at the back already.
    const old = this.#entries.get(name);
    this.#bytes += bytes - (old?.bytes ?? 0);
    this.#entries.set(name, { ...folded, bytes, used: old !== undefined });
    if (this.#bytes > BUDGET_BYTES) this.#evict();
  }

  delete(name: string): void {
    const entry = this.#entries.get(name);
    if (entry === undefined) return;
    this.#entries.delete(name);
    this.#bytes -= entry.bytes;
  }

  /** Oldest first: an entry used since it was last passed moves to the back once, the others go. */
  #evict(): void {
    for (const [name, entry] of this.#entries) {
      if (this.#bytes <= EVICT_TO_BYTES) return;
      this.#entries.delete(name);
      if (entry.used) {
        entry.used = false;
        this.#entries.set(name, entry);
      } else {
        this.#bytes -= entry.bytes;
      }
    }
  }
}

/** A log with the folds kept of its streams. */
export type FoldingLog = { readonly events: EventStore; readonly folds: FoldCache };

const nameOf = (spec: Pick<FoldSpec<unknown>, 'resource' | 'stream'>): string => `${spec.resource}|${spec.stream}`;

/** The stream's current state: the cached fold plus the events after it. */
export async function foldStream<S>(spec: FoldSpec<S>, log: FoldingLog): Promise<Folded<S>> {
  const cache = log.folds;
  const name = nameOf(spec);
  const cached = cache.get(name) as Folded<S> | undefined;
  const base: Folded<S> = cached ?? { state: spec.initial(), version: undefined, position: undefined, keys: new Set() };
  const from = base.version === undefined ? 0 : base.version + 1;
  const tail = await log.events.readStream(spec.stream, { from });
  if (cached !== undefined && tail.length === 0) return cached;
  const folded = foldOnto(spec, base, tail);
  if (folded.version !== undefined) cache.set(name, folded);
  return folded;
}

/** Keeps what a command just wrote, so the next use reads nothing before it. */
export function rememberFold<S>(spec: FoldSpec<S>, log: FoldingLog, folded: Folded<S>): void {
  log.folds.set(nameOf(spec), folded);
}

/** Forgets the cached folds of streams whose events were purged from the log (retention), so
 * reads of them find nothing instead of the state folded before. */
export function forgetFolds(log: FoldingLog, folds: readonly Pick<FoldSpec<unknown>, 'resource' | 'stream'>[]): void {
  for (const f of folds) log.folds.delete(nameOf(f));
}
