// Every evaluation of a template over data, as one job: handlebars and JSONata texts, DOCX and XLSX
// files filled. They are CPU- and memory-bound on data the caller chose (nested loops multiply), so
// the service runs them away from its event loop with a time and memory limit (the TemplateRunner
// port; infra/templates/ runs them in worker threads); runTemplateJob is the evaluation itself.

import type { TemplateJob, TemplateRunner } from '../../../domain/ports.ts';
import { documentTooLarge } from './documents.ts';
import { fillDocx, fillXlsx } from './fileTemplates.ts';
import { CompiledTemplates, renderHandlebars, renderJsonata } from './templates.ts';

/** The largest text a template may make from its data (characters). */
export const MAX_DOCUMENT_CHARS = 16 * 1024 * 1024;

/** Evaluates one job; `compiled` is the evaluator's own cache of compiled handlebars templates. */
export async function runTemplateJob(job: TemplateJob, compiled: CompiledTemplates): Promise<string | Uint8Array> {
  let result: string | Uint8Array;
  switch (job.kind) {
    case 'handlebars':
      result = renderHandlebars(compiled, { key: job.key, version: job.version }, job.source, job.data, job.mode);
      break;
    case 'jsonata':
      result = await renderJsonata(job.source, job.data);
      break;
    case 'docx':
      result = fillDocx(job.bytes, job.data, new Date(job.date));
      break;
    case 'xlsx':
      result = await fillXlsx(job.bytes, job.data, new Date(job.date), { key: job.key, version: job.version }, compiled);
      break;
  }
  if (typeof result === 'string' && result.length > MAX_DOCUMENT_CHARS) {
    throw documentTooLarge(`${String(result.length)} characters; at most ${String(MAX_DOCUMENT_CHARS)}`);
  }
  return result;
}

/** The jobs run here, on the caller's thread, whoever's they are: for tools and tests without a
 * runner. Each job compiles its template afresh (no cache is kept between them). */
export const inProcessTemplates: TemplateRunner = {
  text: async (job) => (await runTemplateJob(job, new CompiledTemplates())) as string,
  file: async (job) => (await runTemplateJob(job, new CompiledTemplates())) as Uint8Array,
  close: () => Promise.resolve(),
};
