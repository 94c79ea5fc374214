// Inputs at the edges of the contract: each once answered wrongly (a 500, a silent loss, a 409
// where the write should apply). Every case must answer as API.md says.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accessRule } from '../../domain/access/accessRule.ts';
import { userGroupType } from '../../modules/registries/domain/userGroupType.ts';
import { sampleBody, uniqueCode } from '../support/samples.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});
const base = '/api/v1/user-group-types';
const create = async (extra: Record<string, unknown> = {}) => {
  const res = await t.call({ method: 'POST', url: base, payload: { ...sampleBody(userGroupType, uniqueCode()), ...extra } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string; code: string }>();
};

describe('Idempotency-Key', () => {
  it('of two concurrent creates under one key with different bodies, one is written and the other refused', async () => {
    const key = randomUUID();
    const [a, b] = [uniqueCode(), uniqueCode()];
    const results = await Promise.all(
      [a, b].map((code) =>
        t.call({ method: 'POST', url: base, headers: { 'idempotency-key': key }, payload: sampleBody(userGroupType, code) }),
      ),
    );
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 409]);
    const winner = results.find((r) => r.statusCode === 201)?.json<{ code: string }>().code;
    const loser = winner === a ? b : a;
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${winner ?? ''}` })).statusCode).toBe(200);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${loser}` })).statusCode).toBe(404);
  });

  it("is the caller's own: another caller with the same key creates its own record", async () => {
    const key = randomUUID();
    const mine = await t.call({
      method: 'POST',
      url: base,
      headers: { 'idempotency-key': key },
      payload: sampleBody(userGroupType, uniqueCode()),
    });
    const theirs = await t.call({
      method: 'POST',
      url: base,
      as: 'editor',
      headers: { 'idempotency-key': key },
      payload: sampleBody(userGroupType, uniqueCode()),
    });
    expect([mine.statusCode, theirs.statusCode]).toEqual([201, 201]);
    expect(mine.json<{ id: string }>().id).not.toBe(theirs.json<{ id: string }>().id);
  });

  it('makes a retried delete answer 204 again', async () => {
    const { id } = await create();
    const first = await t.call({ method: 'DELETE', url: `${base}/${id}`, headers: { 'idempotency-key': 'del-1' } });
    const again = await t.call({ method: 'DELETE', url: `${base}/${id}`, headers: { 'idempotency-key': 'del-1' } });
    expect([first.statusCode, again.statusCode]).toEqual([204, 204]);
    expect((await t.call({ method: 'GET', url: `${base}/${id}/history` })).json<unknown[]>()).toHaveLength(2);
  });
});

describe('concurrency without If-Match', () => {
  it('applies every one of 60 concurrent patches of one record', async () => {
    const { id } = await create();
    const results = await Promise.all(
      Array.from({ length: 60 }, (_, i) => t.call({ method: 'PATCH', url: `${base}/${id}`, payload: { description: `w${String(i)}` } })),
    );
    expect(results.filter((r) => r.statusCode !== 200).map((r) => r.body)).toEqual([]);
    const history = await t.call({ method: 'GET', url: `${base}/${id}/history` });
    expect(history.json<unknown[]>()).toHaveLength(61);
  });
});

describe('bad values answer 400, never 500', () => {
  it.each([
    [
      'a malformed date-time on create',
      () => t.call({ method: 'POST', url: base, payload: { ...sampleBody(userGroupType, uniqueCode()), validityFrom: 'junk' } }),
    ],
    [
      'a malformed date-time in a patch',
      async () => t.call({ method: 'PATCH', url: `${base}/${(await create()).id}`, payload: { validityTo: 'x' } }),
    ],
    ['a malformed asOf', async () => t.call({ method: 'GET', url: `${base}/${(await create()).id}?asOf=junk` })],
    [
      'a nested malformed date-time',
      () =>
        t.call({
          method: 'POST',
          url: '/api/v1/access-rules',
          payload: { ...sampleBody(accessRule, uniqueCode()), validFor: { validTo: '2026-13-45' } },
        }),
    ],
    [
      'JSON nested 40 levels deep',
      () => {
        let deep: unknown = 1;
        for (let i = 0; i < 40; i++) deep = [deep];
        return t.call({ method: 'POST', url: base, payload: { ...sampleBody(userGroupType, uniqueCode()), registry: { d: deep } } });
      },
    ],
    [
      'JSON nested 5000 levels deep',
      () =>
        t.call({
          method: 'POST',
          url: base,
          headers: { 'content-type': 'application/json' },
          payload: `{"registry":${'['.repeat(5000)}${']'.repeat(5000)}}`,
        }),
    ],
    ['a malformed URL', () => t.call({ method: 'GET', url: `${base}/%zz` })],
    ['an over-long idOrCode', () => t.call({ method: 'GET', url: `${base}/${'x'.repeat(300)}` })],
    ['unknown query parameters', () => t.call({ method: 'GET', url: `${base}?foo=1` })],
  ])('%s', async (_name, send) => {
    const res = await send();
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json()).toMatchObject({ status: 'BAD_REQUEST', traceId: expect.any(String), errors: expect.any(Array) });
  });

  it('keeps JSON nested 30 levels deep', async () => {
    let deep: unknown = 'leaf';
    for (let i = 0; i < 28; i++) deep = { n: deep };
    await create({ registry: { d: deep } });
  });
});

describe('merge patch (RFC 7396)', () => {
  it('removes members of nested objects and maps with null', async () => {
    const rule = await t.call({
      method: 'POST',
      url: '/api/v1/access-rules',
      payload: {
        ...sampleBody(accessRule, uniqueCode()),
        validFor: { validFrom: '2026-01-01T00:00:00Z', validTo: '2027-01-01T00:00:00Z' },
      },
    });
    const id = rule.json<{ id: string }>().id;
    const res = await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${id}`, payload: { validFor: { validTo: null } } });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ validFor: { validFrom: '2026-01-01T00:00:00.000Z' } });
    expect(res.json<{ validFor: object }>().validFor).not.toHaveProperty('validTo');

    const { id: typeId } = await create({ localizationData: { en: { name: 'E' }, cs: { name: 'C' } } });
    const loc = await t.call({ method: 'PATCH', url: `${base}/${typeId}`, payload: { localizationData: { en: null } } });
    expect(loc.json()).toMatchObject({ localizationData: { cs: { name: 'C' } } });
    expect(loc.json<{ localizationData: object }>().localizationData).not.toHaveProperty('en');
  });
});

describe('client ids', () => {
  it('accepts an upper-case uuid and stores it lower-case', async () => {
    const id = randomUUID().toUpperCase();
    const created = await create({ id });
    expect(created.id).toBe(id.toLowerCase());
    const put = await t.call({ method: 'PUT', url: `${base}/${id}`, payload: { ...sampleBody(userGroupType, created.code), id } });
    expect(put.statusCode, put.body).toBe(200);
  });
});

describe('minPosition', () => {
  it("takes positions as long as KurrentDB packs them (39 digits), not only the embedded log's", async () => {
    const made = await t.call({ method: 'POST', url: base, payload: sampleBody(userGroupType, uniqueCode()) });
    const embedded = String(made.headers['x-event-position']);
    // The same number written with leading zeros to 39 digits: a valid position, already reached.
    const wide = embedded.padStart(39, '0');
    const res = await t.call({ method: 'GET', url: `${base}?minPosition=${wide}` });
    expect(res.statusCode, res.body).toBe(200);
    const tooLong = await t.call({ method: 'GET', url: `${base}?minPosition=${'9'.repeat(41)}` });
    expect(tooLong.statusCode).toBe(400);
  });
});
