// A fixed-window counter of attempts per key (a user, an address), in this process's memory: an
// attempt counts when it starts (so a burst of concurrent attempts cannot all get through before
// the first failure is counted) and is forgiven when it succeeds; a key with `limit` attempts
// counted in a window is refused until the window ends. Bounded: expired windows are dropped as
// new keys come, and past `maxKeys` the oldest go first.

export type RateLimit = { limit: number; windowMs: number };

export class FailureLimiter {
  readonly #windows = new Map<string, { count: number; endsAt: number }>();
  readonly #rule: RateLimit;
  readonly #maxKeys: number;

  constructor(rule: RateLimit, maxKeys = 100_000) {
    this.#rule = rule;
    this.#maxKeys = maxKeys;
  }

  /** Milliseconds until the key may try again, or 0 when it may now. */
  blockedFor(key: string, now: number): number {
    const w = this.#windows.get(key);
    if (w === undefined || w.endsAt <= now) return 0;
    return w.count >= this.#rule.limit ? w.endsAt - now : 0;
  }

  /** Counts an attempt that is starting: the milliseconds until the key may try again when it
   * is over its limit (the attempt is then not counted and must not go on), else 0. */
  attempt(key: string, now: number): number {
    const blocked = this.blockedFor(key, now);
    if (blocked > 0) return blocked;
    this.fail(key, now);
    return 0;
  }

  /** An attempt that succeeded is not held against the key. */
  forgive(key: string): void {
    const w = this.#windows.get(key);
    if (w !== undefined && w.count > 0) w.count -= 1;
  }

  fail(key: string, now: number): void {
    const w = this.#windows.get(key);
    if (w !== undefined && w.endsAt > now) {
      w.count += 1;
      return;
    }
    this.#windows.delete(key);
    if (this.#windows.size >= this.#maxKeys) this.#prune(now);
    this.#windows.set(key, { count: 1, endsAt: now + this.#rule.windowMs });
  }

  #prune(now: number): void {
    for (const [key, w] of this.#windows) if (w.endsAt <= now) this.#windows.delete(key);
    while (this.#windows.size >= this.#maxKeys) {
      const oldest = this.#windows.keys().next().value;
      if (oldest === undefined) return;
      this.#windows.delete(oldest);
    }
  }
}
