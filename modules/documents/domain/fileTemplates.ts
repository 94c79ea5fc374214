// FILE templates: `content` is an office file in base64 whose text holds placeholders. A DOCX is
// filled by docxtemplater ({{name}}, {{#items}}…{{/items}} loops, {{^x}}…{{/x}} inverted sections;
// values are inserted as text, never as markup); an XLSX by ExcelJS, each text cell a handlebars
// template of its own; an ODT or ODS is converted to DOCX or XLSX first (domain/documents/generate.ts).
// A DOCX's placeholders are checked when the template is saved, a spreadsheet's cells when filled.

import Docxtemplater from 'docxtemplater';
import ExcelJS from 'exceljs';
import PizZip from 'pizzip';
import { DomainError } from '../../../domain/shared/errors.ts';
import { isBase64 } from '../../../domain/shared/fields.ts';
import { externalReferencesOf } from './externalReferences.ts';
import { renderHandlebars, type CompiledTemplates } from './templates.ts';

export type OfficeKind = 'docx' | 'xlsx' | 'odt' | 'ods';

/** The bytes of a base64 text, or undefined when it is not base64. */
export function fromBase64(text: string): Uint8Array | undefined {
  const compact = text.replace(/\s+/g, '');
  return compact !== '' && isBase64(compact) ? new Uint8Array(Buffer.from(compact, 'base64')) : undefined;
}

const ODF_TYPES: Readonly<Record<string, OfficeKind>> = {
  'application/vnd.oasis.opendocument.text': 'odt',
  'application/vnd.oasis.opendocument.spreadsheet': 'ods',
};

/** What office file the bytes are: a DOCX, an XLSX, an ODT or an ODS (by the parts of the zip). */
export function officeKindOf(bytes: Uint8Array): OfficeKind | undefined {
  try {
    const zip = new PizZip(bytes);
    if (zip.file('word/document.xml') !== null) return 'docx';
    if (zip.file('xl/workbook.xml') !== null) return 'xlsx';
    const mimetype = zip.file('mimetype')?.asText().trim();
    return mimetype === undefined ? undefined : ODF_TYPES[mimetype];
  } catch {
    // Not a zip, or a part that does not inflate.
    return undefined;
  }
}

/** Whether bytes begin as a raster image LibreOffice draws without following any reference: PNG,
 * JPEG, GIF, WebP, BMP, TIFF, and the Windows metafiles EMF and WMF. */
export function isRaster(bytes: Uint8Array): boolean {
  const hex = Array.from(bytes.subarray(0, 12), (b) => b.toString(16).padStart(2, '0')).join('');
  return (
    hex.startsWith('89504e470d0a1a0a') ||
    hex.startsWith('ffd8ff') ||
    hex.startsWith('474946383') ||
    (hex.startsWith('52494646') && hex.slice(16, 24) === '57454250') ||
    hex.startsWith('424d') ||
    hex.startsWith('49492a00') ||
    hex.startsWith('4d4d002a') ||
    hex.startsWith('01000000') ||
    hex.startsWith('d7cdc69a') ||
    hex.startsWith('01000900')
  );
}

/** The images of an office file that are not raster (by their bytes, whatever their names):
 * LibreOffice's SVG renderer follows an image's reference to a local file into the document, so a
 * template may hold no SVG, whether named .svg or not. */
export function svgPartsOf(bytes: Uint8Array): string[] {
  try {
    const zip = new PizZip(bytes);
    return Object.values(zip.files)
      .filter(
        (f) => !f.dir && (/\.svgz?$/i.test(f.name) || (/^(word|xl|ppt)\/media\/|^Pictures\//.test(f.name) && !isRaster(f.asUint8Array()))),
      )
      .map((f) => f.name);
  } catch {
    return [];
  }
}

/** The most lines a refusal names. */
const MAX_REFUSED_LINES = 20;

/** What a FILE template may not hold, as lines: images that are not raster, and references to
 * anything outside the file (domain/documents/externalReferences.ts). */
export function refusedContentOf(bytes: Uint8Array, kind: OfficeKind): string[] {
  const svg = svgPartsOf(bytes);
  const lines = [
    ...(svg.length === 0
      ? []
      : [
          `only raster images (PNG, JPEG, GIF, WebP, BMP, TIFF, EMF, WMF) are allowed in a FILE template, not ${svg.slice(0, 3).join(', ')}`,
        ]),
    ...externalReferencesOf(new PizZip(bytes), kind === 'odt' || kind === 'ods'),
  ];
  return lines.length <= MAX_REFUSED_LINES
    ? lines
    : [...lines.slice(0, MAX_REFUSED_LINES), `… and ${String(lines.length - MAX_REFUSED_LINES)} more`];
}

type TemplateErrorDetail = { properties?: { explanation?: string; file?: string; offset?: number } };
const explanationsOf = (error: unknown): string[] => {
  const e = error as { properties?: { errors?: TemplateErrorDetail[]; explanation?: string }; message?: string };
  const details: TemplateErrorDetail[] = e.properties?.errors ?? [e];
  return details.map(
    (d) =>
      `${d.properties?.explanation ?? (error as Error).message}${d.properties?.file === undefined ? '' : ` (in ${d.properties.file})`}`,
  );
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
  if (kind === undefined) return [`${field}: not a DOCX, XLSX, ODT or ODS file`];
  const refused = refusedContentOf(bytes, kind);
  if (refused.length > 0) return refused.map((line) => `${field}: ${line}`);
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
    throw new DomainError('FORMATTER.RENDER_FAILED', 'The template could not be filled with this data', explanationsOf(error));
  }
  return datedZip(doc.getZip(), date);
}

/** An office file (a zip) with every part dated `date` and no folder entries: the same content then
 * gives the same bytes. A folder entry holds nothing a reader needs (a part's path names its
 * folders), and which empty ones LibreOffice writes depends on how long the document stayed open:
 * Writer adds Configurations2/accelerator/ and images/Bitmaps/ once its idle work has run (after
 * ~0.2 s, so a conversion slowed by load gained them). An ODF's `mimetype` stays first and
 * uncompressed, as the format requires. */
export function redateZip(bytes: Uint8Array, date: Date): Uint8Array {
  return datedZip(new PizZip(bytes), date);
}

function datedZip(zip: PizZip, date: Date): Uint8Array {
  for (const [name, file] of Object.entries(zip.files)) {
    if (file.dir) {
      // eslint-disable-next-line @typescript-eslint/no-dynamic-delete -- PizZip keeps its entries in this record; remove() would take a folder's parts with it
      delete zip.files[name];
      continue;
    }
    file.date = date;
    if (file.name === 'mimetype') file.options.compression = 'STORE';
  }
  return zip.generate({ type: 'uint8array', compression: 'DEFLATE' });
}

/** A cell that is one placeholder and nothing else: its value keeps its type (a number stays a number). */
const SOLE_PLACEHOLDER = /^\{\{\s*([A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)\s*\}\}$/;
const own = (data: unknown, path: string): unknown =>
  path
    .split('.')
    .reduce<unknown>(
      (v, k) => (typeof v === 'object' && v !== null && Object.hasOwn(v, k) ? (v as Record<string, unknown>)[k] : undefined),
      data,
    );

/** An XLSX with every text cell that holds `{{` rendered as a handlebars template (as text) over the
 * data; a cell that is a single `{{path}}` to a number, boolean or date-less value keeps its type.
 * The workbook's dates and every part are dated `date`. */
export async function fillXlsx(
  bytes: Uint8Array,
  data: unknown,
  date: Date,
  template: { key: string; version: number },
  compiled: CompiledTemplates,
): Promise<Uint8Array> {
  const workbook = new ExcelJS.Workbook();
  try {
    await workbook.xlsx.load(Buffer.from(bytes) as unknown as ArrayBuffer);
  } catch (error) {
    throw new DomainError('FORMATTER.NOT_RENDERABLE', 'The XLSX template could not be read', [
      `content: ${error instanceof Error ? error.message : String(error)}`,
    ]);
  }
  workbook.eachSheet((sheet) => {
    sheet.eachRow((row) => {
      row.eachCell((cell) => {
        const text = typeof cell.value === 'string' ? cell.value : undefined;
        if (!text?.includes('{{')) return;
        const sole = SOLE_PLACEHOLDER.exec(text.trim())?.[1];
        const value = sole === undefined ? undefined : own(data, sole);
        if (typeof value === 'number' || typeof value === 'boolean') {
          cell.value = value;
          return;
        }
        try {
          cell.value = renderHandlebars(
            compiled,
            { key: `${template.key}:${sheet.name}!${cell.address}`, version: template.version },
            text,
            data,
            'text',
          );
        } catch (error) {
          const e = error as DomainError;
          throw new DomainError(
            e.code,
            `Cell ${sheet.name}!${cell.address}: ${e.message}`,
            e.errors.map((l) => `${sheet.name}!${cell.address}: ${l}`),
          );
        }
      });
    });
  });
  workbook.created = date;
  workbook.modified = date;
  workbook.lastPrinted = date;
  return redateZip(new Uint8Array(await workbook.xlsx.writeBuffer()), date);
}
