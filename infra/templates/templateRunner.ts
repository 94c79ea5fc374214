// Template jobs in worker threads: a template over data chosen by the caller can loop for long and
// build strings of gigabytes (nested loops multiply); here that costs one worker, stopped at the
// time limit or at its heap limit, instead of the event loop every request shares. Workers are
// kept and reused (each with its own compile cache); a stopped one is replaced on the next job.

import { Worker } from 'node:worker_threads';
import { documentTooLarge, rendererUnavailable } from '../../domain/documents/documents.ts';
import type { TemplateJob, TemplateRunner } from '../../domain/ports.ts';
import type { WorkerJob } from './worker.ts';
import { DomainError, type StatusName } from '../../domain/shared/errors.ts';
import { RenderQueue, withTimeout } from '../renderQueue.ts';

export type TemplateRunnerOptions = {
  /** Worker threads (default 2). */
  threads?: number;
  /** Jobs that may wait for a thread (default 64); beyond, 503 with Retry-After. */
  queueLimit?: number;
  /** Time limit of one job (default 5,000 ms): the worker is stopped, the job a 422. */
  timeoutMs?: number;
  /** Heap limit of a worker (default 512 MiB): beyond, the worker is stopped, the job a 413. */
  memoryMb?: number;
};

type Failure = { code?: string; status?: StatusName; message: string; errors?: string[] };
type Answer = { id: number; result?: string | Uint8Array; failure?: Failure };

const WORKER = new URL('./worker.ts', import.meta.url);

class WorkerStopped extends Error {}
class NotSent extends Error {}

export class WorkerTemplateRunner implements TemplateRunner {
  readonly #options: Required<TemplateRunnerOptions>;
  readonly #queue: RenderQueue;
  readonly #idle: Worker[] = [];
  readonly #all = new Set<Worker>();
  #next = 0;
  #closed = false;

  constructor(options: TemplateRunnerOptions = {}) {
    this.#options = { threads: 2, queueLimit: 64, timeoutMs: 5000, memoryMb: 512, ...options };
    this.#queue = new RenderQueue({ slots: this.#options.threads, queueLimit: this.#options.queueLimit, what: 'template' });
  }

  async text(job: Extract<TemplateJob, { kind: 'handlebars' | 'jsonata' }>): Promise<string> {
    return (await this.#run(job)) as string;
  }

  async file(job: Extract<TemplateJob, { kind: 'docx' | 'xlsx' }>): Promise<Uint8Array> {
    return (await this.#run(job)) as Uint8Array;
  }

  /** HTML cleaned for LibreOffice (infra/libreoffice/offlineHtml.ts), under the same limits. */
  async offlineHtml(html: string): Promise<string> {
    return (await this.#run({ kind: 'offline-html', html })) as string;
  }

  async #run(job: WorkerJob): Promise<string | Uint8Array> {
    if (this.#closed) throw rendererUnavailable('template', 'the service is shutting down');
    return this.#queue.run(async () => {
      const worker = this.#idle.pop() ?? this.#spawn();
      const id = ++this.#next;
      const timeoutMs = this.#options.timeoutMs;
      try {
        const answer = await withTimeout(this.#ask(worker, id, job), timeoutMs, () => new WorkerStopped(`took longer than ${String(timeoutMs)} ms`));
        this.#idle.push(worker);
        if (answer.failure !== undefined) throw toDomainError(answer.failure);
        return answer.result ?? '';
      } catch (error) {
        if (error instanceof NotSent) {
          this.#idle.push(worker);
          throw new DomainError('FORMATTER.RENDER_FAILED', 'UNPROCESSABLE_ENTITY', 'The data could not be handed to the template', [error.message]);
        }
        if (!(error instanceof WorkerStopped)) throw error;
        this.#stop(worker);
        if (error.message === 'ERR_WORKER_OUT_OF_MEMORY') throw documentTooLarge(`it needed more than ${String(this.#options.memoryMb)} MiB`);
        throw new DomainError('FORMATTER.RENDER_FAILED', 'UNPROCESSABLE_ENTITY', `The template ${error.message} with this data and was stopped`);
      }
    });
  }

  #ask(worker: Worker, id: number, job: WorkerJob): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const onMessage = (answer: Answer) => {
        if (answer.id !== id) return;
        done();
        resolve(answer);
      };
      const onError = (error: Error & { code?: string }) => {
        done();
        reject(new WorkerStopped(error.code === 'ERR_WORKER_OUT_OF_MEMORY' ? error.code : `failed (${error.message})`));
      };
      const onExit = () => {
        done();
        reject(new WorkerStopped('stopped'));
      };
      const done = () => {
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      };
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
      try {
        worker.postMessage({ id, job });
      } catch (error) {
        // Data the structured clone cannot copy (nested deeper than its stack): the worker is fine.
        done();
        reject(new NotSent(error instanceof Error ? error.message : String(error)));
      }
    });
  }

  #spawn(): Worker {
    const worker = new Worker(WORKER, { resourceLimits: { maxOldGenerationSizeMb: this.#options.memoryMb, maxYoungGenerationSizeMb: 64 } });
    // An idle worker keeps no process alive on its own.
    worker.unref();
    worker.on('error', () => undefined);
    this.#all.add(worker);
    worker.once('exit', () => {
      this.#all.delete(worker);
      const idle = this.#idle.indexOf(worker);
      if (idle >= 0) this.#idle.splice(idle, 1);
    });
    return worker;
  }

  #stop(worker: Worker): void {
    this.#all.delete(worker);
    void worker.terminate();
  }

  async close(): Promise<void> {
    this.#closed = true;
    const workers = [...this.#all];
    this.#all.clear();
    this.#idle.length = 0;
    await Promise.all(workers.map((w) => w.terminate()));
  }
}

function toDomainError(failure: Failure): DomainError {
  if (failure.code !== undefined && failure.status !== undefined) return new DomainError(failure.code, failure.status, failure.message, failure.errors ?? []);
  return new DomainError('FORMATTER.RENDER_FAILED', 'UNPROCESSABLE_ENTITY', 'The template could not be rendered with this data', [failure.message]);
}
