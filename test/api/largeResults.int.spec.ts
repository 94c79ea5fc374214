// No legal sequence of writes can make a read fail: records are bounded so that every version fits
// one event of either log, and answers that carry many records or versions are written a few at a
// time (chunked), never built as one string.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_RECORD_BYTES } from '../../domain/shared/commandHandler.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';
import { uniqueCode } from '../support/samples.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});
const base = '/api/v1/formatter-templates';
const template = (code: string, content: string) => ({ code, inputType: 'HTML', content });
// Near the record limit: 480,000 characters of ASCII content.
const large = (tag: string) => `<p>${tag}</p>`.padEnd(480_000, 'x');

describe('record size', () => {
  it('refuses a record over 512 KiB of JSON with 413 and the error body, and a content over 500,000 characters with 400', async () => {
    // 300,000 three-byte characters: within the character limit, 900,000 bytes of JSON.
    const wide = await t.call({ method: 'POST', url: base, payload: template(uniqueCode(), '€'.repeat(300_000)) });
    expect(wide.statusCode, wide.body.slice(0, 300)).toBe(413);
    expect(wide.json()).toMatchObject({ status: 'PAYLOAD_TOO_LARGE', code: 'FORMATTER_TEMPLATE.TOO_LARGE' });
    expect(wide.json<{ errors: string[] }>().errors[0]).toContain(String(MAX_RECORD_BYTES));
    const long = await t.call({ method: 'POST', url: base, payload: template(uniqueCode(), 'x'.repeat(500_001)) });
    expect(long.statusCode).toBe(400);
  });

  it('refuses a patch that would grow a record past the limit, and keeps the record as it was', async () => {
    const created = await t.call({ method: 'POST', url: base, payload: template(uniqueCode(), large('a')) });
    expect(created.statusCode).toBe(201);
    const { id } = created.json<{ id: string }>();
    const grown = await t.call({ method: 'PATCH', url: `${base}/${id}`, payload: { previewData: { more: 'y'.repeat(100_000) } } });
    expect(grown.statusCode).toBe(413);
    expect((await t.call({ method: 'GET', url: `${base}/${id}` })).json()).not.toHaveProperty('previewData');
  });
});

describe('answers with many large records', () => {
  it('list all, search and paged search of 30 near-limit records answer complete JSON, sent in chunks', async () => {
    const tag = uniqueCode();
    let position = '0';
    for (let i = 0; i < 30; i++) {
      const res = await t.call({ method: 'POST', url: base, payload: template(`${tag}-${String(i).padStart(2, '0')}`, large(tag)) });
      expect(res.statusCode).toBe(201);
      position = String(res.headers['x-event-position']);
    }
    await t.listen();
    const all = await t.call({ method: 'GET', url: `${base}?minPosition=${position}` });
    expect(all.statusCode).toBe(200);
    expect(all.headers['transfer-encoding']).toBe('chunked');
    const mine = all.json<{ code: string }[]>().filter((r) => r.code.startsWith(tag));
    expect(mine).toHaveLength(30);
    const filter = { filter: [{ column: 'code', operator: 'LIKE', value: `${tag}-%` }], sort: [{ column: 'code', order: 'DESC' }] };
    const search = await t.call({ method: 'POST', url: `${base}/search?size=25`, payload: filter });
    expect(search.json<{ code: string }[]>().map((r) => r.code)).toEqual(
      Array.from({ length: 25 }, (_, i) => `${tag}-${String(29 - i).padStart(2, '0')}`),
    );
    const page = await t.call({ method: 'POST', url: `${base}/search/page`, payload: { ...filter, page: 2, size: 12 } });
    expect(page.json()).toMatchObject({
      totalElements: 30,
      totalPages: 3,
      number: 2,
      size: 12,
      numberOfElements: 6,
      first: false,
      last: true,
      empty: false,
    });
    expect(page.json<{ content: { content: string }[] }>().content.every((r) => r.content.length === 480_000)).toBe(true);
    const ids = mine.map((r) => (r as unknown as { id: string }).id);
    const byIds = await t.call({ method: 'POST', url: `${base}/by-ids`, payload: [...ids, '6f1c2b0e-0000-4000-8000-000000000000'] });
    expect(byIds.headers['transfer-encoding']).toBe('chunked');
    expect(byIds.json<{ id: string }[]>().map((r) => r.id)).toEqual(ids);
  });

  it('history of 40 replaces of a near-limit record is paged, with the total and a link to the next page', async () => {
    const code = uniqueCode();
    const created = await t.call({ method: 'POST', url: base, payload: template(code, large('v0')) });
    const { id } = created.json<{ id: string }>();
    for (let v = 1; v < 40; v++) {
      const res = await t.call({ method: 'PUT', url: `${base}/${id}`, payload: template(code, large(`v${String(v)}`)) });
      expect(res.statusCode).toBe(200);
    }
    const first = await t.call({ method: 'GET', url: `${base}/${id}/history?size=15` });
    expect(first.statusCode).toBe(200);
    expect(first.headers['x-total-count']).toBe('40');
    expect(first.headers.link).toBe(`<${base}/${id}/history?page=1&size=15>; rel="next"`);
    expect(first.json<{ version: number }[]>().map((e) => e.version)).toEqual(Array.from({ length: 15 }, (_, i) => i));
    const last = await t.call({ method: 'GET', url: `${base}/${id}/history?page=2&size=15` });
    expect(last.headers.link).toBeUndefined();
    const entries = last.json<{ version: number; changes: { path: string }[] }[]>();
    expect(entries.map((e) => e.version)).toEqual(Array.from({ length: 10 }, (_, i) => 30 + i));
    expect(entries[0]?.changes).toEqual([{ op: 'replace', path: '/content', value: large('v30') }]);
    // The whole history (20 MB of events) is read a chunk at a time: the service answers meanwhile.
    // Counted, not timed (this machine is shared): had the reads held the event loop, the probe
    // would get at most the one answer it asked for before they started.
    const reading = { on: true, answered: 0 };
    const probe = (async () => {
      while (reading.on) {
        await t.call({ method: 'GET', url: '/health/live', as: null });
        reading.answered += 1;
      }
    })();
    // Four at once (80 MB of answers): each is made a turn of the event loop at a time.
    const [all] = await Promise.all(Array.from({ length: 4 }, () => t.call({ method: 'GET', url: `${base}/${id}/history` })));
    const asOf = await t.call({ method: 'GET', url: `${base}/${id}?asOf=2100-01-01T00:00:00Z` });
    const answeredMeanwhile = reading.answered;
    reading.on = false;
    await probe;
    expect(all?.json<unknown[]>()).toHaveLength(40);
    expect(asOf.json<{ content: string }>().content).toBe(large('v39'));
    expect(answeredMeanwhile).toBeGreaterThanOrEqual(3);
  });
});
