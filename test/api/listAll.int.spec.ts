// List all pages through the read model as it answers (a keyset): in code order for records with
// a code, in id order for those without, each record exactly once across many pages.

import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

const N = 230; // more than two pages of 100

it('lists every record once, in code order, over several pages', async () => {
  let at = '';
  for (let i = 0; i < N; i++) {
    const code = `L${String((i * 7919) % 1000).padStart(4, '0')}`;
    at = String(
      (await t.call({ method: 'POST', url: '/api/v1/worklog-types', payload: { code, name: code } })).headers['x-event-position'],
    );
  }
  const res = await t.call({ method: 'GET', url: `/api/v1/worklog-types?minPosition=${at}` });
  const codes = res.json<{ code: string }[]>().map((r) => r.code);
  expect(codes).toHaveLength(N);
  expect(new Set(codes).size).toBe(N);
  expect(codes).toEqual([...codes].sort());
});

it('lists records without a code in id order, each once', async () => {
  let at = '';
  for (let i = 0; i < N; i++) {
    at = String(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/jobs',
          payload: { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'LIST' },
        })
      ).headers['x-event-position'],
    );
  }
  const ids = (await t.call({ method: 'GET', url: `/api/v1/jobs?minPosition=${at}` })).json<{ id: string }[]>().map((r) => r.id);
  expect(ids).toHaveLength(N);
  expect(new Set(ids).size).toBe(N);
  expect(ids).toEqual([...ids].sort());
});
