// One caller cannot stall every document: the Chromium pages and the LibreOffice process, like the
// template threads, give each caller (the token's subject) a bounded share. A viewer's PDFs that run
// to the time limit once held both pages and the queue behind them, so an admin's one-page PDF
// waited for them (15.5 s against 1.8 s on npm start); now the viewer renders on one page at most
// and has at most TEMPLATE_JOBS_PER_CALLER documents waiting or running (429 beyond). A real
// Chromium and, where installed, a real LibreOffice.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { ChromiumPdfRenderer } from '../../../infra/chromium/pdfRenderer.ts';
import { findLibreOffice, LibreOfficeConverter } from '../../../infra/libreoffice/officeConverter.ts';
import { startTestApp, TEST_SECRET, type TestApp } from '../../support/testApp.ts';

/** The time limit of a render: the viewer's renders run to it. */
const TIMEOUT_MS = 6000;
const pdf = new ChromiumPdfRenderer({ pages: 2, queueLimit: 16, timeoutMs: TIMEOUT_MS, jobsPerCaller: 2 });

let t: TestApp;
let base: string;

beforeAll(async () => {
  t = await startTestApp({ documents: { pdf } });
  base = await t.listen();
  for (const [code, content] of [
    ['ONE_PAGE', '<h1>{{title}}</h1>'],
    ['HUGE', '<table>{{#each rows}}<tr>{{#each ../cols}}<td>{{this}}</td>{{/each}}</tr>{{/each}}</table>'],
  ]) {
    const res = await t.call({ method: 'POST', url: '/api/v1/formatter-templates', payload: { code, inputType: 'HTML', content } });
    expect(res.statusCode, res.body).toBe(201);
  }
  // The browser is launched and its pages made before the attack.
  expect((await render('ONE_PAGE', { title: 'warm' }, t.tokens.admin)).status).toBe(200);
});
afterAll(async () => {
  await t.close();
});

/** A PDF over real HTTP, and when its answer came. */
async function render(code: string, data: unknown, token: string): Promise<{ status: number; code?: string; at: number }> {
  const res = await fetch(`${base}/api/v1/formatter/documents/${code}?format=pdf`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' },
    body: JSON.stringify(data),
    signal: AbortSignal.timeout(120_000),
  });
  const body = (await res.json()) as { code?: string };
  return { status: res.status, ...(res.ok ? {} : { code: body.code ?? '' }), at: performance.now() };
}

// 30,000 rows of 10 cells: far more than the time limit of layout and printing.
const huge = { rows: Array.from({ length: 30_000 }, (_, i) => i), cols: Array.from({ length: 10 }, (_, i) => `cell ${String(i)}`) };

describe("PDF documents under one caller's attack", () => {
  it("leave another caller a page: its PDF is made while the viewer's run, and beyond its share the viewer gets 429", async () => {
    const state = { answered: 0 };
    const attack = Promise.all(
      Array.from({ length: 6 }, async () => {
        const answer = await render('HUGE', huge, t.tokens.viewer);
        state.answered += 1;
        return answer;
      }),
    );
    // Every request of the attack answered or at the pages (rendering or waiting for one).
    for (let i = 0; i < 3000 && state.answered + pdf.queue.running + pdf.queue.waiting < 6; i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
    const other = await render(
      'ONE_PAGE',
      { title: 'meanwhile' },
      await signHs256(TEST_SECRET, { sub: 'another-viewer', roles: ['viewer'] }),
    );
    const answers = await attack;
    expect(other.status).toBe(200);
    // The viewer's renders end only at the time limit: the other caller's PDF came back before.
    const firstHeavyEnd = Math.min(...answers.filter((a) => a.status === 503).map((a) => a.at));
    expect(other.at, "the other caller's PDF waited for the viewer's").toBeLessThan(firstHeavyEnd);
    expect(answers.map((a) => `${String(a.status)} ${a.code ?? ''}`).sort()).toEqual([
      ...Array<string>(4).fill('429 FORMATTER.TOO_MANY_RENDERS_OF_CALLER'),
      ...Array<string>(2).fill('503 FORMATTER.RENDER_TIMEOUT'),
    ]);
  });
});

const soffice = findLibreOffice(process.env.SOFFICE_PATH);
if (soffice === undefined)
  process.stderr.write(
    '[documentShares] skipping the office share test: LibreOffice (soffice with python3-uno) not found. Debian: apt-get install libreoffice-writer-nogui libreoffice-calc-nogui python3-uno\n',
  );

describe.skipIf(soffice === undefined)('office conversions of one caller', () => {
  it("beyond its share are refused at once with 429, and another caller's still queue", async () => {
    const office = new LibreOfficeConverter({ jobsPerCaller: 2 });
    try {
      const html = new TextEncoder().encode('<p>x</p>');
      const convert = (subject: string) =>
        office.convert(html, 'html-text', 'docx', { caller: { subject } }).then(
          () => 'done',
          (error: unknown) => (error as { code?: string }).code ?? String(error),
        );
      // Two take the caller's share (LibreOffice starts on the first: seconds); the third is refused
      // before any of them ends.
      const first = [convert('vera'), convert('vera')];
      const third = await convert('vera');
      expect(third).toBe('FORMATTER.TOO_MANY_RENDERS_OF_CALLER');
      expect(await Promise.all([...first, convert('otto')])).toEqual(['done', 'done', 'done']);
    } finally {
      await office.close();
    }
  });
});
