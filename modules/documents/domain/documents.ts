// What a generated document is: its formats and their content types, the paper a template's
// documentSize prints on, the errors of the renderers, and the fixes that make a PDF the same
// bytes for the same template version and data.

import type { Paper } from '../../../domain/ports.ts';
import { createHash } from 'node:crypto';
import { DomainError } from '../../../domain/shared/errors.ts';

const sha256Hex = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

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
  const base = code
    .normalize('NFKD')
    .replace(/[^\w.-]+/g, '_')
    .replace(/^[._]+/, '')
    .slice(0, 100);
  return `${base === '' ? 'document' : base}.${format}`;
}

export const rendererBusy = (what: string, retryAfterSeconds: number): DomainError =>
  new DomainError('FORMATTER.RENDERER_BUSY', `The ${what} renderer is busy: try again in ${String(retryAfterSeconds)} s`, [], {
    retryAfterSeconds,
  });

/** A caller (the token's subject) past its share of a renderer: `limit` renders waiting or running. */
export const callerBusy = (what: string, limit: number, setting: string, retryAfterSeconds: number): DomainError =>
  new DomainError(
    'FORMATTER.TOO_MANY_RENDERS_OF_CALLER',
    `A caller may have at most ${String(limit)} ${what} renders waiting or running at once (${setting}): try again in ${String(retryAfterSeconds)} s`,
    [],
    { retryAfterSeconds },
  );

export const renderTimedOut = (what: string, ms: number): DomainError =>
  new DomainError('FORMATTER.RENDER_TIMEOUT', `The ${what} render took longer than ${String(ms)} ms and was stopped`, [], {
    retryAfterSeconds: 1,
  });

export const documentTooLarge = (detail: string): DomainError =>
  new DomainError('FORMATTER.DOCUMENT_TOO_LARGE', `The template made too large a document from this data (${detail})`);

export const rendererUnavailable = (what: string, hint: string): DomainError =>
  new DomainError('FORMATTER.RENDERER_UNAVAILABLE', `No ${what} renderer: ${hint}`);

const latin1 = new TextDecoder('latin1');

/** A PDF date string rewritten to `date` (UTC) at the same length: the 14 digits replaced, a zone
 * offset made +00'00', a `Z` form kept as it is written. */
function restamped(value: string, date: Date): string {
  const digits = date.toISOString().replace(/[-:T]/g, '').slice(0, 14);
  const zone = value.slice(16).replace(/^[+-]\d\d'?\d\d'?/, (offset) => `+00'00'`.slice(0, offset.length));
  return `D:${digits}${zone}`.slice(0, value.length).padEnd(value.length, ' ');
}

/**
 * A PDF carries the time it was printed (CreationDate, ModDate) and, from LibreOffice, a random file
 * identifier (/ID) and a checksum of the file with those (/DocChecksum). This sets both dates to
 * `date` (the template version's time) and the identifier and checksum to a hash of the rest, in place and at the same lengths so that the cross-reference
 * offsets stay right: the same template version and data then give the same bytes.
 */
export function reproduciblePdf(pdf: Uint8Array, date: Date): Uint8Array {
  const text = latin1.decode(pdf);
  const out = new Uint8Array(pdf);
  const write = (at: number, value: string) => {
    for (let i = 0; i < value.length; i++) out[at + i] = value.charCodeAt(i);
  };
  for (const m of text.matchAll(/\/(?:CreationDate|ModDate)\s*\((D:\d{14}[^)]*)\)/g)) {
    const value = m[1] ?? '';
    write(m.index + m[0].indexOf(value), restamped(value, date));
  }
  // The identifier and checksum live in the trailer, the file's last dictionary (never in a
  // document's title or text, which a template controls).
  const trailerAt = Math.max(0, text.lastIndexOf('trailer'));
  const trailer = text.slice(trailerAt);
  const ids = [...trailer.matchAll(/\/ID\s*\[\s*<([0-9A-Fa-f]+)>\s*<([0-9A-Fa-f]+)>\s*\]/g)].flatMap((m) => {
    const first = m[1] ?? '';
    const second = m[2] ?? '';
    const at = trailerAt + m.index + m[0].indexOf(`<${first}>`) + 1;
    return [
      { at, length: first.length },
      { at: trailerAt + m.index + m[0].lastIndexOf(`<${second}>`) + 1, length: second.length },
    ];
  });
  // LibreOffice's checksum of the file as it first wrote it (with its own dates).
  for (const m of trailer.matchAll(/\/DocChecksum\s*\/([0-9A-Fa-f]+)/g))
    ids.push({ at: trailerAt + m.index + m[0].length - (m[1] ?? '').length, length: (m[1] ?? '').length });
  if (ids.length > 0) {
    for (const id of ids) write(id.at, '0'.repeat(id.length));
    const digest = sha256Hex(out);
    for (const id of ids)
      write(
        id.at,
        digest
          .repeat(Math.ceil(id.length / digest.length))
          .slice(0, id.length)
          .toUpperCase(),
      );
  }
  return out;
}
