// FILE templates that would make a recipient's office suite read from outside the document are
// refused when saved (400 naming the part): external linked images (a loopback URL, file:///etc/
// passwd), INCLUDETEXT and INCLUDEPICTURE fields (simple, complex across runs, nested, in a header),
// a remote attached template, imported chunks, a DOCTYPE, spreadsheet links, connections and
// fetching formulas, an ODT's linked images and sections, an ODS's DDE links. Hyperlinks to http,
// https and mailto stay: a reader's suite follows them only when clicked. A template saved before
// the rule is still never filled.

import PizZip from 'pizzip';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDocument, type TemplateVersion } from '../../../modules/documents/domain/generate.ts';
import { base64, docxOf, para, partText } from '../../support/office.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

let codes = 0;
const save = (bytes: Uint8Array) =>
  t.call({
    method: 'POST',
    url: '/api/v1/formatter-templates',
    payload: { code: `REF_${String(++codes)}`, inputType: 'FILE', content: base64(bytes) },
  });

/** The template is refused with a 400 whose errors name each expected line. */
async function refused(bytes: Uint8Array, ...lines: (string | RegExp)[]): Promise<void> {
  const res = await save(bytes);
  expect(res.statusCode, res.body).toBe(400);
  const { errors } = res.json<{ errors: string[] }>();
  for (const line of lines)
    expect(
      errors.some((e) => (typeof line === 'string' ? e === line : line.test(e))),
      `${String(line)} in ${errors.join('\n')}`,
    ).toBe(true);
}

/** A zip with these parts replaced or added. */
function withParts(bytes: Uint8Array, parts: Record<string, string | Uint8Array>): Uint8Array {
  const zip = new PizZip(bytes);
  for (const [name, text] of Object.entries(parts)) zip.file(name, text);
  return zip.generate({ type: 'uint8array', compression: 'DEFLATE' });
}

const REL = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships';
const rels = (body: string) =>
  `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">${body}</Relationships>`;
const linkedImage = (id: string) =>
  '<w:p><w:r><w:drawing><wp:inline><wp:extent cx="952500" cy="952500"/><wp:docPr id="1" name="p"/>' +
  '<a:graphic xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><a:graphicData uri="http://schemas.openxmlformats.org/drawingml/2006/picture">' +
  '<pic:pic xmlns:pic="http://schemas.openxmlformats.org/drawingml/2006/picture"><pic:nvPicPr><pic:cNvPr id="1" name="p"/><pic:cNvPicPr/></pic:nvPicPr>' +
  `<pic:blipFill><a:blip r:link="${id}"/></pic:blipFill><pic:spPr/></pic:pic></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>`;
/** A complex field whose instruction is split over runs as given. */
const field = (...pieces: string[]) =>
  `<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r>${pieces.map((p) => `<w:r><w:instrText xml:space="preserve">${p}</w:instrText></w:r>`).join('')}` +
  '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>result</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>';
const simpleField = (instr: string) => `<w:p><w:fldSimple w:instr="${instr}"><w:r><w:t>result</w:t></w:r></w:fldSimple></w:p>`;

describe('DOCX templates with external references', () => {
  it('are refused when they link images to a loopback URL or to a local file', async () => {
    await refused(
      docxOf(
        para('Dear {{name}}') + linkedImage('rIdWeb') + linkedImage('rIdFile'),
        `<Relationship Id="rIdWeb" Type="${REL}/image" Target="http://127.0.0.1:9/linked.png" TargetMode="External"/>` +
          `<Relationship Id="rIdFile" Type="${REL}/image" Target="file:///etc/passwd" TargetMode="External"/>`,
      ),
      'content: word/_rels/document.xml.rels: external target "http://127.0.0.1:9/linked.png" (relationship rIdWeb, image)',
      'content: word/_rels/document.xml.rels: external target "file:///etc/passwd" (relationship rIdFile, image)',
    );
    // Whatever the mode says, a target with a scheme or a UNC path leaves the package.
    await refused(
      docxOf(para('x') + linkedImage('rIdUnc'), `<Relationship Id='rIdUnc' Type='${REL}/image' Target='\\\\attacker\\share\\x.png'/>`),
      /external target "\\\\\\\\attacker/,
    );
  });

  it('are refused when fields include text or pictures: simple, split over runs, nested, in a header', async () => {
    await refused(
      docxOf(para('x') + simpleField('INCLUDEPICTURE &quot;http://127.0.0.1:9/p.png&quot; \\d')),
      /^content: word\/document.xml: field "INCLUDEPICTURE \\"http:\/\/127.0.0.1:9\/p.png\\" \\\\d" reads from outside the document$/,
    );
    await refused(
      docxOf(para('x') + field(' INCLUDE', 'TEXT "file:///etc/passwd" ')),
      'content: word/document.xml: field "INCLUDETEXT \\"file:///etc/passwd\\"" reads from outside the document',
    );
    // The outer field's type is what the nested one gives when the document is updated.
    const nested = `<w:p><w:r><w:fldChar w:fldCharType="begin"/></w:r>${field('QUOTE "INCLUDETEXT"').replace(/^<w:p>|<\/w:p>$/g, '')}<w:r><w:instrText> "file:///etc/passwd"</w:instrText></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r></w:p>`;
    await refused(docxOf(para('x') + nested), /word\/document.xml: a field whose type a nested field computes/);
    const header = `<?xml version="1.0"?><w:hdr xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">${field('INCLUDETEXT "http://127.0.0.1:9/h"')}</w:hdr>`;
    await refused(withParts(docxOf(para('x')), { 'word/header1.xml': header }), /^content: word\/header1.xml: field "INCLUDETEXT/);
    // Any prefix may stand for WordprocessingML's namespace; a DDE field runs a program.
    const prefixed = `<x:p xmlns:x="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><x:fldSimple x:instr='DDEAUTO c:\\\\windows\\\\system32\\\\cmd.exe "/k calc"'/></x:p>`;
    await refused(docxOf(para('x') + prefixed), /field "DDEAUTO/);
    await refused(
      docxOf(para('x') + field('HYPERLINK \\o "tip" "file:///etc/passwd"')),
      /links to something other than an http\(s\) or mailto address/,
    );
  });

  it('are refused when they attach a remote template, import a chunk, declare a DOCTYPE or name a mail-merge source', async () => {
    const settings = `<?xml version="1.0"?><w:settings xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" xmlns:r="${REL}"><w:attachedTemplate r:id="rId1"/></w:settings>`;
    await refused(
      withParts(docxOf(para('x')), {
        'word/settings.xml': settings,
        'word/_rels/settings.xml.rels': rels(
          `<Relationship Id="rId1" Type="${REL}/attachedTemplate" Target="http://127.0.0.1:9/t.dotm" TargetMode="External"/>`,
        ),
      }),
      'content: word/_rels/settings.xml.rels: relationship rId1 (attachedTemplate) links other content into the document',
    );
    await refused(
      docxOf(para('x') + '<w:altChunk r:id="rIdChunk"/>', `<Relationship Id="rIdChunk" Type="${REL}/aFChunk" Target="chunk.html"/>`),
      /word\/document.xml: an imported chunk/,
      /rIdChunk \(aFChunk\)/,
    );
    const withDoctype = withParts(docxOf(para('x')), {
      'docProps/custom.xml': '<?xml version="1.0"?><!DOCTYPE p [<!ENTITY e SYSTEM "http://127.0.0.1:9/e">]><p>&e;</p>',
    });
    await refused(withDoctype, 'content: docProps/custom.xml: a DOCTYPE with declarations (entities, attribute defaults)');
    await refused(
      withParts(docxOf(para('x')), { 'docProps/custom.xml': '<?xml version="1.0"?><!DOCTYPE p SYSTEM "http://127.0.0.1:9/p.dtd"><p/>' }),
      'content: docProps/custom.xml: a DOCTYPE naming "http://127.0.0.1:9/p.dtd" outside the file',
    );
    const merge = `<?xml version="1.0"?><w:settings xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:mailMerge><w:connectString w:val="Provider=x"/></w:mailMerge></w:settings>`;
    await refused(
      withParts(docxOf(para('x')), { 'word/settings.xml': merge }),
      'content: word/settings.xml: a mail-merge data source (connectString)',
    );
  });

  it('keep http(s) and mailto hyperlinks and internal references, and make the document with them', async () => {
    const body =
      para('Dear {{name}}') +
      `<w:p><w:hyperlink r:id="rIdLink"><w:r><w:t>our site</w:t></w:r></w:hyperlink></w:p>` +
      field('HYPERLINK "https://example.com/help"') +
      field('HYPERLINK \\l "top"') +
      simpleField('HYPERLINK &quot;mailto:help@example.com&quot;') +
      field('PAGE');
    const res = await save(
      docxOf(
        body,
        `<Relationship Id="rIdLink" Type="${REL}/hyperlink" Target="https://example.com/" TargetMode="External"/><Relationship Id="rIdMedia" Type="${REL}/image" Target="media/image1.png"/>`,
      ),
    );
    expect(res.statusCode, res.body).toBe(201);
    const code = res.json<{ code: string }>().code;
    const made = await t.call({
      method: 'POST',
      url: `/api/v1/formatter/documents/${code}?format=docx`,
      payload: { name: 'Ada' },
      as: 'viewer',
    });
    expect(made.statusCode, made.body).toBe(200);
    expect(partText(made.rawPayload, 'word/document.xml')).toContain('Dear Ada');
    expect(new PizZip(made.rawPayload).file('word/_rels/document.xml.rels')?.asText()).toContain('Target="https://example.com/"');
  });

  it('are refused however a part is encoded or named, and whatever comments, CDATA or processing instructions split a field', async () => {
    // An XML reader takes UTF-16 by its byte order mark or by the bytes of its first `<` (LibreOffice
    // fetched this linked image, as a recipient's suite would, when its relationships were UTF-16).
    const utf16 = (xml: string, bom: boolean) =>
      Buffer.concat([Buffer.from(bom ? [0xff, 0xfe] : []), Buffer.from(xml.replace('encoding="UTF-8"', 'encoding="UTF-16"'), 'utf16le')]);
    const linked = rels(`<Relationship Id="rIdWeb" Type="${REL}/image" Target="http://127.0.0.1:9/linked.png" TargetMode="External"/>`);
    for (const bom of [true, false]) {
      await refused(
        withParts(docxOf(para('x') + linkedImage('rIdWeb')), { 'word/_rels/document.xml.rels': utf16(linked, bom) }),
        'content: word/_rels/document.xml.rels: external target "http://127.0.0.1:9/linked.png" (relationship rIdWeb, image)',
      );
    }
    const big = Buffer.from(linked.replace('encoding="UTF-8"', 'encoding="UTF-16"'), 'utf16le').swap16();
    await refused(
      withParts(docxOf(para('x') + linkedImage('rIdWeb')), { 'word/_rels/document.xml.rels': big }),
      /external target "http:\/\/127.0.0.1:9\/linked.png"/,
    );
    // A reader joins the text around a comment or a processing instruction, and reads a CDATA section as text.
    for (const instruction of [
      'INCLUDEPIC<!-- -->TURE "http://127.0.0.1:9/p.png"',
      'INCLUDEPIC<?x y?>TURE "http://127.0.0.1:9/p.png"',
      '<![CDATA[INCLUDEPICTURE "http://127.0.0.1:9/p.png"]]>',
    ]) {
      await refused(
        docxOf(para('x') + field(instruction)),
        'content: word/document.xml: field "INCLUDEPICTURE \\"http://127.0.0.1:9/p.png\\"" reads from outside the document',
      );
    }
    // A suite reads a part by its content type, whatever its name.
    const header = `<?xml version="1.0"?><w:hdr xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">${field('INCLUDETEXT "http://127.0.0.1:9/h"')}</w:hdr>`;
    await refused(withParts(docxOf(para('x')), { 'word/header1.bin': header }), /^content: word\/header1.bin: field "INCLUDETEXT/);
  });

  it('refuses a hyperlink relationship to a local file or a share', async () => {
    for (const target of ['file:///etc/passwd', '\\\\attacker\\share']) {
      await refused(
        docxOf(para('x'), `<Relationship Id="rIdLink" Type="${REL}/hyperlink" Target="${target}" TargetMode="External"/>`),
        /external target .* \(relationship rIdLink, hyperlink\)/,
      );
    }
  });
});

/** A minimal workbook with these parts added. */
function xlsxWith(parts: Record<string, string>): Uint8Array {
  const zip = new PizZip();
  zip.file('[Content_Types].xml', '<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>');
  zip.file(
    'xl/workbook.xml',
    '<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheets><sheet name="S" sheetId="1"/></sheets></workbook>',
  );
  for (const [name, text] of Object.entries(parts)) zip.file(name, text);
  return zip.generate({ type: 'uint8array' });
}

describe('XLSX templates with external references', () => {
  it('are refused with links to other workbooks, data connections or fetching formulas', async () => {
    await refused(
      xlsxWith({
        'xl/_rels/workbook.xml.rels': rels(`<Relationship Id="rId9" Type="${REL}/externalLink" Target="externalLinks/externalLink1.xml"/>`),
        'xl/externalLinks/externalLink1.xml': '<?xml version="1.0"?><externalLink/>',
      }),
      'content: xl/_rels/workbook.xml.rels: relationship rId9 (externalLink) links other content into the document',
      'content: xl/externalLinks/externalLink1.xml: links the workbook to other workbooks or data sources',
    );
    await refused(
      xlsxWith({ 'xl/connections.xml': '<?xml version="1.0"?><connections/>' }),
      /^content: xl\/connections.xml: links the workbook/,
    );
    await refused(
      xlsxWith({
        'xl/worksheets/sheet1.xml':
          '<?xml version="1.0"?><worksheet><sheetData><row r="1"><c r="A1" t="str"><f>_xlfn.WEBSERVICE("http://127.0.0.1:9/x")</f></c></row></sheetData></worksheet>',
      }),
      /^content: xl\/worksheets\/sheet1.xml: formula .*WEBSERVICE.* fetches from outside the file$/,
    );
  });
});

/** A minimal OpenDocument package of a MIME type, with content.xml's body. */
function odfOf(mimetype: string, body: string): Uint8Array {
  const zip = new PizZip();
  zip.file('mimetype', mimetype);
  zip.file(
    'content.xml',
    '<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ' +
      'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:xlink="http://www.w3.org/1999/xlink">' +
      `<office:body>${body}</office:body></office:document-content>`,
  );
  return zip.generate({ type: 'uint8array' });
}
const ODT = 'application/vnd.oasis.opendocument.text';
const ODS = 'application/vnd.oasis.opendocument.spreadsheet';

describe('ODT and ODS templates with external references', () => {
  it('are refused with linked images, linked sections, links other than http(s), DDE or fetching formulas', async () => {
    await refused(
      odfOf(
        ODT,
        '<office:text><draw:frame><draw:image xlink:href="http://127.0.0.1:9/i.png"/></draw:frame><text:section text:name="s"><text:section-source xlink:href="../../etc/passwd"/></text:section></office:text>',
      ),
      'content: content.xml: image refers to "http://127.0.0.1:9/i.png" outside the file',
      'content: content.xml: section-source refers to "../../etc/passwd" outside the file',
    );
    await refused(
      odfOf(ODT, '<office:text><text:p><text:a xlink:href="file:///etc/passwd">x</text:a></text:p></office:text>'),
      'content: content.xml: a refers to "file:///etc/passwd" outside the file',
    );
    await refused(
      odfOf(ODS, '<office:spreadsheet><table:dde-links><table:dde-link/></table:dde-links></office:spreadsheet>'),
      'content: content.xml: a DDE link (dde-link)',
    );
    await refused(
      odfOf(
        ODS,
        '<office:spreadsheet><table:table><table:table-row><table:table-cell table:formula="of:=WEBSERVICE(&quot;http://127.0.0.1:9/&quot;)"/></table:table-row></table:table></office:spreadsheet>',
      ),
      /formula "of:=WEBSERVICE/,
    );
  });

  it('keep internal images and http(s) links', async () => {
    const res = await save(
      odfOf(
        ODT,
        '<office:text><draw:frame><draw:image xlink:href="Pictures/1.png"/></draw:frame><text:p><text:a xlink:href="https://example.com/">site</text:a> <text:a xlink:href="#top">top</text:a></text:p></office:text>',
      ),
    );
    expect(res.statusCode, res.body).toBe(201);
  });
});

describe('a FILE template saved before the rule', () => {
  it('is not filled: 422 naming what it holds', async () => {
    const linked = docxOf(
      para('Dear {{name}}') + linkedImage('rIdWeb'),
      `<Relationship Id="rIdWeb" Type="${REL}/image" Target="http://127.0.0.1:9/linked.png" TargetMode="External"/>`,
    );
    const template: TemplateVersion = {
      id: 'legacy',
      code: 'LEGACY',
      inputType: 'FILE',
      content: base64(linked),
      auditInfo: { version: 0, whenInserted: '2026-01-01T00:00:00.000Z' },
    };
    await expect(generateDocument(template, { name: 'Ada' }, 'docx', {}, { subject: 'vera-viewer' })).rejects.toMatchObject({
      code: 'FORMATTER.NOT_RENDERABLE',
      status: 'UNPROCESSABLE_ENTITY',
      errors: ['content: word/_rels/document.xml.rels: external target "http://127.0.0.1:9/linked.png" (relationship rIdWeb, image)'],
    });
  });
});
