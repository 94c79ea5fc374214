// Template jobs in worker threads: a template over data chosen by the caller can loop for long and
// build strings of gigabytes (nested loops multiply); here that costs one worker, stopped at the
// time limit or at its heap limit, instead of the event loop every request shares. Workers are
// kept and reused (each with its own compile cache); a stopped one is replaced at once.
//
// Two lanes, each with its threads and its queue. Callers' jobs (previews, renders, documents, a
// notification created over REST) run in the interactive lane, where each caller (the token's
// subject) has a share: `jobsPerCaller` waiting or running (beyond, 429), and never every thread
// (infra/renderQueue.ts), so one caller's templates that run to the time limit leave a thread to
// the others. The service's own jobs (notifications the trigger reactor makes) run in the service
// lane, which no caller's job, however many callers send them, can delay. There each job names the
// actor it is done for (who raised the trigger), who runs on all its threads but one (never
// refused: the trigger reactor holds back an actor's triggers beyond its share of its own places),
// so one actor's triggers whose templates run to the time limit leave a thread to the others'.

import { Worker } from 'node:worker_threads';
import { documentTooLarge, rendererUnavailable } from '../../modules/documents/domain/documents.ts';
import type { TemplateCaller, TemplateJob, TemplateRunner } from '../../domain/ports.ts';
import type { WorkerJob } from './worker.ts';
import { DomainError, isErrorCode, type StatusName } from '../../domain/shared/errors.ts';
import { callerShares, isServiceWork, RenderQueue, shareKeyOf, withTimeout } from '../renderQueue.ts';

export type TemplateRunnerOptions = {
  /** Threads of the interactive lane (default 2; with 1, one caller can hold it). */
  threads?: number;
  /** Threads of the service lane (default 2: with 1, one actor's triggers can hold it). */
  serviceThreads?: number;
  /** Jobs that may wait for a thread, in each lane (default 64); beyond, 503 with Retry-After. */
  queueLimit?: number;
  /** Jobs one caller may have waiting or running in the interactive lane (default 2); beyond, 429
   * with Retry-After. */
  jobsPerCaller?: number;
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
  readonly #interactive: WorkerLane;
  readonly #service: WorkerLane;

  constructor(options: TemplateRunnerOptions = {}) {
    const o = { threads: 2, serviceThreads: 2, queueLimit: 64, jobsPerCaller: 2, timeoutMs: 5000, memoryMb: 512, ...options };
    const limits = { timeoutMs: o.timeoutMs, memoryMb: o.memoryMb };
    const shares = callerShares('template', o.jobsPerCaller);
    this.#interactive = new WorkerLane(
      o.threads,
      new RenderQueue({ slots: o.threads, queueLimit: o.queueLimit, what: 'template', shares }),
      limits,
    );
    // The service's jobs wait rather than being refused: at most one per trigger the reactor runs,
    // so its queue needs no limit of its own (the interactive one's would refuse a reactor with
    // more places than it, and a refusal fails the reactor's whole batch).
    const actors = callerShares('template', Number.POSITIVE_INFINITY);
    this.#service = new WorkerLane(
      o.serviceThreads,
      new RenderQueue({ slots: o.serviceThreads, queueLimit: Number.POSITIVE_INFINITY, what: 'template', shares: actors }),
      limits,
    );
  }

  /** Jobs running and waiting in each lane. */
  get load(): Record<'interactive' | 'service', { running: number; waiting: number }> {
    return { interactive: this.#interactive.load, service: this.#service.load };
  }

  async text(job: Extract<TemplateJob, { kind: 'handlebars' | 'jsonata' }>, caller: TemplateCaller): Promise<string> {
    return (await this.#run(job, caller)) as string;
  }

  async file(job: Extract<TemplateJob, { kind: 'docx' | 'xlsx' }>, caller: TemplateCaller): Promise<Uint8Array> {
    return (await this.#run(job, caller)) as Uint8Array;
  }

  /** HTML cleaned for LibreOffice (infra/libreoffice/offlineHtml.ts), under the same limits; in the
   * interactive lane, counted to the caller when one is named. */
  async offlineHtml(html: string, caller?: TemplateCaller): Promise<string> {
    return (await this.#run({ kind: 'offline-html', html }, caller)) as string;
  }

  #run(job: WorkerJob, caller: TemplateCaller | undefined): Promise<string | Uint8Array> {
    return (isServiceWork(caller) ? this.#service : this.#interactive).run(job, shareKeyOf(caller));
  }

  async close(): Promise<void> {
    await Promise.all([this.#interactive.close(), this.#service.close()]);
  }
}

/** Threads and their queue: a job waits for a thread, runs there within the limits, and a thread
 * stopped at a limit is replaced at once. A thread takes a while to load the engines (a second or
 * more on a busy machine): the lane starts all its threads on its first job, so that a job finds a
 * loaded one, and a job's time limit counts from when its thread is ready. */
class WorkerLane {
  readonly #threads: number;
  readonly #queue: RenderQueue;
  readonly #limits: { timeoutMs: number; memoryMb: number };
  readonly #idle: Worker[] = [];
  readonly #all = new Set<Worker>();
  /** Each thread's start: settled when it has loaded (or failed to). */
  readonly #started = new WeakMap<Worker, Promise<void>>();
  readonly #ready = new WeakSet<Worker>();
  #next = 0;
  #closed = false;

  constructor(threads: number, queue: RenderQueue, limits: { timeoutMs: number; memoryMb: number }) {
    this.#threads = threads;
    this.#queue = queue;
    this.#limits = limits;
  }

  get load(): { running: number; waiting: number } {
    return { running: this.#queue.running, waiting: this.#queue.waiting };
  }

  async run(job: WorkerJob, key?: string): Promise<string | Uint8Array> {
    if (this.#closed) throw rendererUnavailable('template', 'the service is shutting down');
    this.#warm();
    return this.#queue.run(async () => {
      const worker = this.#take();
      try {
        await this.#started.get(worker);
      } catch (error) {
        this.#stop(worker);
        throw rendererUnavailable(
          'template',
          `a template thread did not start (${error instanceof Error ? error.message : String(error)})`,
        );
      }
      const id = ++this.#next;
      const timeoutMs = this.#limits.timeoutMs;
      try {
        const answer = await withTimeout(
          this.#ask(worker, id, job),
          timeoutMs,
          () => new WorkerStopped(`took longer than ${String(timeoutMs)} ms`),
        );
        this.#idle.push(worker);
        if (answer.failure !== undefined) throw toDomainError(answer.failure);
        return answer.result ?? '';
      } catch (error) {
        if (error instanceof NotSent) {
          this.#idle.push(worker);
          throw new DomainError('FORMATTER.RENDER_FAILED', 'The data could not be handed to the template', [error.message]);
        }
        if (!(error instanceof WorkerStopped)) throw error;
        this.#stop(worker);
        if (error.message === 'ERR_WORKER_OUT_OF_MEMORY')
          throw documentTooLarge(`it needed more than ${String(this.#limits.memoryMb)} MiB`);
        throw new DomainError('FORMATTER.RENDER_FAILED', `The template ${error.message} with this data and was stopped`);
      }
    }, key);
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

  /** An idle thread, a loaded one first. */
  #take(): Worker {
    const loaded = this.#idle.findIndex((w) => this.#ready.has(w));
    return (loaded >= 0 ? this.#idle.splice(loaded, 1)[0] : this.#idle.pop()) ?? this.#spawn();
  }

  /** Every thread of the lane started. */
  #warm(): void {
    while (!this.#closed && this.#all.size < this.#threads) this.#idle.push(this.#spawn());
  }

  #spawn(): Worker {
    const worker = new Worker(WORKER, { resourceLimits: { maxOldGenerationSizeMb: this.#limits.memoryMb, maxYoungGenerationSizeMb: 64 } });
    // An idle worker keeps no process alive on its own.
    worker.unref();
    worker.on('error', () => undefined);
    const started = new Promise<void>((resolve, reject) => {
      const onMessage = (message: { ready?: boolean }) => {
        if (message.ready !== true) return;
        done();
        this.#ready.add(worker);
        resolve();
      };
      const onError = (error: Error) => {
        done();
        reject(error);
      };
      const onExit = (code: number) => {
        done();
        reject(new Error(`it exited with code ${String(code)}`));
      };
      const done = () => {
        worker.off('message', onMessage).off('error', onError).off('exit', onExit);
      };
      worker.on('message', onMessage).on('error', onError).on('exit', onExit);
    });
    // Awaited by the job that takes the thread; a thread stopped before any job took it is no failure.
    started.catch(() => undefined);
    this.#started.set(worker, started);
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
    this.#warm();
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
  if (failure.code !== undefined && failure.status !== undefined && isErrorCode(failure.code))
    return new DomainError(failure.code, failure.message, failure.errors ?? []);
  return new DomainError('FORMATTER.RENDER_FAILED', 'The template could not be rendered with this data', [failure.message]);
}
