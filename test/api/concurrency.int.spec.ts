// Races and restarts over real HTTP on the embedded stores.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registries } from '../../modules/registries/domain/index.ts';
import { sampleBody, uniqueCode } from '../support/samples.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

const [def] = registries;
if (def === undefined) throw new Error('no registries');
const base = `/api/v1/${def.path}`;

describe('concurrent writers', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp();
    await t.listen();
  });
  afterAll(async () => {
    await t.close();
  });

  it.each(Array.from({ length: 5 }, (_, i) => i))('16 concurrent creates of one code: exactly one wins (round %i)', async () => {
    const code = uniqueCode('RACE');
    const results = await Promise.all(
      Array.from({ length: 16 }, () => t.call({ method: 'POST', url: base, payload: sampleBody(def, code) })),
    );
    const statuses = results.map((r) => r.statusCode).sort();
    expect(statuses).toEqual([201, ...Array<number>(15).fill(409)]);
    for (const r of results.filter((x) => x.statusCode === 409)) expect(r.json()).toMatchObject({ status: 'CONFLICT' });
  });

  it('concurrent patches of one record without If-Match all apply, each at its own version', async () => {
    const created = await t.call({ method: 'POST', url: base, payload: sampleBody(def, uniqueCode()) });
    const id = created.json<{ id: string }>().id;
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        t.call({ method: 'PATCH', url: `${base}/${id}`, payload: { description: `writer ${String(i)}` } }),
      ),
    );
    expect(results.map((r) => r.statusCode)).toEqual(Array<number>(10).fill(200));
    const versions = results.map((r) => r.json<{ auditInfo: { version: number } }>().auditInfo.version).sort((a, b) => a - b);
    expect(versions).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('concurrent patches pinned to one version: exactly one applies, the rest are 412', async () => {
    const created = await t.call({ method: 'POST', url: base, payload: sampleBody(def, uniqueCode()) });
    const id = created.json<{ id: string }>().id;
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.call({ method: 'PATCH', url: `${base}/${id}`, headers: { 'if-match': '"0"' }, payload: { description: `writer ${String(i)}` } }),
      ),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, ...Array<number>(7).fill(412)]);
  });
});

describe('restart', () => {
  it('keeps every acknowledged write and the read models across a restart', async () => {
    const first = await startTestApp();
    const codes = Array.from({ length: 20 }, () => uniqueCode('KEEP'));
    for (const code of codes) {
      expect((await first.call({ method: 'POST', url: base, payload: sampleBody(def, code) })).statusCode).toBe(201);
    }
    await first.close({ keepData: true });

    const second = await startTestApp({ dataDir: first.dataDir });
    try {
      for (const code of codes) expect((await second.call({ method: 'GET', url: `${base}/${code}` })).statusCode).toBe(200);
      const count = await second.call({
        method: 'POST',
        url: `${base}/count`,
        payload: { filter: [{ column: 'code', operator: 'LIKE', value: 'KEEP_%' }] },
      });
      expect(count.json()).toBe(20);
      const dup = await second.call({ method: 'POST', url: base, payload: sampleBody(def, codes[0] ?? '') });
      expect(dup.statusCode).toBe(409);
    } finally {
      await second.close();
    }
  });
});
