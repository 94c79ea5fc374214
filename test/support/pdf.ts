// Reads a PDF as a reader would (Mozilla's pdf.js): its pages' sizes in points and their text, and
// the entries of an office file (a zip), so tests check documents by what they hold.

import { getDocument } from 'pdfjs-dist/legacy/build/pdf.mjs';

export type PdfContents = { pages: { width: number; height: number; text: string }[]; text: string };

export async function readPdf(bytes: Uint8Array): Promise<PdfContents> {
  const doc = await getDocument({ data: new Uint8Array(bytes), useSystemFonts: false, isEvalSupported: false, verbosity: 0 }).promise;
  try {
    const pages: PdfContents['pages'] = [];
    for (let n = 1; n <= doc.numPages; n++) {
      const page = await doc.getPage(n);
      const { width, height } = page.getViewport({ scale: 1 });
      const content = await page.getTextContent();
      pages.push({ width, height, text: content.items.map((i) => ('str' in i ? i.str : '')).join(' ') });
    }
    return { pages, text: pages.map((p) => p.text).join('\n') };
  } finally {
    await doc.destroy();
  }
}

/** Millimetres in PDF points (1/72 inch). */
export const mmToPt = (mm: number): number => (mm / 25.4) * 72;
