// What a generated document is: its formats and their content types, the paper a template's
// documentSize prints on, the errors of the renderers, and the fixes that make a PDF the same
// bytes for the same template version and data.

import type { Paper } from '../ports.ts';
import { DomainError } from '../shared/errors.ts';

export const DocumentFormats = ['html', 'pdf', 'docx', 'doc', 'odt', 'xlsx', 'xls', 'ods'] as const;
export type DocumentFormat = (typeof DocumentFormats)[number];

export const CONTENT_TYPES: Readonly<Record<DocumentFormat, string>> = {
  html: 'text/html; charset=utf-8',
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  doc: 'application/msword',
  odt: 'application/vnd.oasis.opendocument.text',
  xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  xls: 'application/vnd.ms-excel',
  ods: 'application/vnd.oasis.opendocument.spreadsheet',
};

/** Formats whose document is a spreadsheet (made from an HTML template's tables). */
export const SPREADSHEETS: ReadonlySet<DocumentFormat> = new Set(['xlsx', 'xls', 'ods']);

const A4 = { widthMm: 210, heightMm: 297 };
/** documentSize → paper: ISO A4 and B5 (176 × 250 mm), US Letter (215.9 × 279.4 mm); PORTRAIT and
 * LANDSCAPE are A4 in that orientation; AUTO (and none) is A4 portrait. */
export function paperOf(documentSize: unknown): Paper {
  switch (documentSize) {
    case 'B5':
      return { name: 'B5', widthMm: 176, heightMm: 250, landscape: false };
    case 'LETTER':
      return { name: 'Letter', widthMm: 215.9, heightMm: 279.4, landscape: false };
    case 'LANDSCAPE':
      return { name: 'A4', ...A4, landscape: true };
    default:
      return { name: 'A4', ...A4, landscape: false };
  }
}

/** The file name a document is offered under: the template's code made safe for a header, and
 * the format's extension. */
export function fileNameOf(code: string, format: DocumentFormat): string {
  const base = code.normalize('NFKD').replace(/[^\w.-]+/g, '_').replace(/^[._]+/, '').slice(0, 100);
  return `${base === '' ? 'document' : base}.${format}`;
}

export const rendererBusy = (what: string, retryAfterSeconds: number): DomainError =>
  new DomainError('FORMATTER.RENDERER_BUSY', 'SERVICE_UNAVAILABLE', `The ${what} renderer is busy: try again in ${String(retryAfterSeconds)} s`, [], {
    retryAfterSeconds,
  });

export const renderTimedOut = (what: string, ms: number): DomainError =>
  new DomainError('FORMATTER.RENDER_TIMEOUT', 'SERVICE_UNAVAILABLE', `The ${what} render took longer than ${String(ms)} ms and was stopped`, [], {
    retryAfterSeconds: 1,
  });

export const documentTooLarge = (detail: string): DomainError =>
  new DomainError('FORMATTER.DOCUMENT_TOO_LARGE', 'PAYLOAD_TOO_LARGE', `The template made too large a document from this data (${detail})`);

export const rendererUnavailable = (what: string, hint: string): DomainError =>
  new DomainError('FORMATTER.RENDERER_UNAVAILABLE', 'SERVICE_UNAVAILABLE', `No ${what} renderer: ${hint}`);

/** A PDF date in UTC, `D:YYYYMMDDHHmmSS+00'00'`. */
const pdfDate = (date: Date): string => `D:${date.toISOString().replace(/[-:T]/g, '').slice(0, 14)}+00'00'`;
const latin1 = new TextDecoder('latin1');

/**
 * Chromium stamps a PDF with the time it printed it (CreationDate, ModDate, in the renderer's time
 * zone: UTC here) and nothing else that varies. This sets both to `date` (the template version's
 * time), in place and at the same length so that the cross-reference offsets stay right: the same
 * template version and data then give the same bytes.
 */
export function reproduciblePdf(pdf: Uint8Array, date: Date): Uint8Array {
  const text = latin1.decode(pdf);
  const stamp = pdfDate(date);
  const out = new Uint8Array(pdf);
  for (const m of text.matchAll(/\/(?:CreationDate|ModDate)\s*\((D:[^)]*)\)/g)) {
    const value = m[1] ?? '';
    // Another zone's offset (+05'30') keeps the length; a bare `Z` would not: leave it as printed.
    if (value.length !== stamp.length) continue;
    const at = m.index + m[0].indexOf(value);
    for (let i = 0; i < stamp.length; i++) out[at + i] = stamp.charCodeAt(i);
  }
  return out;
}
