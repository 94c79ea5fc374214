// A template worker thread: evaluates the jobs its pool sends (domain/documents/templateJobs.ts, and
// the HTML cleaning before LibreOffice), one at a time, and answers each with its result or its
// error as plain data.

import { parentPort } from 'node:worker_threads';
import { runTemplateJob } from '../../modules/documents/domain/templateJobs.ts';
import { CompiledTemplates } from '../../modules/documents/domain/templates.ts';
import { offlineHtml } from '../libreoffice/offlineHtml.ts';
import type { TemplateJob } from '../../domain/ports.ts';
import { DomainError } from '../../domain/shared/errors.ts';

/** A template job, or HTML to clean for LibreOffice (parse5 over a large text takes seconds). */
export type WorkerJob = TemplateJob | { kind: 'offline-html'; html: string };

/** This thread's compiled templates (a template's next version replaces its entry). */
const compiled = new CompiledTemplates();

const run = async (job: WorkerJob): Promise<string | Uint8Array> =>
  job.kind === 'offline-html' ? offlineHtml(job.html) : runTemplateJob(job, compiled);

parentPort?.on('message', (message: { id: number; job: WorkerJob }) => {
  run(message.job).then(
    (result) => {
      parentPort?.postMessage({ id: message.id, result });
    },
    (error: unknown) => {
      const failure =
        error instanceof DomainError
          ? { code: error.code, status: error.status, message: error.message, errors: [...error.errors] }
          : { message: error instanceof Error ? (error.message.split('\n')[0] ?? 'failed') : String(error) };
      parentPort?.postMessage({ id: message.id, failure });
    },
  );
});

// The engines are loaded: the pool counts a job's time limit from here.
parentPort?.postMessage({ ready: true });
