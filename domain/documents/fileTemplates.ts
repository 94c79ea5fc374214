// FILE templates: `content` is an office file in base64 whose text holds placeholders. A DOCX is
// filled by docxtemplater ({{name}}, {{#items}}…{{/items}} loops, {{^x}}…{{/x}} inverted sections;
// values are inserted as text, never as markup); other office files are converted to DOCX first
// (domain/documents/generate.ts). Placeholders are checked when the template is saved.

import Docxtemplater from 'docxtemplater';
import PizZip from 'pizzip';
import { DomainError } from '../shared/errors.ts';

export type OfficeKind = 'docx' | 'xlsx' | 'odt' | 'ods';

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The bytes of a base64 text, or undefined when it is not base64. */
export function fromBase64(text: string): Uint8Array | undefined {
  const compact = text.replace(/\s+/g, '');
  return compact !== '' && BASE64.test(compact) ? new Uint8Array(Buffer.from(compact, 'base64')) : undefined;
}

const ODF_TYPES: Readonly<Record<string, OfficeKind>> = {
  'application/vnd.oasis.opendocument.text': 'odt',
  'application/vnd.oasis.opendocument.spreadsheet': 'ods',
};

/** What office file the bytes are: a DOCX, an XLSX, an ODT or an ODS (by the parts of the zip). */
export function officeKindOf(bytes: Uint8Array): OfficeKind | undefined {
  let zip: PizZip;
  try {
    zip = new PizZip(bytes);
  } catch {
    return undefined;
  }
  if (zip.file('word/document.xml') !== null) return 'docx';
  if (zip.file('xl/workbook.xml') !== null) return 'xlsx';
  const mimetype = zip.file('mimetype')?.asText().trim();
  return mimetype === undefined ? undefined : ODF_TYPES[mimetype];
}

type TemplateErrorDetail = { properties?: { explanation?: string; file?: string; offset?: number } };
const explanationsOf = (error: unknown): string[] => {
  const e = error as { properties?: { errors?: TemplateErrorDetail[]; explanation?: string }; message?: string };
  const details: TemplateErrorDetail[] = e.properties?.errors ?? [e];
  return details.map((d) => `${d.properties?.explanation ?? (error as Error).message}${d.properties?.file === undefined ? '' : ` (in ${d.properties.file})`}`);
};

const OPTIONS = {
  paragraphLoop: true,
  linebreaks: true,
  delimiters: { start: '{{', end: '}}' },
  errorLogging: false,
  // An absent value is empty text, as in the HTML templates.
  nullGetter: () => '',
} as const;

/** Why a FILE template's content cannot be used, as `content: reason` lines. */
export function fileTemplateProblems(content: string, field = 'content'): string[] {
  const bytes = fromBase64(content);
  if (bytes === undefined) return [`${field}: a FILE template's content is an office file in base64`];
  const kind = officeKindOf(bytes);
  if (kind === undefined) return [`${field}: not a DOCX or ODT file`];
  if (kind === 'xlsx' || kind === 'ods') return [`${field}: spreadsheets are not FILE templates yet: a DOCX or ODT file (or an HTML template with a table for xlsx, xls, ods)`];
  if (kind !== 'docx') return [];
  try {
    new Docxtemplater<PizZip>(new PizZip(bytes), OPTIONS);
    return [];
  } catch (error) {
    return explanationsOf(error).map((e) => `${field}: ${e}`);
  }
}

/** A DOCX with its placeholders filled from the data; every part dated `date`, so that the same
 * template version and data give the same bytes. */
export function fillDocx(bytes: Uint8Array, data: unknown, date: Date): Uint8Array {
  let doc: Docxtemplater<PizZip>;
  try {
    doc = new Docxtemplater<PizZip>(new PizZip(bytes), OPTIONS);
    doc.render(data);
  } catch (error) {
    throw new DomainError('FORMATTER.RENDER_FAILED', 'UNPROCESSABLE_ENTITY', 'The template could not be filled with this data', explanationsOf(error));
  }
  return datedZip(doc.getZip(), date);
}

/** An office file (a zip) with every part dated `date`: the same content then gives the same
 * bytes. An ODF's `mimetype` stays first and uncompressed, as the format requires. */
export function redateZip(bytes: Uint8Array, date: Date): Uint8Array {
  return datedZip(new PizZip(bytes), date);
}

function datedZip(zip: PizZip, date: Date): Uint8Array {
  for (const file of Object.values(zip.files)) {
    file.date = date;
    if (file.name === 'mimetype') file.options.compression = 'STORE';
  }
  return zip.generate({ type: 'uint8array', compression: 'DEFLATE' });
}
