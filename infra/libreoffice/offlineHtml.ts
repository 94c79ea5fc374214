// HTML made safe for LibreOffice's import, which (unlike our Chromium) has no request filter: every
// reference that would make it load something (images, frames, objects, style sheets, CSS url()
// and @import, refreshes, bases) is removed unless it is a `data:` URL or a fragment. Links a reader
// may follow (a href) stay: importing them fetches nothing. Parsed with parse5, the WHATWG parser,
// so that what is removed is what a browser would have seen.

import { type DefaultTreeAdapterMap, defaultTreeAdapter, html as spec, parse, serialize } from 'parse5';

type Node = DefaultTreeAdapterMap['node'];
type Element = DefaultTreeAdapterMap['element'];

/** Elements whose whole purpose is to embed or fetch something, or to run code. */
const DROPPED = new Set(['script', 'iframe', 'frame', 'frameset', 'object', 'embed', 'applet', 'link', 'base', 'meta', 'portal', 'noscript', 'template']);
/** Attributes that name something to load. */
const URL_ATTRIBUTES = new Set([
  'src', 'href', 'srcset', 'data', 'poster', 'background', 'action', 'formaction', 'cite', 'longdesc', 'lowsrc', 'dynsrc',
  'manifest', 'codebase', 'classid', 'usemap', 'ping', 'profile', 'archive', 'imagesrcset', 'content',
]);

const inert = (value: string): boolean => {
  const v = value.trim().toLowerCase();
  return v.startsWith('data:') || v.startsWith('#') || v === '';
};
/** A hyperlink a reader may follow: kept, since importing it loads nothing. */
const followable = (element: Element, name: string, value: string): boolean =>
  element.tagName === 'a' && name === 'href' && /^\s*(https?:|mailto:|tel:)/i.test(value);

/** CSS without anything that loads: url() other than data:, image-set(), @import; CSS escapes
 * (which could spell those) make the whole text go. */
export function offlineCss(css: string): string {
  if (css.includes('\\')) return '';
  return css
    .replace(/@import[^;]*;?/gi, '')
    .replace(/url\(\s*(['"]?)([^)]*?)\1\s*\)/gi, (whole, _q: string, target: string) => (inert(target) ? whole : 'none'))
    .replace(/(?:-webkit-)?image-set\([^)]*\)/gi, 'none');
}

function clean(node: Node): void {
  if (!('childNodes' in node)) return;
  node.childNodes = node.childNodes.filter((child) => !('tagName' in child && DROPPED.has(child.tagName)));
  for (const child of node.childNodes) {
    if ('tagName' in child) {
      child.attrs = child.attrs
        .filter((a) => !(URL_ATTRIBUTES.has(a.name) && !inert(a.value) && !followable(child, a.name, a.value)))
        .map((a) => (a.name === 'style' ? { ...a, value: offlineCss(a.value) } : a));
      if (child.tagName === 'style') {
        for (const text of child.childNodes) if (text.nodeName === '#text' && 'value' in text) text.value = offlineCss(text.value);
      }
    }
    clean(child);
  }
  // A <template>'s content is a separate fragment; it was dropped above with its element.
}

/** The document as LibreOffice may import it, declared UTF-8 (its import otherwise guesses). */
export function offlineHtml(html: string): string {
  const document = parse(html);
  clean(document);
  const root = document.childNodes.find((n): n is Element => n.nodeName === 'html');
  const head = root?.childNodes.find((n): n is Element => n.nodeName === 'head');
  if (head !== undefined) {
    const meta = defaultTreeAdapter.createElement('meta', spec.NS.HTML, [{ name: 'charset', value: 'utf-8' }]);
    meta.parentNode = head;
    head.childNodes.unshift(meta);
  }
  return serialize(document);
}
