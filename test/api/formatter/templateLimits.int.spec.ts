// Template evaluation cannot freeze the service: a template whose nested loops multiply the data
// runs in a worker thread that is stopped at its time limit (422) or its heap limit (413), while the
// service keeps answering; the next render works.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WorkerTemplateRunner } from '../../../infra/templates/templateRunner.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const templates = new WorkerTemplateRunner({ timeoutMs: 1500, memoryMb: 96 });

beforeAll(async () => {
  t = await startTestApp({ documents: { templates } });
  // Time, not size: each cell writes nothing (a row writes one character), so the loops can only end at the time limit
  // (cells of `<td>n</td>` reached the 96 MiB document limit first on a fast machine).
  const nested = '{{#each rows}}{{#each ../cols}}{{#if @last}}.{{/if}}{{/each}}{{/each}}';
  for (const [code, inputType, content] of [
    ['NESTED', 'HTML', nested],
    ['REPEAT', 'HTML', '{{#each rows}}{{../big}}{{/each}}'],
    ['FINE', 'HTML', '<p>{{name}}</p>'],
    ['PAD', 'SCRIPT', '$pad("", 500000000, "x")'],
  ]) {
    const res = await t.call({ method: 'POST', url: '/api/v1/formatter-templates', payload: { code, inputType, content } });
    expect(res.statusCode, res.body).toBe(201);
  }
});
afterAll(async () => {
  await t.close();
});

const html = (code: string, data: unknown) => t.call({ method: 'POST', url: `/api/v1/formatter/documents/${code}?format=html`, payload: data, as: 'viewer' });

describe('template evaluation', () => {
  it('stops nested loops at the time limit with a 422 while the service keeps answering', async () => {
    const range = (n: number) => Array.from({ length: n }, (_, i) => i);
    const reading = { on: true, answered: 0 };
    const probe = (async () => {
      while (reading.on) {
        await t.call({ method: 'GET', url: '/health/live', as: null });
        reading.answered += 1;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
    const started = performance.now();
    const res = await html('NESTED', { rows: range(8000), cols: range(8000) });
    const took = performance.now() - started;
    const answeredMeanwhile = reading.answered;
    reading.on = false;
    await probe;
    expect(res.statusCode, res.body).toBe(422);
    expect(res.json<{ code: string; message: string }>()).toMatchObject({ code: 'FORMATTER.RENDER_FAILED', message: expect.stringContaining('longer than 1500 ms') as string });
    expect(took).toBeLessThan(20_000);
    expect(answeredMeanwhile).toBeGreaterThanOrEqual(5);
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
