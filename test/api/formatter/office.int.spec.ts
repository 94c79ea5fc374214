// Office documents over HTTP with a real LibreOffice (driven over UNO): HTML templates to docx, doc
// and odt, an HTML table to xlsx, xls and ods, FILE templates (a DOCX, an ODT) filled and converted;
// their text read back from the files; the same bytes twice; nothing fetched (a canary server on a
// local port). Skipped, saying so, where LibreOffice is not installed (CI installs it).

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ExcelJS from 'exceljs';
import PizZip from 'pizzip';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DocumentRenderers } from '../../../domain/ports.ts';
import { openDocumentRenderers } from '../../../infra/documentRenderers.ts';
import { findLibreOffice } from '../../../infra/libreoffice/officeConverter.ts';
import { base64, docxOf, isOle, isZip, para, partText } from '../../support/office.ts';
import { mmToPt, readPdf } from '../../support/pdf.ts';
import { startCanary, type Canary } from '../../support/canary.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

const office = findLibreOffice(process.env.SOFFICE_PATH);
if (office === undefined)
  process.stderr.write(
    '[office] skipping the office-format tests: LibreOffice (soffice with python3-uno) not found. Debian: apt-get install libreoffice-writer-nogui libreoffice-calc-nogui python3-uno\n',
  );

let t: TestApp;
let canary: Canary;
let canaryUrl: string;
const documents: DocumentRenderers = openDocumentRenderers();

beforeAll(async () => {
  t = await startTestApp({ documents });
  canary = await startCanary();
  canaryUrl = canary.url;
});
afterAll(async () => {
  await t.close();
  await canary.close();
});

type ErrorBody = { code: string; message: string; errors: string[] };
const save = async (payload: Record<string, unknown>) => {
  const res = await t.call({ method: 'POST', url: '/api/v1/formatter-templates', payload });
  expect(res.statusCode, res.body).toBe(201);
};
const generate = async (code: string, data: unknown, format: string) => {
  const res = await t.call({ method: 'POST', url: `/api/v1/formatter/documents/${code}?format=${format}`, payload: data, as: 'viewer' });
  expect(res.statusCode, res.body).toBe(200);
  return res;
};

const LETTER = '<html><body><h1>Dear {{name}}</h1><p>Your line {{line}} is active since {{since}}.</p></body></html>';
const TABLE =
  '<table><tr><th>Service</th><th>Price</th></tr>{{#each rows}}<tr><td>{{service}}</td><td>{{price}}</td></tr>{{/each}}</table>';
const letterData = { name: 'Grace Hopper', line: '+420 123 456 789', since: '2026-11-01' };
const tableData = {
  rows: [
    { service: 'Fibre', price: 49.9 },
    { service: 'Static IP', price: 5 },
  ],
};

describe.skipIf(office === undefined)('office documents from HTML templates', () => {
  it('docx, doc and odt hold the rendered text, with their content types', async () => {
    await save({ code: 'LETTER', inputType: 'HTML', content: LETTER });
    const docx = await generate('LETTER', letterData, 'docx');
    expect(docx.headers['content-type']).toBe('application/vnd.openxmlformats-officedocument.wordprocessingml.document');
    expect(docx.headers['content-disposition']).toBe('attachment; filename="LETTER.docx"');
    expect(partText(docx.rawPayload, 'word/document.xml')).toContain('Dear Grace Hopper');
    expect(partText(docx.rawPayload, 'word/document.xml')).toContain('Your line +420 123 456 789 is active since 2026-11-01.');
    const odt = await generate('LETTER', letterData, 'odt');
    expect(odt.headers['content-type']).toBe('application/vnd.oasis.opendocument.text');
    expect(partText(odt.rawPayload, 'content.xml')).toContain('Dear Grace Hopper');
    const doc = await generate('LETTER', letterData, 'doc');
    expect(doc.headers['content-type']).toBe('application/msword');
    expect(isOle(doc.rawPayload)).toBe(true);
    expect(doc.rawPayload.toString('utf16le')).toContain('Grace Hopper');
  });

  it("are set to the paper of the template's documentSize (AUTO: the document's own)", async () => {
    const pgSz = (bytes: Buffer) => /<w:pgSz[^>]*>/.exec(new PizZip(bytes).file('word/document.xml')?.asText() ?? '')?.[0] ?? '';
    await save({ code: 'LETTER_US', inputType: 'HTML', documentSize: 'LETTER', content: LETTER });
    expect(pgSz((await generate('LETTER_US', letterData, 'docx')).rawPayload)).toMatch(/w:w="12240" w:h="15840"/);
    await save({ code: 'LETTER_WIDE', inputType: 'HTML', documentSize: 'LANDSCAPE', content: LETTER });
    expect(pgSz((await generate('LETTER_WIDE', letterData, 'docx')).rawPayload)).toMatch(/w:orient="landscape" w:w="16838" w:h="11906"/);
    await save({ code: 'CONTRACT_B5', inputType: 'FILE', documentSize: 'B5', content: base64(docxOf(para('B5 {{x}}'))) });
    const [page] = (await readPdf((await generate('CONTRACT_B5', { x: 1 }, 'pdf')).rawPayload)).pages;
    expect(Math.abs((page?.width ?? 0) - mmToPt(176))).toBeLessThanOrEqual(1);
    expect(Math.abs((page?.height ?? 0) - mmToPt(250))).toBeLessThanOrEqual(1);
  });

  it("xlsx, xls and ods hold the cells of the HTML's table", async () => {
    await save({ code: 'PRICES', inputType: 'HTML', content: TABLE });
    const xlsx = await generate('PRICES', tableData, 'xlsx');
    expect(xlsx.headers['content-type']).toBe('application/vnd.openxmlformats-officedocument.spreadsheetml.sheet');
    const strings = partText(xlsx.rawPayload, 'xl/sharedStrings.xml');
    for (const cell of ['Service', 'Price', 'Fibre', 'Static IP']) expect(strings).toContain(cell);
    expect(partText(xlsx.rawPayload, 'xl/worksheets/sheet1.xml')).toMatch(/49\.9/);
    const ods = await generate('PRICES', tableData, 'ods');
    expect(partText(ods.rawPayload, 'content.xml')).toContain('Static IP');
    const xls = await generate('PRICES', tableData, 'xls');
    expect(isOle(xls.rawPayload)).toBe(true);
  });

  it('gives the same bytes for the same template version and data', async () => {
    for (const [code, data, format] of [
      ['LETTER', letterData, 'docx'],
      ['PRICES', tableData, 'xlsx'],
      ['LETTER', letterData, 'doc'],
      ['LETTER', letterData, 'odt'],
      ['PRICES', tableData, 'ods'],
    ] as const) {
      const first = await generate(code, data, format);
      await new Promise((resolve) => setTimeout(resolve, 1100)); // a new second on every clock it could read
      const again = await generate(code, data, format);
      expect(again.rawPayload.equals(first.rawPayload), `${code} ${format}`).toBe(true);
    }
  });
});

describe.skipIf(office === undefined)('FILE templates', () => {
  const template = docxOf(
    para('Contract for {{name}}') +
      para('{{#lines}}Line {{number}}: {{plan}}; {{/lines}}') +
      para('{{^discount}}No discount.{{/discount}}'),
  );

  it("fill a DOCX's placeholders from the data, and convert it to pdf and odt", async () => {
    await save({ code: 'CONTRACT', inputType: 'FILE', content: base64(template) });
    const data = {
      name: 'Ada <Lovelace>',
      lines: [
        { number: 1, plan: 'Fibre' },
        { number: 2, plan: 'Mobile' },
      ],
    };
    const docx = await generate('CONTRACT', data, 'docx');
    expect(isZip(docx.rawPayload)).toBe(true);
    const text = partText(docx.rawPayload, 'word/document.xml');
    expect(text).toContain('Contract for Ada <Lovelace>');
    expect(text).toContain('Line 1: Fibre; Line 2: Mobile;');
    expect(text).toContain('No discount.');
    const pdf = await generate('CONTRACT', data, 'pdf');
    expect((await readPdf(pdf.rawPayload)).text).toContain('Contract for Ada <Lovelace>');
    const odt = await generate('CONTRACT', data, 'odt');
    expect(partText(odt.rawPayload, 'content.xml')).toContain('Line 2: Mobile');
    const again = await generate('CONTRACT', data, 'docx');
    expect(again.rawPayload.equals(docx.rawPayload)).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await generate('CONTRACT', data, 'pdf')).rawPayload.equals(pdf.rawPayload)).toBe(true);
    expect((await generate('CONTRACT', data, 'odt')).rawPayload.equals(odt.rawPayload)).toBe(true);
  });

  const field = (instruction: string) =>
    `<w:p><w:r><w:t xml:space="preserve">${instruction.split(' ')[0] ?? ''}: </w:t></w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> ${instruction} </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>old</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>`;

  it("show the template version's date and the document's name in date and file-name fields, not the conversion's", async () => {
    await save({
      code: 'DATED',
      inputType: 'FILE',
      content: base64(docxOf(para('Dated {{x}}') + field('DATE \\@ "yyyy-MM-dd"') + field('FILENAME'))),
    });
    const version = (await t.call({ method: 'GET', url: '/api/v1/formatter-templates/DATED' })).json<{
      auditInfo: { whenInserted: string };
    }>().auditInfo.whenInserted;
    const text = (await readPdf((await generate('DATED', { x: 1 }, 'pdf')).rawPayload)).text;
    expect(text).toContain(`DATE: ${version.slice(0, 10)}`);
    expect(text).not.toContain('/tmp');
  });

  it('give an ODT whose parts do not depend on how long LibreOffice held the document open', async () => {
    // Writer's idle work adds empty folders (Configurations2/accelerator/, images/Bitmaps/) to a
    // document open for more than ~0.2 s. A template of many date fields holds it open for seconds
    // on any machine (the bridge fixes each field in UNO calls of its own, Writer idle between them);
    // one without fields for a moment, unless the machine is loaded: either way the parts are the same.
    await save({ code: 'MANY_FIELDS', inputType: 'FILE', content: base64(docxOf(field('DATE \\@ "yyyy-MM-dd"').repeat(200))) });
    await save({ code: 'NO_FIELDS', inputType: 'FILE', content: base64(docxOf(para('Plain {{x}}'))) });
    const parts = async (code: string) => Object.keys(new PizZip((await generate(code, { x: 1 }, 'odt')).rawPayload).files);
    const held = await parts('MANY_FIELDS');
    expect(held).toEqual(await parts('NO_FIELDS'));
    expect(held.filter((name) => name.endsWith('/'))).toEqual([]);
  });

  it('fill an ODT template through DOCX', async () => {
    // An ODT made by LibreOffice itself from an HTML template.
    await save({ code: 'ODT_SOURCE', inputType: 'HTML', documentType: 'SOURCE', content: '<p>Welcome {{{raw}}}</p>' });
    const odt = await generate('ODT_SOURCE', { raw: '{{customer}}' }, 'odt');
    await save({ code: 'WELCOME_ODT', inputType: 'FILE', content: base64(odt.rawPayload) });
    const docx = await generate('WELCOME_ODT', { customer: 'Katherine Johnson' }, 'docx');
    expect(partText(docx.rawPayload, 'word/document.xml')).toContain('Welcome Katherine Johnson');
    const back = await generate('WELCOME_ODT', { customer: 'Katherine Johnson' }, 'odt');
    expect(partText(back.rawPayload, 'content.xml')).toContain('Welcome Katherine Johnson');
  });

  it('fill an XLSX cell by cell (a lone placeholder keeps its number), and an ODS through XLSX', async () => {
    const workbook = new ExcelJS.Workbook();
    const sheet = workbook.addWorksheet('Invoice');
    sheet.getCell('A1').value = 'Invoice {{number}} for {{upper customer}}';
    sheet.getCell('A2').value = 'Total';
    sheet.getCell('B2').value = '{{total}}';
    sheet.getCell('A3').value = '{{#each items}}{{this}}; {{/each}}';
    sheet.getCell('A4').value = 42;
    await save({ code: 'SHEET', inputType: 'FILE', content: base64(new Uint8Array(await workbook.xlsx.writeBuffer())) });
    const data = { number: 'INV-9', customer: 'ada', total: 54.9, items: ['Fibre', 'IP'] };
    const xlsx = await generate('SHEET', data, 'xlsx');
    const filled = new ExcelJS.Workbook();
    await filled.xlsx.load(xlsx.rawPayload as unknown as ArrayBuffer);
    const out = filled.getWorksheet('Invoice');
    expect([out?.getCell('A1').value, out?.getCell('B2').value, out?.getCell('A3').value, out?.getCell('A4').value]).toEqual([
      'Invoice INV-9 for ADA',
      54.9,
      'Fibre; IP; ',
      42,
    ]);
    expect((await generate('SHEET', data, 'xlsx')).rawPayload.equals(xlsx.rawPayload)).toBe(true);
    expect((await readPdf((await generate('SHEET', data, 'pdf')).rawPayload)).text).toContain('Invoice INV-9 for ADA');
    expect(partText((await generate('SHEET', data, 'ods')).rawPayload, 'content.xml')).toContain('Fibre; IP;');
    const docx = await t.call({ method: 'POST', url: '/api/v1/formatter/documents/SHEET?format=docx', payload: data });
    expect(docx.statusCode).toBe(422);

    const ods = await generate('SHEET', { number: '{{number}}', customer: 'x', total: 1, items: [] }, 'ods');
    await save({ code: 'SHEET_ODS', inputType: 'FILE', content: base64(ods.rawPayload) });
    const fromOds = await generate('SHEET_ODS', { number: 'INV-10' }, 'xlsx');
    expect(partText(fromOds.rawPayload, 'xl/sharedStrings.xml')).toContain('Invoice INV-10 for X');
  });

  it('are refused when saved unless they are an office file with placeholders that parse', async () => {
    const refuse = async (content: string, pattern: RegExp) => {
      const res = await t.call({
        method: 'POST',
        url: '/api/v1/formatter-templates',
        payload: { code: 'BAD_FILE', inputType: 'FILE', content },
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json<ErrorBody>().errors.join('\n')).toMatch(pattern);
    };
    await refuse('not base64!', /^content: a FILE template's content is an office file in base64/);
    await refuse(base64(new TextEncoder().encode('plain text')), /^content: not a DOCX, XLSX, ODT or ODS file/);
    await refuse(base64(docxOf(para('Hello {{name'))), /^content: The tag beginning with "\{\{name" is unclosed/);
    const withSvg = new PizZip(docxOf(para('logo')));
    withSvg.file('word/media/logo.svg', '<svg xmlns="http://www.w3.org/2000/svg"/>');
    await refuse(
      base64(withSvg.generate({ type: 'uint8array' })),
      /^content: only raster images .* are allowed in a FILE template, not word\/media\/logo.svg/,
    );
    // An SVG by its bytes under a raster name is refused the same way.
    const disguised = new PizZip(docxOf(para('logo')));
    disguised.file('word/media/image1.png', '<svg xmlns="http://www.w3.org/2000/svg"/>');
    await refuse(base64(disguised.generate({ type: 'uint8array' })), /not word\/media\/image1.png/);
    await refuse(base64(docxOf(para('{{#open}} never closed'))), /^content: .*open/i);
  });

  it('make no HTML, and no spreadsheet from a text document', async () => {
    const html = await t.call({ method: 'POST', url: '/api/v1/formatter/documents/CONTRACT?format=html', payload: {} });
    expect(html.statusCode).toBe(422);
    expect(html.json<ErrorBody>().code).toBe('FORMATTER.FORMAT_NOT_AVAILABLE');
    const xlsx = await t.call({ method: 'POST', url: '/api/v1/formatter/documents/CONTRACT?format=xlsx', payload: {} });
    expect(xlsx.statusCode).toBe(422);
  });
});

describe.skipIf(office === undefined)('LibreOffice fetches nothing', () => {
  it('from HTML templates (docx, odt, xlsx) or from a DOCX with linked images and fields (pdf, odt)', async () => {
    const u = canaryUrl;
    const payloads = [
      `<img src="${u}/img.png"><img src="file:///etc/hostname">`,
      `<link rel="stylesheet" href="${u}/link.css">`,
      `<iframe src="${u}/iframe"></iframe><iframe src="file:///etc/passwd"></iframe>`,
      `<style>@import url("${u}/import.css"); body { background: url(${u}/bg.png) }</style>`,
      `<p style="background-image: url('${u}/inline.png')">styled</p>`,
      `<meta http-equiv="refresh" content="0; url=${u}/refresh">`,
      `<svg xmlns="http://www.w3.org/2000/svg"><image href="${u}/svg.png" width="10" height="10"/></svg>`,
      `<object data="${u}/object"></object><embed src="${u}/embed"><base href="${u}/base/"><img src="relative.png">`,
      `<table background="${u}/table.png"><tr><td background="${u}/cell.png">cell {{x}}</td></tr></table>`,
    ].join('\n');
    await save({
      code: 'SSRF_OFFICE',
      inputType: 'HTML',
      content: `<html><head>${payloads}</head><body><p>canary {{x}}</p>${payloads}</body></html>`,
    });
    for (const format of ['docx', 'odt', 'xlsx']) await generate('SSRF_OFFICE', { x: 1 }, format);

    // An SVG image may name a local file that LibreOffice's SVG renderer would draw into the document;
    // and raw-text elements (noembed, noframes) that LibreOffice reads as markup.
    const secret = join(mkdtempSync(join(tmpdir(), 'canary-')), 'secret.png');
    writeFileSync(
      secret,
      Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==', 'base64'),
    );
    const svg = Buffer.from(
      `<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" width="50" height="50"><image xlink:href="file://${secret}" width="50" height="50"/><image xlink:href="${u}/svg-in-data.png" width="5" height="5"/></svg>`,
    ).toString('base64');
    await save({ code: 'SSRF_RAW', inputType: 'HTML', documentType: 'SOURCE', content: '<p>raw</p>{{{markup}}}' });
    const markup = `<img src="data:image/svg+xml;base64,${svg}"><img src="data:image/png;base64,${svg}"><table style="background: url(file://${secret}"><tr><td>open url</td></tr></table><noembed><img src="file://${secret}"></noembed><noframes><img src="${u}/noframes.png"><img src="file://${secret}"></noframes><p style="background: url(data:image/svg+xml;base64,${svg})">x</p><table style="background: url(data:image/gif;base64,${svg})"><tr><td>y</td></tr></table>`;
    for (const format of ['docx', 'odt']) {
      const res = await generate('SSRF_RAW', { markup }, format);
      const parts = Object.keys(new PizZip(res.rawPayload).files);
      expect(
        parts.filter((p) => /media|Pictures\/./.test(p)),
        format,
      ).toEqual([]);
      expect(res.rawPayload.includes('secret.png'), format).toBe(false);
    }

    const image = (id: string) =>
      '<w:p><w:r><w:drawing><wp:inline><wp:extent cx="952500" cy="952500"/><wp:docPr id="1" name="p"/>' +
      '<a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture">' +
      '<pic:pic xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:nvPicPr><pic:cNvPr id="1" name="p"/><pic:cNvPicPr/></pic:nvPicPr>' +
      `<pic:blipFill><a:blip r:link="${id}"/></pic:blipFill><pic:spPr><a:xfrm><a:off x="0" y="0"/><a:ext cx="952500" cy="952500"/></a:xfrm><a:prstGeom prst="rect"/></pic:spPr></pic:pic>` +
      '</a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>';
    const field = (instruction: string) =>
      `<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> ${instruction} </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>field</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>`;
    const linked = docxOf(
      para('canary {{x}}') +
        image('rIdWeb') +
        image('rIdFile') +
        field(`INCLUDEPICTURE "${u}/field.png" \\d`) +
        field(`INCLUDETEXT "${u}/text.docx"`) +
        field('INCLUDETEXT "file:///etc/passwd"'),
      `<Relationship Id="rIdWeb" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="${u}/linked.png" TargetMode="External"/>` +
        '<Relationship Id="rIdFile" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/image" Target="file:///usr/share/pixmaps/debian-logo.png" TargetMode="External"/>',
    );
    // Refused when saved (test/api/formatter/fileTemplateReferences.int.spec.ts); LibreOffice, given
    // such a file all the same, still fetches nothing.
    const refused = await t.call({
      method: 'POST',
      url: '/api/v1/formatter-templates',
      payload: { code: 'SSRF_FILE', inputType: 'FILE', content: base64(linked) },
    });
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json<ErrorBody>().errors).toHaveLength(5);
    for (const format of ['pdf', 'odt', 'doc'] as const) {
      const converted = await documents.office?.convert(linked, 'docx', format);
      if (format === 'pdf') {
        const text = (await readPdf(converted ?? new Uint8Array())).text;
        expect(text).toContain('canary {{x}}');
        expect(text).not.toContain('root:');
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(canary.requests).toEqual([]);
    expect(canary.connections()).toBe(0);
  });
});
