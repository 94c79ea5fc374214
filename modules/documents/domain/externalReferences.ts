// What in an office file would make its reader's office suite read something from outside the
// file: a linked image, an included text, a remote attached template, a data connection. A FILE
// template is filled and handed to recipients as it is, so each of these would reach, from the
// recipient's machine, whatever address or local file the template's author chose (a loopback
// service, file:///etc/passwd, a UNC share that takes the reader's Windows credentials). Such a
// template is refused when saved, naming the part.
//
// A URL outside the file is allowed only as a hyperlink (a hyperlink relationship, a HYPERLINK
// field, an ODF text:a or draw:a) to http:, https: or mailto:: a reader's suite follows it only
// when the reader clicks it. The XML is scanned, not parsed: any prefix stands for a namespace, and
// something that only looks like one of these (in a comment) is refused too, never missed. It is
// scanned as a reader reads it: every part that is XML, whatever its name (a suite goes by content
// type), in UTF-16 as well as UTF-8, and with the text that comments and processing instructions
// interrupt joined and CDATA sections read as text (`INCLUDEPIC<!-- -->TURE` is INCLUDEPICTURE).

import type PizZip from 'pizzip';

/** An element: its local name and its attributes by local name (prefixes dropped, values decoded). */
type Element = { name: string; attributes: Map<string, string>; text?: string };

const ENTITIES: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
const decode = (value: string): string =>
  value.replace(/&(#x[0-9a-f]{1,6}|#\d{1,7}|[a-z]+);/gi, (whole, ref: string) => {
    if (!ref.startsWith('#')) return ENTITIES[ref] ?? whole;
    const code = /^#x/i.test(ref) ? Number.parseInt(ref.slice(2), 16) : Number.parseInt(ref.slice(1), 10);
    return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
  });
const localName = (qualified: string): string => qualified.slice(qualified.indexOf(':') + 1);

/** A start tag (quoted values may hold `>`, never `<`: so a tag is never looked for past the next
 * `<`, and the scan stays linear), and the text up to the next tag. */
const TAG = /<([\w.-]+(?::[\w.-]+)?)((?:[^<>"']|"[^<"]*"|'[^<']*')*?)(\/?)>([^<]*)/g;
const ATTRIBUTE = /([\w.-]+(?::[\w.-]+)?)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;

function* elementsOf(xml: string): Generator<Element> {
  for (const [, name = '', rest = '', selfClosing, text = ''] of xml.matchAll(TAG)) {
    const attributes = new Map<string, string>();
    for (const [, key = '', double, single] of rest.matchAll(ATTRIBUTE)) attributes.set(localName(key), decode(double ?? single ?? ''));
    yield { name: localName(name), attributes, ...(selfClosing === '' && text !== '' ? { text: decode(text) } : {}) };
  }
}

const shown = (value: string): string => JSON.stringify(value.length > 100 ? `${value.slice(0, 100)}…` : value);
/** A URL a reader may follow by clicking it. */
const isClickable = (url: string): boolean => /^(https?:\/\/|mailto:)/i.test(url.trim());
/** A reference with a scheme (a Windows drive letter reads as one), or to another host (`//`, `\\`). */
const leavesPackage = (target: string): boolean => /^\s*([a-z][a-z0-9+.-]*:|[/\\]{2})/i.test(target);
/** A path that is not one relative to the package's folder: also an absolute path, or one up with `..`. */
const outsidePackage = (path: string): boolean => leavesPackage(path) || /^\s*[/\\]|(^|[/\\])\.\.([/\\]|$)/.test(path);

/** A DOCTYPE an XML reader could fetch or take declarations from: one with an internal subset
 * (entities; attribute defaults that would add an href no scan sees), or whose DTD is outside the
 * package. (OpenOffice's manifests name a DTD beside them: allowed.) */
function doctypeProblem(xml: string): string | undefined {
  if (!/<!DOCTYPE/i.test(xml)) return undefined;
  const m = /<!DOCTYPE\s+[^\s>[]+(?:\s+(?:SYSTEM|PUBLIC\s+(?:"[^"]*"|'[^']*'))\s+("[^"]*"|'[^']*'))?\s*([[>])/i.exec(xml);
  if (m === null) return 'a DOCTYPE';
  if (m[2] === '[') return 'a DOCTYPE with declarations (entities, attribute defaults)';
  const dtd = m[1]?.slice(1, -1);
  return dtd !== undefined && outsidePackage(dtd) ? `a DOCTYPE naming ${shown(dtd)} outside the file` : undefined;
}

/** Fields that read a file, a URL or a data source into the document when it is opened or updated. */
const FETCHING_FIELDS = new Set(['INCLUDETEXT', 'INCLUDEPICTURE', 'INCLUDE', 'IMPORT', 'LINK', 'DDE', 'DDEAUTO', 'DATABASE', 'RD']);
/** Spreadsheet functions that fetch (Excel's WEBSERVICE and IMAGE, RTD servers, LibreOffice's DDE). */
const FETCHING_FUNCTIONS = /\b(?:_xlfn\.|of:|com\.microsoft\.)?(WEBSERVICE|IMAGE|RTD|DDE)\s*\(/i;
/** An ODF formula's reference into another file: `'file:///x.ods'#$Sheet1.A1`. */
const FILE_IN_FORMULA = /'[a-z][a-z0-9+.-]*:[^']*'#/i;
/** Where a mail merge connects to its data (a query alone connects to nothing). */
const MAIL_MERGE_SOURCES = new Set(['connectString', 'dataSource', 'headerSource', 'udl']);
/** OOXML parts and relationships that link a spreadsheet to other workbooks or to data sources. */
const LINKING_PARTS = /^xl\/(externalLinks\/|connections\.xml$|queryTables\/)/i;
const LINKING_TYPES = /\/(externalLink|externalLinkPath|connections|queryTable|aFChunk|attachedTemplate|subDocument|frame)$/i;

/** HYPERLINK's switches that take an argument (\\l anchor, \\o tooltip, \\t frame). */
const HYPERLINK_ARGUMENTS = new Set(['\\l', '\\o', '\\t']);

/** Why a field instruction reads outside the document, or undefined. */
function fieldProblem(instruction: string): string | undefined {
  const type = /^\s*([a-z]+)/i.exec(instruction)?.[1]?.toUpperCase() ?? '';
  if (FETCHING_FIELDS.has(type)) return `field ${shown(instruction.trim())} reads from outside the document`;
  if (type !== 'HYPERLINK') return undefined;
  // The address is the first argument that is neither a switch nor a switch's argument.
  const tokens = [
    ...instruction
      .trim()
      .slice(type.length)
      .matchAll(/"([^"]*)"|(\S+)/g),
  ].map((m) => ({ text: m[1] ?? m[2] ?? '', quoted: m[1] !== undefined }));
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i] ?? { text: '', quoted: false };
    if (!token.quoted && token.text.startsWith('\\')) {
      if (HYPERLINK_ARGUMENTS.has(token.text.toLowerCase())) i += 1;
      continue;
    }
    return isClickable(token.text)
      ? undefined
      : `field ${shown(instruction.trim())} links to something other than an http(s) or mailto address`;
  }
  return undefined;
}

type OpenField = { code: string; done: boolean; computed: boolean };

/** The fields of a WordprocessingML part: simple ones, and complex ones (begin, instruction text in
 * as many runs as it likes, separate, result, end), nested ones included. A field whose type is the
 * result of a nested field is refused: what it becomes is known only when it is updated. */
function fieldProblems(xml: string): string[] {
  const problems: string[] = [];
  const open: OpenField[] = [];
  const check = (field: OpenField) => {
    const problem = field.computed ? `a field whose type a nested field computes (${shown(field.code.trim())})` : fieldProblem(field.code);
    if (problem !== undefined) problems.push(problem);
  };
  for (const e of elementsOf(xml)) {
    const top = open.at(-1);
    const collecting = top !== undefined && !top.done ? top : undefined;
    if (e.name === 'fldSimple') check({ code: e.attributes.get('instr') ?? '', done: true, computed: false });
    else if (collecting !== undefined && (e.name === 'instrText' || e.name === 'delInstrText')) collecting.code += e.text ?? '';
    else if (e.name === 'fldChar') fieldChar(e.attributes.get('fldCharType'), open, collecting, check);
  }
  for (const field of open) check(field);
  return problems;
}

/** A complex field's begin, separate or end. */
function fieldChar(
  kind: string | undefined,
  open: OpenField[],
  collecting: OpenField | undefined,
  check: (field: OpenField) => void,
): void {
  if (kind === 'begin') {
    // A field nested where its parent's type should be.
    if (collecting?.code.trim() === '') collecting.computed = true;
    open.push({ code: '', done: false, computed: false });
    return;
  }
  const top = open.at(-1);
  if (top === undefined) return;
  if (kind === 'separate') top.done = true;
  if (kind === 'end') check(open.pop() ?? top);
}

/** An OOXML relationships part: every target outside the package but a clickable hyperlink, and
 * the relationships that import or link content whatever their target. */
function relationshipProblems(xml: string): string[] {
  return [...elementsOf(xml)].flatMap((e) => {
    if (e.name !== 'Relationship') return [];
    const target = e.attributes.get('Target') ?? '';
    const type = e.attributes.get('Type') ?? '';
    const kind = type.slice(type.lastIndexOf('/') + 1);
    const external = e.attributes.get('TargetMode')?.trim().toLowerCase() === 'external' || leavesPackage(target);
    if (LINKING_TYPES.test(type)) return [`relationship ${e.attributes.get('Id') ?? ''} (${kind}) links other content into the document`];
    if (!external || (kind === 'hyperlink' && isClickable(target))) return [];
    return [`external target ${shown(target)} (relationship ${e.attributes.get('Id') ?? ''}, ${kind || 'no type'})`];
  });
}

/** An OOXML content part: URLs in attributes (VML images and shapes carry them directly), a
 * mail merge's connection to its data, imported chunks, and fetching formulas. */
function ooxmlPartProblems(xml: string): string[] {
  // Fields are WordprocessingML's, but a part of a document may have any name.
  const problems = fieldProblems(xml);
  for (const e of elementsOf(xml)) {
    for (const key of ['src', 'href']) {
      const value = e.attributes.get(key);
      if (value !== undefined && (leavesPackage(value) || value.trim().startsWith('/')))
        problems.push(`${e.name} refers to ${shown(value)} outside the file`);
    }
    if (MAIL_MERGE_SOURCES.has(e.name)) problems.push(`a mail-merge data source (${e.name})`);
    if (e.name === 'altChunk') problems.push('an imported chunk (altChunk)');
    if (['f', 'definedName', 'formula', 'formula1', 'formula2'].includes(e.name) && FETCHING_FUNCTIONS.test(e.text ?? ''))
      problems.push(`formula ${shown(e.text ?? '')} fetches from outside the file`);
  }
  return problems;
}

/** An ODF part: every xlink:href outside the package (a scheme, an absolute path, `..`) but a
 * clickable link, DDE connections, and formulas that fetch or read other files. */
function odfPartProblems(xml: string): string[] {
  const problems: string[] = [];
  for (const e of elementsOf(xml)) {
    const href = e.attributes.get('href');
    if (href !== undefined && outsidePackage(href) && !(e.name === 'a' && isClickable(href)))
      problems.push(`${e.name} refers to ${shown(href)} outside the file`);
    if (/^dde-(source|connection-decl|link)$/.test(e.name)) problems.push(`a DDE link (${e.name})`);
    for (const key of ['formula', 'condition', 'expression']) {
      const formula = e.attributes.get(key);
      if (formula !== undefined && (FETCHING_FUNCTIONS.test(formula) || FILE_IN_FORMULA.test(formula)))
        problems.push(`formula ${shown(formula)} fetches from outside the file`);
    }
  }
  return problems;
}

/** A part's text as an XML reader decodes it (XML 1.0, appendix F): UTF-16 by its byte order mark
 * or by the two bytes of its first `<`, else UTF-8; undefined for a part that is no XML (an image). */
function xmlTextOf(bytes: Uint8Array): string | undefined {
  const [first, second] = bytes;
  const utf16le = (first === 0xff && second === 0xfe) || (first === 0x3c && second === 0);
  const utf16be = (first === 0xfe && second === 0xff) || (first === 0 && second === 0x3c);
  const decoder = new TextDecoder(utf16le ? 'utf-16le' : utf16be ? 'utf-16be' : 'utf-8');
  // An image is not decoded whole to find that out.
  return /^\s*</.test(decoder.decode(bytes.subarray(0, 64))) ? decoder.decode(bytes) : undefined;
}

/** What a reader sets aside from the text between tags: the text around a comment or a processing
 * instruction is one text to it, and a CDATA section is text (`true`: kept, escaped). */
const ASIDES: readonly (readonly [string, string, boolean])[] = [
  ['<!--', '-->', false],
  ['<?', '?>', false],
  ['<![CDATA[', ']]>', true],
];
const escaped = (text: string): string => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/** The markup as a reader gives it: comments and processing instructions dropped, CDATA sections as
 * escaped text. One pass with indexOf (an unclosed one ends the text), so it stays linear. */
function asRead(xml: string): string {
  const parts: string[] = [];
  let at = 0;
  for (let open = xml.indexOf('<'); open >= 0; open = xml.indexOf('<', open + 1)) {
    const aside = ASIDES.find(([start]) => xml.startsWith(start, open));
    if (aside === undefined) continue;
    const [start, end, kept] = aside;
    const close = xml.indexOf(end, open + start.length);
    parts.push(xml.slice(at, open), kept ? escaped(xml.slice(open + start.length, close < 0 ? xml.length : close)) : '');
    at = close < 0 ? xml.length : close + end.length;
    open = at - 1;
  }
  parts.push(xml.slice(at));
  return parts.join('');
}

/** Where an office file (a DOCX, XLSX, ODT or ODS, opened) refers to anything outside it, as
 * `part: what` lines. Embedded objects (a chart's workbook, an OLE object) are not looked into:
 * a reader's suite opens them only when the reader activates them. */
export function externalReferencesOf(zip: PizZip, odf: boolean): string[] {
  return Object.values(zip.files).flatMap((file) => {
    const xml = file.dir ? undefined : xmlTextOf(file.asUint8Array());
    if (xml === undefined) return [];
    const doctype = doctypeProblem(xml);
    const problems = odf ? odfPartProblems : /\.rels$/i.test(file.name) ? relationshipProblems : ooxmlPartProblems;
    // As written (a reference only in a comment is refused too) and as read.
    const found = [...new Set([...(doctype === undefined ? [] : [doctype]), ...problems(xml), ...problems(asRead(xml))])];
    if (!odf && LINKING_PARTS.test(file.name)) found.push('links the workbook to other workbooks or data sources');
    return found.map((problem) => `${file.name}: ${problem}`);
  });
}
