// Office files for tests: a minimal DOCX built from body XML (with optional relationships), and the
// text of an office file's parts, read as a reader of the format would find it.

import PizZip from 'pizzip';

const W = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main';
const R = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships';
const WP = 'http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing';

/** A DOCX whose body is `paragraphs` (WordprocessingML), with extra document relationships. */
export function docxOf(paragraphs: string, relationships = ''): Uint8Array {
  const zip = new PizZip();
  zip.file(
    '[Content_Types].xml',
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">' +
      '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>' +
      '<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>',
  );
  zip.file(
    '_rels/.rels',
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">' +
      '<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>',
  );
  zip.file(
    'word/_rels/document.xml.rels',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">${relationships}</Relationships>`,
  );
  zip.file(
    'word/document.xml',
    `<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="${W}" xmlns:r="${R}" xmlns:wp="${WP}"><w:body>${paragraphs}</w:body></w:document>`,
  );
  return zip.generate({ type: 'uint8array', compression: 'DEFLATE' });
}

/** An office file as a FILE template's content. */
export const base64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

/** A paragraph of plain text. */
export const para = (text: string): string => `<w:p><w:r><w:t xml:space="preserve">${text}</w:t></w:r></w:p>`;

/** The text of a part of an office file, its markup removed (paragraph and cell ends as spaces). */
export function partText(bytes: Uint8Array, part: string): string {
  const xml = new PizZip(bytes).file(part)?.asText() ?? '';
  return xml
    .replace(/<\/(w:p|text:p|text:h|si|c|table:table-cell)>/g, ' ')
    .replace(/<[^>]+>/g, '')
    .replace(/&amp;/g, '&')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/\s+/g, ' ');
}

export const isZip = (bytes: Uint8Array): boolean => bytes[0] === 0x50 && bytes[1] === 0x4b;
/** The OLE2 compound file of .doc and .xls. */
export const isOle = (bytes: Uint8Array): boolean => Buffer.from(bytes.subarray(0, 4)).toString('hex') === 'd0cf11e0';
