// A document from a formatter template version and data, in a format: the template's text (HTML
// through handlebars, SCRIPT through JSONata) printed to PDF by Chromium or converted by the office
// converter, or a FILE template's office file filled and converted. The same template version and
// data give the same bytes.

import type { DocumentRenderers, OfficeInput, Paper, TemplateCaller } from '../../../domain/ports.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import {
  CONTENT_TYPES,
  type DocumentFormat,
  fileNameOf,
  paperOf,
  rendererUnavailable,
  reproduciblePdf,
  SPREADSHEETS,
} from './documents.ts';
import { fromBase64, officeKindOf, refusedContentOf } from './fileTemplates.ts';
import { inProcessTemplates } from './templateJobs.ts';

export type TemplateVersion = JsonObject & {
  id: string;
  code: string;
  inputType: string;
  auditInfo: { version: number; whenInserted?: string; whenUpdated?: string };
};

export type GeneratedDocument = { bytes: Uint8Array; contentType: string; fileName: string };

const OFFICE_HINT =
  'install LibreOffice (Debian: apt-get install libreoffice-writer-nogui libreoffice-calc-nogui python3-uno) or set SOFFICE_PATH; the service finds it at start';
const PDF_HINT = 'no Chromium was configured for this process';

/** When the template version was written: the date a PDF or office file is stamped with. */
const versionDate = (t: TemplateVersion): Date => new Date(t.auditInfo.whenUpdated ?? t.auditInfo.whenInserted ?? 0);

/** The paper an office document is set to: the template's documentSize, unless AUTO or absent
 * (then the document keeps its own: a FILE template's, or LibreOffice's default, A4). */
const officePaper = (template: TemplateVersion): { paper?: Paper } =>
  template.documentSize === undefined || template.documentSize === 'AUTO' ? {} : { paper: paperOf(template.documentSize) };

const runner = (renderers: DocumentRenderers) => renderers.templates ?? inProcessTemplates;

/** The text a stored HTML or SCRIPT template gives for some data (HTML-escaped unless SOURCE),
 * rendered as `caller`'s work. */
export async function templateText(
  template: TemplateVersion,
  data: unknown,
  renderers: DocumentRenderers,
  caller: TemplateCaller,
): Promise<string> {
  const source = typeof template.content === 'string' ? template.content : '';
  switch (template.inputType) {
    case 'HTML': {
      const mode = template.documentType === 'SOURCE' ? 'text' : 'html';
      return runner(renderers).text(
        { kind: 'handlebars', key: template.id, version: template.auditInfo.version, source, data, mode },
        caller,
      );
    }
    case 'SCRIPT':
      return runner(renderers).text({ kind: 'jsonata', source, data }, caller);
    default:
      throw new DomainError(
        'FORMATTER.NOT_RENDERABLE',
        `A ${template.inputType} template is not text: generate a document from it instead`,
        ['inputType: FILE templates are office files filled with the data (POST /api/v1/formatter/documents/{code})'],
      );
  }
}

export async function generateDocument(
  template: TemplateVersion,
  data: unknown,
  format: DocumentFormat,
  renderers: DocumentRenderers,
  caller: TemplateCaller,
): Promise<GeneratedDocument> {
  const bytes =
    template.inputType === 'FILE'
      ? await fromFile(template, data, format, renderers, caller)
      : await fromText(template, data, format, renderers, caller);
  return { bytes, contentType: CONTENT_TYPES[format], fileName: fileNameOf(template.code, format) };
}

async function fromText(
  template: TemplateVersion,
  data: unknown,
  format: DocumentFormat,
  renderers: DocumentRenderers,
  caller: TemplateCaller,
): Promise<Uint8Array> {
  const text = await templateText(template, data, renderers, caller);
  if (format === 'html') return new TextEncoder().encode(text);
  if (format === 'pdf') {
    if (renderers.pdf === undefined) throw rendererUnavailable('PDF', PDF_HINT);
    return reproduciblePdf(await renderers.pdf.pdf(text, paperOf(template.documentSize), caller), versionDate(template));
  }
  const from: OfficeInput = SPREADSHEETS.has(format) ? 'html-table' : 'html-text';
  return office(renderers).convert(new TextEncoder().encode(text), from, format, {
    date: versionDate(template),
    ...officePaper(template),
    caller,
  });
}

const office = (renderers: DocumentRenderers) => {
  if (renderers.office === undefined) throw rendererUnavailable('office', OFFICE_HINT);
  return renderers.office;
};

async function fromFile(
  template: TemplateVersion,
  data: unknown,
  format: DocumentFormat,
  renderers: DocumentRenderers,
  caller: TemplateCaller,
): Promise<Uint8Array> {
  const bytes = typeof template.content === 'string' ? fromBase64(template.content) : undefined;
  const kind = bytes === undefined ? undefined : officeKindOf(bytes);
  if (bytes === undefined || kind === undefined) {
    throw new DomainError('FORMATTER.NOT_RENDERABLE', 'This FILE template holds no office file', [
      'content: a DOCX, XLSX, ODT or ODS file in base64',
    ]);
  }
  // Saved before SVG images or external references were refused: still never handed to LibreOffice
  // or to a recipient.
  const refused = refusedContentOf(bytes, kind);
  if (refused.length > 0) {
    throw new DomainError(
      'FORMATTER.NOT_RENDERABLE',
      'This FILE template holds content a FILE template may no longer hold: save it again without it',
      refused.map((line) => `content: ${line}`),
    );
  }
  if (format === 'html') {
    throw new DomainError('FORMATTER.FORMAT_NOT_AVAILABLE', 'A FILE template makes office documents and PDF, not HTML', [
      'format: one of pdf, docx, doc, odt (and xlsx, xls, ods for spreadsheets)',
    ]);
  }
  const date = versionDate(template);
  if (kind === 'xlsx' || kind === 'ods') return fromSpreadsheet(template, bytes, kind, data, format, renderers, caller);
  if (SPREADSHEETS.has(format)) {
    throw new DomainError('FORMATTER.FORMAT_NOT_AVAILABLE', `A ${kind.toUpperCase()} template makes text documents`, [
      'format: one of pdf, docx, doc, odt',
    ]);
  }
  // docxtemplater fills DOCX; an ODT goes through DOCX and back.
  const docx = kind === 'docx' ? bytes : await office(renderers).convert(bytes, kind, 'docx', { date, caller });
  const filled = await runner(renderers).file({ kind: 'docx', bytes: docx, data, date: date.toISOString() }, caller);
  if (format === 'docx') return filled;
  const converted = await office(renderers).convert(filled, 'docx', format, { date, ...officePaper(template), caller });
  return format === 'pdf' ? reproduciblePdf(converted, date) : converted;
}

/** An XLSX (or an ODS, through XLSX) filled cell by cell, then converted when the format differs. */
async function fromSpreadsheet(
  template: TemplateVersion,
  bytes: Uint8Array,
  kind: 'xlsx' | 'ods',
  data: unknown,
  format: Exclude<DocumentFormat, 'html'>,
  renderers: DocumentRenderers,
  caller: TemplateCaller,
): Promise<Uint8Array> {
  if (!SPREADSHEETS.has(format) && format !== 'pdf') {
    throw new DomainError('FORMATTER.FORMAT_NOT_AVAILABLE', `A ${kind.toUpperCase()} template makes spreadsheets`, [
      'format: one of xlsx, xls, ods, pdf',
    ]);
  }
  const date = versionDate(template);
  const xlsx = kind === 'xlsx' ? bytes : await office(renderers).convert(bytes, kind, 'xlsx', { date, caller });
  const filled = await runner(renderers).file(
    { kind: 'xlsx', bytes: xlsx, data, date: date.toISOString(), key: template.id, version: template.auditInfo.version },
    caller,
  );
  if (format === 'xlsx') return filled;
  const converted = await office(renderers).convert(filled, 'xlsx', format, { date, ...officePaper(template), caller });
  return format === 'pdf' ? reproduciblePdf(converted, date) : converted;
}
