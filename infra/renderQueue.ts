// The admission discipline of the document renderers (Chromium, LibreOffice, template threads): at
// most `slots` renders at once, at most `queueLimit` waiting, and a 503 with a Retry-After for the
// rest, so that overload is an answer instead of a pile of hung requests.
//
// With shares, each render names its caller (a key): one caller has at most `jobs` renders waiting
// or running (beyond, `refused`: a 429), and at most `slots - 1` of them running, so a slot is
// always left to the others. A render that cannot start only because its caller is at that cap lets
// the others' renders behind it pass. A render holds its slot until it ends (a template thread
// cannot be taken back from a job), so without the cap one caller's slow renders would make every
// other caller wait for them.

import { callerBusy, rendererBusy } from '../modules/documents/domain/documents.ts';
import type { TemplateCaller } from '../domain/ports.ts';

export type RenderQueueOptions = {
  /** Renders at once (pages of the browser, documents of the office process). */
  slots: number;
  /** Renders that may wait for a slot; beyond them the render is refused as busy. */
  queueLimit: number;
  /** Named in the busy error ("PDF", "office"). */
  what: string;
  /** Each caller's share, for the renders that name one. */
  shares?: { jobs: number; refused: (retryAfterSeconds: number) => Error };
};

/** Each caller's share of a renderer (template threads, Chromium pages, LibreOffice): `jobs`
 * renders waiting or running (TEMPLATE_JOBS_PER_CALLER), 429 beyond. */
export const callerShares = (what: string, jobs: number): NonNullable<RenderQueueOptions['shares']> => ({
  jobs,
  refused: (retryAfterSeconds) => callerBusy(what, jobs, 'TEMPLATE_JOBS_PER_CALLER', retryAfterSeconds),
});

/** The share a render counts to: its caller's (the token's subject), or, for the service's own
 * work, the actor it is done for; an unnamed caller's counts to none. */
export const shareKeyOf = (caller: TemplateCaller | undefined): string | undefined =>
  caller === undefined ? undefined : 'subject' in caller ? caller.subject : caller.serviceFor;

/** Whether a render is the service's own work rather than a caller's. */
export const isServiceWork = (caller: TemplateCaller | undefined): boolean => caller !== undefined && 'serviceFor' in caller;

type Waiting = { key: string | undefined; start: () => void };

export class RenderQueue {
  readonly #options: RenderQueueOptions;
  #running = 0;
  readonly #waiting: Waiting[] = [];
  /** Renders of each caller with one in the queue or a slot (a caller with none is not kept). */
  readonly #callers = new Map<string, { jobs: number; running: number }>();
  /** Mean render time (exponentially weighted), for the retry delay. */
  #meanMs = 200;

  constructor(options: RenderQueueOptions) {
    this.#options = options;
  }

  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /** Runs `render` in a slot, after the renders ahead of it; refused at once when the queue is full
   * or, with shares, when `key` (the caller) already has its share of renders. */
  async run<T>(render: () => Promise<T>, key?: string): Promise<T> {
    const caller = this.#admit(key);
    try {
      if (this.#running < this.#options.slots && this.#mayStart(key)) this.#start(key);
      else if (this.#waiting.length < this.#options.queueLimit)
        await new Promise<void>((resolve) => this.#waiting.push({ key, start: resolve }));
      else throw rendererBusy(this.#options.what, this.retryAfterSeconds());
    } catch (error) {
      this.#leave(key, caller);
      throw error;
    }
    const started = performance.now();
    try {
      return await render();
    } finally {
      this.#meanMs = 0.8 * this.#meanMs + 0.2 * (performance.now() - started);
      if (caller !== undefined) caller.running -= 1;
      this.#leave(key, caller);
      // The slot passes straight to the next in line that may start, so no newcomer overtakes the queue.
      const next = this.#waiting.findIndex((w) => this.#mayStart(w.key));
      if (next < 0) this.#running -= 1;
      else {
        const [waiting] = this.#waiting.splice(next, 1);
        if (waiting !== undefined) {
          this.#started(waiting.key);
          waiting.start();
        }
      }
    }
  }

  /** When the queue, at the pace of recent renders, will have room again: at least 1 s. */
  retryAfterSeconds(): number {
    const ahead = (this.#running + this.#waiting.length) / this.#options.slots;
    return Math.max(1, Math.ceil((ahead * this.#meanMs) / 1000));
  }

  /** Renders one caller may run at once: all slots but one (one, when there is one slot). */
  get #runningShare(): number {
    return Math.max(1, this.#options.slots - 1);
  }

  /** Counts a render of `key` in, or refuses it when the caller has its share. */
  #admit(key: string | undefined): { jobs: number; running: number } | undefined {
    const shares = this.#options.shares;
    if (key === undefined || shares === undefined) return undefined;
    const caller = this.#callers.get(key) ?? { jobs: 0, running: 0 };
    // The caller's own renders end, at the pace of recent ones, on the slots it may use.
    if (caller.jobs >= shares.jobs)
      throw shares.refused(Math.max(1, Math.ceil(((caller.jobs / this.#runningShare) * this.#meanMs) / 1000)));
    caller.jobs += 1;
    this.#callers.set(key, caller);
    return caller;
  }

  #leave(key: string | undefined, caller: { jobs: number } | undefined): void {
    if (key === undefined || caller === undefined) return;
    caller.jobs -= 1;
    if (caller.jobs === 0) this.#callers.delete(key);
  }

  #mayStart(key: string | undefined): boolean {
    return key === undefined || (this.#callers.get(key)?.running ?? 0) < this.#runningShare;
  }

  /** A render takes a free slot. */
  #start(key: string | undefined): void {
    this.#running += 1;
    this.#started(key);
  }

  #started(key: string | undefined): void {
    const caller = key === undefined ? undefined : this.#callers.get(key);
    if (caller !== undefined) caller.running += 1;
  }
}

/** `work`, or the `onTimeout` error after `ms` (the work is left to finish or be killed by the caller). */
export async function withTimeout<T>(work: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      reject(onTimeout());
    }, ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
