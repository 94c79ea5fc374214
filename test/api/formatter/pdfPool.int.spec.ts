// The PDF renderer under pressure, over real HTTP: 200 concurrent requests of 200 callers against a
// pool of 2 pages get 200s or 503s with Retry-After (never a 500, never a hung request; one caller's
// share of the pages is documentShares.int.spec.ts's); a render past its
// time limit is a 503 and the next one succeeds; a killed browser is replaced and the next render
// succeeds.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { ChromiumPdfRenderer } from '../../../infra/chromium/pdfRenderer.ts';
import { readPdf } from '../../support/pdf.ts';
import { startTestApp, TEST_SECRET, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
let base: string;
const pdf = new ChromiumPdfRenderer({ pages: 2, queueLimit: 16, timeoutMs: 2000 });

beforeAll(async () => {
  t = await startTestApp({ documents: { pdf } });
  base = await t.listen();
  const two = '<h1>{{title}}</h1>' + '<p>{{body}}</p>'.repeat(20) + '<p style="page-break-before: always">second page</p>';
  for (const [code, content] of [
    ['TWO_PAGES', two],
    ['HUGE', '<table>{{#each rows}}<tr>{{#each ../cols}}<td>{{this}}</td>{{/each}}</tr>{{/each}}</table>'],
  ]) {
    const res = await t.call({ method: 'POST', url: '/api/v1/formatter-templates', payload: { code, inputType: 'HTML', content } });
    expect(res.statusCode, res.body).toBe(201);
  }
});
afterAll(async () => {
  await t.close();
});

const render = (code: string, data: unknown, token = t.tokens.viewer) =>
  fetch(`${base}/api/v1/formatter/documents/${code}?format=pdf`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(data),
    signal: AbortSignal.timeout(60_000),
  });

describe('the PDF pool', () => {
  it('answers 200 concurrent requests of 200 callers with 200 or 503 + Retry-After, never a 500 or a hang', async () => {
    const viewers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => signHs256(TEST_SECRET, { sub: `viewer-${String(i)}`, roles: ['viewer'] })),
    );
    const answers = await Promise.all(
      viewers.map((token, i) => render('TWO_PAGES', { title: `doc ${String(i)}`, body: 'lorem ipsum' }, token)),
    );
    const statuses = new Map<number, number>();
    for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
    expect([...statuses.keys()].sort()).toEqual(expect.arrayContaining([200]));
    expect(
      [...statuses.keys()].every((s) => s === 200 || s === 503),
      JSON.stringify([...statuses]),
    ).toBe(true);
    for (const a of answers.filter((x) => x.status === 503)) {
      expect(Number(a.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await a.json()) as { code: string }).code).toBe('FORMATTER.RENDERER_BUSY');
    }
    // The queue holds 16 and the pages 2: at least those are served.
    expect(statuses.get(200)).toBeGreaterThanOrEqual(18);
    const ok = answers.find((a) => a.status === 200);
    const doc = await readPdf(new Uint8Array(await (ok as Response).arrayBuffer()));
    expect(doc.pages.length).toBe(2);
  });

  it('stops a render past its time limit with a 503, and renders the next', async () => {
    // 30,000 rows of 10 cells: far more than 2 s of layout and printing.
    const slow = await render('HUGE', {
      rows: Array.from({ length: 30_000 }, (_, i) => i),
      cols: Array.from({ length: 10 }, (_, i) => `cell ${String(i)}`),
    });
    expect(slow.status, await slow.clone().text()).toBe(503);
    expect(((await slow.json()) as { code: string }).code).toBe('FORMATTER.RENDER_TIMEOUT');
    expect(slow.headers.get('retry-after')).toBe('1');
    const next = await render('TWO_PAGES', { title: 'after the timeout', body: 'x' });
    expect(next.status).toBe(200);
    expect((await readPdf(new Uint8Array(await next.arrayBuffer()))).text).toContain('after the timeout');
  });

  it('replaces a browser that crashed, and the next render succeeds', async () => {
    const launches = pdf.launches;
    const pid = pdf.browserProcessId();
    expect(pid).toBeTypeOf('number');
    process.kill(pid as number, 'SIGKILL');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = await render('TWO_PAGES', { title: 'after the crash', body: 'x' });
    expect(next.status).toBe(200);
    expect((await readPdf(new Uint8Array(await next.arrayBuffer()))).text).toContain('after the crash');
    expect(pdf.launches).toBe(launches + 1);
    expect(pdf.browserProcessId()).not.toBe(pid);
  });
});
