// The admission discipline of the document renderers (Chromium, LibreOffice): at most `slots`
// renders at once, at most `queueLimit` waiting, and a 503 with a Retry-After for the rest, so
// that overload is an answer instead of a pile of hung requests.

import { rendererBusy } from '../domain/documents/documents.ts';

export type RenderQueueOptions = {
  /** Renders at once (pages of the browser, documents of the office process). */
  slots: number;
  /** Renders that may wait for a slot; beyond them the render is refused as busy. */
  queueLimit: number;
  /** Named in the busy error ("PDF", "office"). */
  what: string;
};

export class RenderQueue {
  readonly #options: RenderQueueOptions;
  #running = 0;
  readonly #waiting: (() => void)[] = [];
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

  /** Runs `render` in a slot, after the renders ahead of it; refused at once when the queue is full. */
  async run<T>(render: () => Promise<T>): Promise<T> {
    if (this.#running < this.#options.slots) this.#running += 1;
    else if (this.#waiting.length < this.#options.queueLimit) await new Promise<void>((resolve) => this.#waiting.push(resolve));
    else throw rendererBusy(this.#options.what, this.retryAfterSeconds());
    const started = performance.now();
    try {
      return await render();
    } finally {
      this.#meanMs = 0.8 * this.#meanMs + 0.2 * (performance.now() - started);
      // The slot passes straight to the next in line, so no newcomer overtakes the queue.
      const next = this.#waiting.shift();
      if (next === undefined) this.#running -= 1;
      else next();
    }
  }

  /** When the queue, at the pace of recent renders, will have room again: at least 1 s. */
  retryAfterSeconds(): number {
    const ahead = (this.#running + this.#waiting.length) / this.#options.slots;
    return Math.max(1, Math.ceil((ahead * this.#meanMs) / 1000));
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
