// HTML made safe for LibreOffice's import, which (unlike our Chromium) has no request filter. An
// allow-list: the elements and attributes of formatted text and tables stay; what embeds, frames,
// scripts or holds raw text LibreOffice would read as markup (noembed, noframes, plaintext, xmp,
// textarea, svg, math, LibreOffice's own sdfield) goes with its content; any other element is
// replaced by its content; comments go. The only images are `data:` URLs whose bytes are raster (an
// SVG one could name a file its renderer would read); links a reader may follow (a href) stay, since importing
// them fetches nothing. Parsed and written back by parse5, the WHATWG parser.

import { type DefaultTreeAdapterMap, defaultTreeAdapter, html as spec, parse, serialize } from 'parse5';
import { isRaster } from '../../modules/documents/domain/fileTemplates.ts';

type ChildNode = DefaultTreeAdapterMap['childNode'];
type Element = DefaultTreeAdapterMap['element'];

const KEPT = new Set(
  (
    'html head body title style p div span br hr h1 h2 h3 h4 h5 h6 b i u s strike strong em small big sub sup code pre tt kbd samp var ' +
    'blockquote q cite abbr dfn address ul ol li dl dt dd table thead tbody tfoot tr td th caption colgroup col a img font center section ' +
    'article header footer main nav aside figure figcaption mark del ins label'
  ).split(' '),
);
/** Elements that go with everything inside them. */
const DROPPED = new Set(
  (
    'script noscript iframe frame frameset noframes object embed applet param link base meta portal template noembed plaintext xmp ' +
    'textarea select option svg math video audio picture source track canvas map area form input button sdfield'
  ).split(' '),
);
const ATTRIBUTES = new Set(
  (
    'class id style title align valign width height colspan rowspan border cellpadding cellspacing bgcolor color face size lang dir alt ' +
    'span start type name'
  ).split(' '),
);

/** A raster image inline: the only source LibreOffice may load. LibreOffice goes by the bytes, not
 * the declared type (an SVG under image/png is drawn as SVG, and SVG may name local files), so the
 * bytes must be PNG, JPEG, GIF, WebP or BMP, in base64. */
const rasterData = (value: string): boolean => {
  const m = /^\s*data:image\/(?:png|jpe?g|gif|webp|bmp);base64,([A-Za-z0-9+/=\s]+)$/i.exec(value);
  return m !== null && isRaster(Buffer.from((m[1] ?? '').slice(0, 64), 'base64'));
};
/** A hyperlink a reader may follow: kept, since importing it loads nothing. */
const followable = (value: string): boolean => /^\s*(https?:|mailto:|tel:|#)/i.test(value);

/** CSS without anything that loads: url() other than a raster data: image, image-set(), @import;
 * CSS escapes (which could spell those) or a url( left open (LibreOffice reads it to the end of
 * the text) make the whole text go. */
export function offlineCss(css: string): string {
  if (css.includes('\\')) return '';
  const rewritten = css
    .replace(/@import[^;]*;?/gi, '')
    .replace(/url\(\s*(['"]?)([^)]*?)\1\s*\)/gi, (whole, _q: string, target: string) => (rasterData(target) ? whole : 'none'))
    .replace(/(?:-webkit-)?image-set\([^)]*\)/gi, 'none');
  const opened = rewritten.match(/url\s*\(/gi)?.length ?? 0;
  const kept = rewritten.match(/url\(\s*(['"]?)[^)]*?\1\s*\)/gi)?.length ?? 0;
  return opened === kept ? rewritten : '';
}

function keptAttributes(element: Element): Element['attrs'] {
  return element.attrs.flatMap((a) => {
    if (a.namespace !== undefined && a.namespace !== '') return [];
    if (a.name === 'href') return element.tagName === 'a' && followable(a.value) ? [a] : [];
    if (a.name === 'src') return element.tagName === 'img' && rasterData(a.value) ? [a] : [];
    if (a.name === 'style') return [{ ...a, value: offlineCss(a.value) }];
    return ATTRIBUTES.has(a.name) ? [a] : [];
  });
}

/** The children a node keeps: allowed elements cleaned, others dropped or replaced by their content. */
function cleaned(
  children: ChildNode[],
  parent: Element | DefaultTreeAdapterMap['document'] | DefaultTreeAdapterMap['documentFragment'],
): ChildNode[] {
  return children.flatMap((child): ChildNode[] => {
    if (child.nodeName === '#comment') return [];
    if (!('tagName' in child)) return [child];
    if (DROPPED.has(child.tagName) || child.namespaceURI !== spec.NS.HTML) return [];
    if (child.tagName === 'style') {
      for (const text of child.childNodes) if ('value' in text) text.value = offlineCss(text.value);
      return [child];
    }
    const inner = cleaned(child.childNodes, child);
    if (!KEPT.has(child.tagName)) {
      for (const n of inner) n.parentNode = parent;
      return inner;
    }
    child.attrs = keptAttributes(child);
    child.childNodes = inner;
    return [child];
  });
}

/** The document as LibreOffice may import it, declared UTF-8 (its import otherwise guesses). */
export function offlineHtml(html: string): string {
  const document = parse(html);
  document.childNodes = cleaned(document.childNodes, document);
  const root = document.childNodes.find((n): n is Element => n.nodeName === 'html');
  const head = root?.childNodes.find((n): n is Element => n.nodeName === 'head');
  if (head !== undefined) {
    const meta = defaultTreeAdapter.createElement('meta', spec.NS.HTML, [{ name: 'charset', value: 'utf-8' }]);
    meta.parentNode = head;
    head.childNodes.unshift(meta);
  }
  return serialize(document);
}
