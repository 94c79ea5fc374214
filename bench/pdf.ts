// The PDF figure of `npm run bench` (figure 7; alone: `npm run bench:pdf`). A 2-page HTML template,
// rendered on a warm pool, against raw puppeteer in the same run on the same Chromium:
//
//   latency  baseline: raw puppeteer-core, one page reused (JavaScript off), setContent + pdf of the
//            HTML the template makes, one at a time. Measured: POST /api/v1/formatter/documents/
//            {code}?format=pdf over HTTP (keep-alive) on the embedded service, one at a time: the
//            template read, handlebars, the queue, the page, the reproducible-date fix, HTTP.
//            p50 and p99 of each; goal p50 at least 70% of raw speed and under 60 ms.
//   parallel throughput of the service's renderer with 2 pages against 1 page, 4 callers each;
//            goal at least 1.5x. Printed beside it: raw puppeteer's own ratio (two pages of one
//            browser looping against one), the ceiling the machine's cores allow.
//
// Rounds alternate the two sides so a neighbour's load weighs on both alike; each figure is the
// median of the rounds. Flags: --pdf-rounds N (default 4), --pdf-renders N (per side per round,
// default 50), --pdf-seconds S (throughput per side per round, default 3).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import puppeteer from 'puppeteer-core';
import { signHs256, hs256Verifier } from '../api/auth.ts';
import { composeService } from '../api/compose.ts';
import { CompiledTemplates, renderHandlebars } from '../modules/documents/domain/templates.ts';
import { paperOf } from '../modules/documents/domain/documents.ts';
import { findChromium, ChromiumPdfRenderer } from '../infra/chromium/pdfRenderer.ts';
import { openEmbeddedStores } from '../infra/embedded.ts';

export type PdfFigure = {
  raw: { p50: number; p99: number };
  ours: { p50: number; p99: number };
  /** Raw p50 over ours (1 = as fast as raw). */
  speed: number;
  one: number;
  two: number;
  parallel: number;
  /** The same ratio for raw puppeteer (two pages of one browser against one): what the machine allows. */
  rawParallel: number;
};

const TEMPLATE =
  '<html><head><style>body { font-family: sans-serif } td { border-bottom: 1px solid #ccc; padding: 2px 6px }</style></head><body>' +
  '<h1>Invoice {{number}}</h1><p>{{customer}}</p><table>{{#each lines}}<tr><td>{{item}}</td><td>{{formatNumber price "en-GB" minimumFractionDigits=2}}</td></tr>{{/each}}</table>' +
  '<p style="page-break-before: always">Terms: {{terms}}</p></body></html>';
const DATA = {
  number: 'INV-2026-0042',
  customer: 'Ada Lovelace & Co',
  lines: Array.from({ length: 30 }, (_, i) => ({ item: `Service ${String(i + 1)}`, price: 10 + i })),
  terms: 'Payable within 14 days.',
};

const quantile = (sorted: readonly number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
const median = (values: readonly number[]): number =>
  quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );

async function timed(n: number, once: () => Promise<unknown>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await once();
    times.push(performance.now() - started);
  }
  return times;
}

async function throughput(renderer: ChromiumPdfRenderer, html: string, seconds: number, callers: number): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let done = 0;
  const caller = async () => {
    while (performance.now() < until) {
      await renderer.pdf(html, paperOf('A4'));
      done += 1;
    }
  };
  await Promise.all(Array.from({ length: callers }, caller));
  return done / seconds;
}

/** The embedded service with the template, and one render of it over HTTP. */
async function benchService(): Promise<{ render: () => Promise<void>; close: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-pdf-'));
  const secret = new TextEncoder().encode('bench-secret-that-is-long-enough-for-hs256-0123456789');
  const pdf = new ChromiumPdfRenderer({ pages: 2 });
  const service = await composeService({ ...openEmbeddedStores(dataDir), verifyToken: hs256Verifier(secret), documents: { pdf } });
  await service.startProjectors();
  const base = await service.app.listen({ port: 0, host: '127.0.0.1' });
  const headers = {
    authorization: `Bearer ${await signHs256(secret, { sub: 'bench', roles: ['admin'] })}`,
    'content-type': 'application/json',
  };
  const created = await fetch(`${base}/api/v1/formatter-templates`, {
    method: 'POST',
    headers,
    body: JSON.stringify({ code: 'BENCH_INVOICE', inputType: 'HTML', documentSize: 'A4', content: TEMPLATE }),
  });
  if (created.status !== 201) throw new Error(`template not created: ${String(created.status)} ${await created.text()}`);
  const body = JSON.stringify(DATA);
  const render = async () => {
    const res = await fetch(`${base}/api/v1/formatter/documents/BENCH_INVOICE?format=pdf`, { method: 'POST', headers, body });
    const bytes = await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`render failed: ${String(res.status)} ${new TextDecoder().decode(bytes)}`);
  };
  return {
    render,
    close: async () => {
      await service.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function pdfFigure(options: { rounds: number; renders: number; seconds: number }): Promise<PdfFigure> {
  const html = renderHandlebars(new CompiledTemplates(), { key: 'bench', version: 0 }, TEMPLATE, DATA, 'html');
  const executable = await findChromium(process.env.CHROME_PATH);
  const browser = await puppeteer.launch({
    executablePath: executable.path,
    headless: executable.headless,
    args: ['--no-sandbox', '--no-zygote', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  const page = await browser.newPage();
  await page.setJavaScriptEnabled(false);
  const second = await browser.newPage();
  await second.setJavaScriptEnabled(false);
  const rawOn = (p: typeof page) => async () => {
    await p.setContent(html, { waitUntil: 'load' });
    await p.pdf({ format: 'A4', printBackground: true });
  };
  const raw = rawOn(page);
  const rawLoop = async (p: typeof page, seconds: number) => {
    const until = performance.now() + seconds * 1000;
    let done = 0;
    while (performance.now() < until) {
      await rawOn(p)();
      done += 1;
    }
    return done / seconds;
  };

  const service = await benchService();
  const ours = service.render;
  const one = new ChromiumPdfRenderer({ pages: 1, queueLimit: 64 });
  const two = new ChromiumPdfRenderer({ pages: 2, queueLimit: 64 });
  try {
    // Warm both sides: the browser launched, the template compiled, the pages made.
    await timed(10, raw);
    await timed(10, ours);
    await timed(5, () => one.pdf(html, paperOf('A4')));
    await timed(5, () => two.pdf(html, paperOf('A4')));
    const rawTimes: number[] = [];
    const ourTimes: number[] = [];
    const speeds: number[] = [];
    const parallel: { one: number; two: number; ratio: number; raw: number }[] = [];
    for (let round = 1; round <= options.rounds; round++) {
      const r = (await timed(options.renders, raw)).sort((a, b) => a - b);
      const o = (await timed(options.renders, ours)).sort((a, b) => a - b);
      rawTimes.push(...r);
      ourTimes.push(...o);
      speeds.push(quantile(r, 0.5) / quantile(o, 0.5));
      const t1 = await throughput(one, html, options.seconds, 4);
      const t2 = await throughput(two, html, options.seconds, 4);
      const raw1 = await rawLoop(page, options.seconds);
      const raw2 = (await Promise.all([rawLoop(page, options.seconds), rawLoop(second, options.seconds)])).reduce((a, b) => a + b, 0);
      parallel.push({ one: t1, two: t2, ratio: t2 / t1, raw: raw2 / raw1 });
      console.log(
        `  round ${String(round)}: raw p50 ${quantile(r, 0.5).toFixed(1)} ms | ours p50 ${quantile(o, 0.5).toFixed(1)} ms | ` +
          `1 page ${t1.toFixed(1)}/s, 2 pages ${t2.toFixed(1)}/s (${(t2 / t1).toFixed(2)}x; raw puppeteer ${(raw2 / raw1).toFixed(2)}x)`,
      );
    }
    rawTimes.sort((a, b) => a - b);
    ourTimes.sort((a, b) => a - b);
    return {
      raw: { p50: quantile(rawTimes, 0.5), p99: quantile(rawTimes, 0.99) },
      ours: { p50: quantile(ourTimes, 0.5), p99: quantile(ourTimes, 0.99) },
      speed: median(speeds),
      one: median(parallel.map((p) => p.one)),
      two: median(parallel.map((p) => p.two)),
      parallel: median(parallel.map((p) => p.ratio)),
      rawParallel: median(parallel.map((p) => p.raw)),
    };
  } finally {
    await Promise.all([one.close(), two.close(), browser.close()]);
    await service.close();
  }
}

/** The figure's rows for the bench's table: figure, baseline, measured, ratio, goal, met. */
export function pdfRows(f: PdfFigure): [string, string, string, string, string, boolean][] {
  const ms = (n: number) => `${n.toFixed(1)} ms`;
  return [
    [
      'PDF, 2-page template, warm pool, p50',
      `${ms(f.raw.p50)} (G, raw puppeteer)`,
      ms(f.ours.p50),
      `${String(Math.floor(f.speed * 100))}%`,
      '≥ 70%, < 60 ms',
      f.speed >= 0.7 && f.ours.p50 < 60,
    ],
    ['PDF p99', `${ms(f.raw.p99)} (G)`, ms(f.ours.p99), '—', '—', true],
    [
      'PDF throughput, 2 pages vs 1, 4 callers',
      `${f.one.toFixed(1)}/s (1 page; raw puppeteer's own 2-vs-1: ${f.rawParallel.toFixed(2)}x)`,
      `${f.two.toFixed(1)}/s`,
      `${f.parallel.toFixed(2)}x`,
      '≥ 1.5x',
      f.parallel >= 1.5,
    ],
  ];
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const { values } = parseArgs({
    options: {
      'pdf-rounds': { type: 'string', default: '4' },
      'pdf-renders': { type: 'string', default: '50' },
      'pdf-seconds': { type: 'string', default: '3' },
    },
  });
  const options = { rounds: Number(values['pdf-rounds']), renders: Number(values['pdf-renders']), seconds: Number(values['pdf-seconds']) };
  console.log(
    `PDF: a 2-page template, ${String(options.rounds)} rounds of ${String(options.renders)} renders per side, throughput ${String(options.seconds)} s per side`,
  );
  const figure = await pdfFigure(options);
  console.log(
    [
      '',
      '| figure | baseline | measured | ratio | goal | met? |',
      '|---|---|---|---|---|---|',
      ...pdfRows(figure).map(([a, b, c, d, e, ok]) => `| ${a} | ${b} | ${c} | ${d} | ${e} | ${ok ? 'yes' : 'NO'} |`),
    ].join('\n'),
  );
}
