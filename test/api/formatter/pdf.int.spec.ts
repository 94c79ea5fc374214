// PDF documents over HTTP with a real Chromium: the data in the text a PDF reader extracts, paper
// sizes measured from the file, byte-identical output for the same template version and data (and
// for an older version by ?templateVersion=), the JSON form, batches, and nothing fetched by any
// template (a canary server on a local port counts requests and connections).

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mmToPt, readPdf } from '../../support/pdf.ts';
import { startCanary, type Canary } from '../../support/canary.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
let canary: Canary;
let canaryUrl: string;

beforeAll(async () => {
  t = await startTestApp();
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
  return res.json<{ id: string; auditInfo: { version: number } }>();
};
const generate = (code: string, data: unknown, query = 'format=pdf', headers: Record<string, string> = {}) =>
  t.call({ method: 'POST', url: `/api/v1/formatter/documents/${code}?${query}`, payload: data, headers, as: 'viewer' });

const INVOICE =
  '<html><body><h1>Invoice {{number}}</h1><p>Customer: {{customer}}</p><table>{{#each lines}}<tr><td>{{item}}</td><td>{{formatNumber price "en-GB" minimumFractionDigits=2}}</td></tr>{{/each}}</table></body></html>';
const invoiceData = {
  number: 'INV-2026-0042',
  customer: 'Ada Lovelace & Co',
  lines: [
    { item: 'Fibre 1 Gbit/s', price: 49.9 },
    { item: 'Static IP', price: 5 },
  ],
};

describe('a PDF from an HTML template', () => {
  it('holds the rendered data, with its content type, file name, version and an ETag of its bytes', async () => {
    await save({ code: 'INVOICE', inputType: 'HTML', documentType: 'PDF', documentSize: 'A4', content: INVOICE });
    const res = await generate('INVOICE', invoiceData);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toBe('application/pdf');
    expect(res.headers['content-disposition']).toBe('attachment; filename="INVOICE.pdf"');
    expect(res.headers['x-template-version']).toBe('0');
    expect(res.headers.etag).toBe(`"${createHash('sha256').update(res.rawPayload).digest('hex')}"`);
    expect(res.rawPayload.subarray(0, 5).toString()).toBe('%PDF-');
    const pdf = await readPdf(res.rawPayload);
    expect(pdf.text).toContain('Invoice INV-2026-0042');
    expect(pdf.text).toContain('Customer: Ada Lovelace & Co');
    expect(pdf.text).toContain('Fibre 1 Gbit/s');
    expect(pdf.text).toContain('49.90');
  });

  it("prints on the paper of the template's documentSize, within 1 pt", async () => {
    const sizes = {
      A4: [210, 297],
      LETTER: [215.9, 279.4],
      B5: [176, 250],
      PORTRAIT: [210, 297],
      LANDSCAPE: [297, 210],
      AUTO: [210, 297],
    } as const;
    for (const [size, [w, h]] of Object.entries(sizes)) {
      await save({ code: `PAPER_${size}`, inputType: 'HTML', documentSize: size, content: `<p>${size} {{x}}</p>` });
      const res = await generate(`PAPER_${size}`, { x: 1 });
      expect(res.statusCode, res.body).toBe(200);
      const [page] = (await readPdf(res.rawPayload)).pages;
      expect(Math.abs((page?.width ?? 0) - mmToPt(w)), `${size} width`).toBeLessThanOrEqual(1);
      expect(Math.abs((page?.height ?? 0) - mmToPt(h)), `${size} height`).toBeLessThanOrEqual(1);
      expect(page?.text).toContain(`${size} 1`);
    }
  });

  it('is the same bytes for the same version and data; ?templateVersion= regenerates an older version as it was', async () => {
    const first = await generate('INVOICE', invoiceData);
    const again = await generate('INVOICE', invoiceData);
    expect(again.rawPayload.equals(first.rawPayload)).toBe(true);
    expect(again.headers.etag).toBe(first.headers.etag);

    const replaced = await t.call({
      method: 'PATCH',
      url: '/api/v1/formatter-templates/INVOICE',
      payload: { content: INVOICE.replace('Invoice', 'Tax invoice') },
    });
    expect(replaced.statusCode, replaced.body).toBe(200);
    const now = await generate('INVOICE', invoiceData);
    expect(now.headers['x-template-version']).toBe('1');
    expect((await readPdf(now.rawPayload)).text).toContain('Tax invoice INV-2026-0042');
    const old = await generate('INVOICE', invoiceData, 'format=pdf&templateVersion=0');
    expect(old.headers['x-template-version']).toBe('0');
    expect(old.rawPayload.equals(first.rawPayload)).toBe(true);
    const future = await generate('INVOICE', invoiceData, 'format=pdf&templateVersion=7');
    expect([future.statusCode, future.json<ErrorBody>().message]).toEqual([404, 'FORMATTER_TEMPLATE "INVOICE" not found']);
    // Templates are named by code: an id is not a code, at a version or not.
    const { id } = (await t.call({ method: 'GET', url: '/api/v1/formatter-templates/INVOICE' })).json<{ id: string }>();
    expect((await generate(id, invoiceData, 'format=pdf&templateVersion=0')).statusCode).toBe(404);
    expect((await generate(id, invoiceData)).statusCode).toBe(404);
  });

  it('answers a JSON string of base64 for Accept: application/json', async () => {
    const file = await generate('INVOICE', invoiceData);
    const json = await generate('INVOICE', invoiceData, 'format=pdf', { accept: 'application/json' });
    expect(json.statusCode).toBe(200);
    expect(json.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(Buffer.from(json.json<string>(), 'base64').equals(file.rawPayload)).toBe(true);
    expect(json.headers.etag).toBe(file.headers.etag);
  });

  it("makes HTML documents and SCRIPT templates' documents; FILE-only and unknown answers are clear", async () => {
    const html = await generate('INVOICE', invoiceData, 'format=html');
    expect(html.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(html.headers['content-disposition']).toBe('attachment; filename="INVOICE.html"');
    expect(html.body).toContain('Customer: Ada Lovelace &amp; Co');
    await save({
      code: 'SCRIPTED',
      inputType: 'SCRIPT',
      content: '"<h2>Order " & order.id & "</h2><p>" & $join(order.items, ", ") & "</p>"',
    });
    const scripted = await generate('SCRIPTED', { order: { id: 'O-7', items: ['modem', 'router'] } });
    expect(scripted.statusCode, scripted.body).toBe(200);
    expect((await readPdf(scripted.rawPayload)).text).toContain('modem, router');
    expect((await generate('NO_SUCH', {})).statusCode).toBe(404);
    const badFormat = await generate('INVOICE', {}, 'format=exe');
    expect(badFormat.statusCode).toBe(400);
    expect(badFormat.json<ErrorBody>().errors[0]).toMatch(/^query\.format: /);
    const tooBig = await generate('INVOICE', { blob: 'x'.repeat(2 * 1024 * 1024) });
    expect(tooBig.statusCode).toBe(413);
  });
});

describe('a batch of documents', () => {
  it('answers every item in order, an error entry for the bad one, the others made', async () => {
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/formatter/documents?format=pdf',
      as: 'viewer',
      payload: [
        { documentId: 'a', documentTemplateCode: 'INVOICE', data: invoiceData },
        { documentId: 'b', documentTemplateCode: 'NO_SUCH', data: {} },
        { documentId: 'c', documentTemplateCode: 'INVOICE', data: { ...invoiceData, number: 'INV-2' }, templateVersion: 0 },
      ],
    });
    expect(res.statusCode, res.body).toBe(200);
    const items =
      res.json<
        { documentId: string; data?: string; error?: ErrorBody & { status: string }; templateVersion?: number; contentType?: string }[]
      >();
    expect(items.map((i) => i.documentId)).toEqual(['a', 'b', 'c']);
    expect(items[1]?.error).toMatchObject({ status: 'NOT_FOUND', code: 'FORMATTER_TEMPLATE.NOT_FOUND' });
    expect(items[0]?.contentType).toBe('application/pdf');
    expect((await readPdf(Buffer.from(items[0]?.data ?? '', 'base64'))).text).toContain('Tax invoice INV-2026-0042');
    expect(items[2]?.templateVersion).toBe(0);
    expect((await readPdf(Buffer.from(items[2]?.data ?? '', 'base64'))).text).toContain('Invoice INV-2');
  });

  it('refuses more than 100 documents with a 413', async () => {
    const items = Array.from({ length: 101 }, (_, i) => ({ documentId: String(i), documentTemplateCode: 'INVOICE', data: {} }));
    const res = await t.call({ method: 'POST', url: '/api/v1/formatter/documents?format=html', payload: items });
    expect(res.statusCode).toBe(413);
    expect(res.json<ErrorBody>().code).toBe('FORMATTER.BATCH_TOO_LARGE');
  });
});

describe('a template fetches nothing', () => {
  const payloads = (u: string) => [
    `<img src="${u}/img.png">`,
    `<link rel="stylesheet" href="${u}/link.css">`,
    `<link rel="preconnect" href="${u}"><link rel="prefetch" href="${u}/prefetch"><link rel="icon" href="${u}/icon.png">`,
    `<iframe src="${u}/iframe"></iframe>`,
    `<style>@import url("${u}/import.css"); body { background: url(${u}/bg.png) } @font-face { font-family: x; src: url(${u}/font.woff) } p { font-family: x }</style>`,
    `<p style="background-image: url('${u}/inline.png')">styled</p>`,
    `<meta http-equiv="refresh" content="0; url=${u}/refresh">`,
    `<svg xmlns="http://www.w3.org/2000/svg"><image href="${u}/svg.png" width="10" height="10"/><use href="${u}/sprite.svg#a"/></svg>`,
    `<object data="${u}/object"></object><embed src="${u}/embed"><video poster="${u}/poster.png" src="${u}/video.mp4"></video><audio src="${u}/audio.mp3"></audio>`,
    `<img srcset="${u}/srcset.png 2x"><picture><source srcset="${u}/source.png"><img src="${u}/picture.png"></picture>`,
    `<script src="${u}/script.js"></script><script>fetch("${u}/fetch")</script>`,
    `<form action="${u}/form"><input type="image" src="${u}/input.png"></form><base href="${u}/base/"><img src="relative.png">`,
  ];

  it('in HTML templates and SCRIPT templates: the canary sees no request and no connection', async () => {
    const all = payloads(canaryUrl).join('\n');
    await save({ code: 'SSRF_HTML', inputType: 'HTML', content: `<html><head>${all}</head><body><p>canary {{x}}</p>${all}</body></html>` });
    await save({ code: 'SSRF_SCRIPT', inputType: 'SCRIPT', content: '"<p>canary</p>" & payload' });
    for (const [code, data] of [
      ['SSRF_HTML', { x: 1 }],
      ['SSRF_SCRIPT', { payload: all }],
    ] as const) {
      const res = await generate(code, data);
      expect(res.statusCode, res.body).toBe(200);
      expect((await readPdf(res.rawPayload)).text).toContain('canary');
    }
    // Data is escaped in HTML templates, so a payload in the data is text, not markup.
    const escaped = await generate('INVOICE', { customer: all });
    expect(escaped.statusCode).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(canary.requests).toEqual([]);
    expect(canary.connections()).toBe(0);
  });

  it('reads no local file', async () => {
    await save({
      code: 'LOCAL_FILE',
      inputType: 'HTML',
      content:
        '<p>start</p><iframe src="file:///etc/passwd" width="600" height="400"></iframe><object data="file:///etc/passwd"></object><img src="file:///etc/hostname"><p>end</p>',
    });
    const res = await generate('LOCAL_FILE', {});
    expect(res.statusCode).toBe(200);
    const text = (await readPdf(res.rawPayload)).text;
    expect(text).toContain('start');
    expect(text).not.toContain('root:');
  });
});
