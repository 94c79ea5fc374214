// A template worker thread: evaluates the jobs its pool sends (domain/documents/templateJobs.ts),
// one at a time, and answers each with its result or its error as plain data.

import { parentPort } from 'node:worker_threads';
import { runTemplateJob } from '../../domain/documents/templateJobs.ts';
import type { TemplateJob } from '../../domain/ports.ts';
import { DomainError } from '../../domain/shared/errors.ts';

parentPort?.on('message', (message: { id: number; job: TemplateJob }) => {
  runTemplateJob(message.job).then(
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
