// The document renderers a process uses, from its configuration: worker threads for template
// evaluation, Chromium for PDF (always: it is found or unpacked on the first PDF), LibreOffice for
// office formats when it is installed.

import type { DocumentRenderers } from '../domain/ports.ts';
import { ChromiumPdfRenderer } from './chromium/pdfRenderer.ts';
import type { Config } from './config.ts';
import { findLibreOffice, LibreOfficeConverter } from './libreoffice/officeConverter.ts';
import { WorkerTemplateRunner } from './templates/templateRunner.ts';

type RendererLogger = { info: (obj: object, msg: string) => void; warn: (obj: object, msg: string) => void };

export type RendererSettings = Partial<
  Pick<
    Config,
    | 'CHROME_PATH'
    | 'SOFFICE_PATH'
    | 'TEMPLATE_TIMEOUT_MS'
    | 'TEMPLATE_JOBS_PER_CALLER'
    | 'RENDER_SLOTS'
    | 'RENDER_QUEUE_LIMIT'
    | 'RENDER_TIMEOUT_MS'
    | 'RENDER_RECYCLE_AFTER'
  >
>;

export function openDocumentRenderers(settings: RendererSettings = {}, logger?: RendererLogger): DocumentRenderers {
  const discipline = {
    ...(settings.RENDER_SLOTS === undefined ? {} : { pages: settings.RENDER_SLOTS }),
    ...(settings.RENDER_QUEUE_LIMIT === undefined ? {} : { queueLimit: settings.RENDER_QUEUE_LIMIT }),
    ...(settings.RENDER_TIMEOUT_MS === undefined ? {} : { timeoutMs: settings.RENDER_TIMEOUT_MS }),
    ...(settings.RENDER_RECYCLE_AFTER === undefined ? {} : { recycleAfter: settings.RENDER_RECYCLE_AFTER }),
    ...(settings.TEMPLATE_JOBS_PER_CALLER === undefined ? {} : { jobsPerCaller: settings.TEMPLATE_JOBS_PER_CALLER }),
    ...(logger === undefined ? {} : { logger }),
  };
  const { pages: _slots, ...officeDiscipline } = discipline;
  const templates = new WorkerTemplateRunner({
    ...(settings.TEMPLATE_TIMEOUT_MS === undefined ? {} : { timeoutMs: settings.TEMPLATE_TIMEOUT_MS }),
    ...(settings.TEMPLATE_JOBS_PER_CALLER === undefined ? {} : { jobsPerCaller: settings.TEMPLATE_JOBS_PER_CALLER }),
    ...(settings.RENDER_QUEUE_LIMIT === undefined ? {} : { queueLimit: 2 * settings.RENDER_QUEUE_LIMIT }),
  });
  return {
    templates,
    pdf: new ChromiumPdfRenderer({ executablePath: settings.CHROME_PATH, ...discipline }),
    // LibreOffice when it is installed; without it the office formats answer 503 saying how to install it.
    ...(findLibreOffice(settings.SOFFICE_PATH) === undefined
      ? {}
      : {
          office: new LibreOfficeConverter({
            sofficePath: settings.SOFFICE_PATH,
            ...officeDiscipline,
            offlineHtml: (html, caller) => templates.offlineHtml(html, caller),
          }),
        }),
  };
}
