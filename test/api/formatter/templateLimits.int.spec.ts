// Template evaluation cannot freeze the service: a template whose nested loops multiply the data
// runs in a worker thread that is stopped at its time limit (422) or its heap limit (413), while the
// service keeps answering; the next render works.
//
// The runner's time limit is a setTimeout; here it runs on a fake clock that only the first test
// moves, once its template is running. So no other render can meet the limit however slow the
// machine is (a FINE render or a 413 once hit it on a loaded one), and the endless one meets it
// exactly when the clock says 1500 ms have passed.

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WorkerTemplateRunner } from '../../../infra/templates/templateRunner.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const templates = new WorkerTemplateRunner({ timeoutMs: 1500, memoryMb: 96 });

beforeAll(async () => {
  t = await startTestApp({ documents: { templates } });
  // Time, not size: 3000³ iterations that write nothing, so the loops can only end at the time limit
  // (cells of `<td>n</td>` reached the 96 MiB document limit first on a fast machine).
  const nested = '{{#each a}}{{#each ../a}}{{#each ../../a}}{{/each}}{{/each}}{{/each}}';
  for (const [code, inputType, content] of [
    ['NESTED', 'HTML', nested],
    ['REPEAT', 'HTML', '{{#each rows}}{{../big}}{{/each}}'],
    ['FINE', 'HTML', '<p>{{name}}</p>'],
    ['PAD', 'SCRIPT', '$pad("", 500000000, "x")'],
  ]) {
    const res = await t.call({ method: 'POST', url: '/api/v1/formatter-templates', payload: { code, inputType, content } });
    expect(res.statusCode, res.body).toBe(201);
  }
  // Both threads loaded before the clock is faked: the endless template then runs at once.
  expect((await html('FINE', { name: 'warm' })).body).toBe('<p>warm</p>');
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
});
afterAll(async () => {
  vi.useRealTimers();
  await t.close();
});

const html = (code: string, data: unknown) =>
  t.call({ method: 'POST', url: `/api/v1/formatter/documents/${code}?format=html`, payload: data, as: 'viewer' });

describe('template evaluation', () => {
  it('stops nested loops at the time limit with a 422 while the service keeps answering', async () => {
    const outcome = { settled: false };
    const rendering = html('NESTED', { a: Array.from({ length: 3000 }, (_, i) => i) }).finally(() => {
      outcome.settled = true;
    });
    // Its job has a thread (and its time limit is set, in the same turn): the template is running.
    while (templates.load.interactive.running === 0) await new Promise((resolve) => setImmediate(resolve));
    for (let i = 0; i < 5; i++) expect((await t.call({ method: 'GET', url: '/health/live', as: null })).statusCode).toBe(200);
    await vi.advanceTimersByTimeAsync(1499);
    expect(outcome.settled).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    const res = await rendering;
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json<{ code: string; message: string }>()).toMatchObject({
      code: 'FORMATTER.RENDER_FAILED',
      message: expect.stringContaining('longer than 1500 ms') as string,
    });
    expect((await html('FINE', { name: 'next' })).body).toBe('<p>next</p>');
  });

  it('refuses a template that builds more text than a document may hold with a 413', async () => {
    const res = await html('REPEAT', { rows: Array.from({ length: 40_000 }, (_, i) => i), big: 'x'.repeat(1_000_000) });
    expect(res.statusCode, res.body).toBe(413);
    expect(res.json<{ code: string }>().code).toBe('FORMATTER.DOCUMENT_TOO_LARGE');
    const pad = await html('PAD', {});
    expect(pad.statusCode, pad.body).toBe(413);
    expect((await html('FINE', { name: 'after' })).body).toBe('<p>after</p>');
  });
});
