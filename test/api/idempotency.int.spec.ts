// Idempotency-Key as the hardening review probed it: a key is one request of its caller, whatever
// the resource or record; a retry is recognised by what it means, not how it is spelled.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userGroupType } from '../../modules/registries/domain/userGroupType.ts';
import { userType } from '../../modules/registries/domain/userType.ts';
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
const keyed = (key: string) => ({ 'idempotency-key': key });
type Body = { id: string; code: string; name: string; auditInfo: { version: number } };

describe('a key reused with another request', () => {
  it('is refused when the second body names its own id', async () => {
    const key = randomUUID();
    const first = await t.call({ method: 'POST', url: base, headers: keyed(key), payload: sampleBody(userGroupType, uniqueCode()) });
    const second = await t.call({
      method: 'POST',
      url: base,
      headers: keyed(key),
      payload: { id: randomUUID(), ...sampleBody(userGroupType, uniqueCode()) },
    });
    expect(first.statusCode).toBe(201);
    expect(second.statusCode, second.body).toBe(409);
    expect(second.json()).toMatchObject({ status: 'CONFLICT', code: 'REQUEST.IDEMPOTENCY_KEY_REUSED' });
  });

  it('is refused on another resource', async () => {
    const key = randomUUID();
    const first = await t.call({ method: 'POST', url: base, headers: keyed(key), payload: sampleBody(userGroupType, uniqueCode()) });
    const other = await t.call({
      method: 'POST',
      url: '/api/v1/user-types',
      headers: keyed(key),
      payload: sampleBody(userType, uniqueCode()),
    });
    expect([first.statusCode, other.statusCode]).toEqual([201, 409]);
  });

  it('is refused for a change of another record, and for a create after a change', async () => {
    const [a, b] = await Promise.all(
      [0, 1].map(async () => (await t.call({ method: 'POST', url: base, payload: sampleBody(userGroupType, uniqueCode()) })).json<Body>()),
    );
    const key = randomUUID();
    const patchA = await t.call({ method: 'PATCH', url: `${base}/${a?.id ?? ''}`, headers: keyed(key), payload: { name: 'renamed' } });
    const patchB = await t.call({ method: 'PATCH', url: `${base}/${b?.id ?? ''}`, headers: keyed(key), payload: { name: 'renamed' } });
    const create = await t.call({ method: 'POST', url: base, headers: keyed(key), payload: sampleBody(userGroupType, uniqueCode()) });
    expect([patchA.statusCode, patchB.statusCode, create.statusCode]).toEqual([200, 409, 409]);
  });
});

describe('a retry', () => {
  it('to the same collection with a trailing slash answers the first result', async () => {
    const key = randomUUID();
    const body = sampleBody(userGroupType, uniqueCode());
    const first = await t.call({ method: 'POST', url: base, headers: keyed(key), payload: body });
    const again = await t.call({ method: 'POST', url: `${base}/`, headers: keyed(key), payload: body });
    expect([first.statusCode, again.statusCode]).toEqual([201, 201]);
    expect(again.json<Body>().id).toBe(first.json<Body>().id);
  });

  it('with the members of the body in another order answers the first result', async () => {
    const key = randomUUID();
    const body = { ...sampleBody(userGroupType, uniqueCode()), registry: { a: 1, b: [1, 2] } };
    const reversed = { registry: { b: [1, 2], a: 1 }, ...Object.fromEntries(Object.entries(body).reverse()) };
    const first = await t.call({ method: 'POST', url: base, headers: keyed(key), payload: JSON.stringify(body) });
    const again = await t.call({ method: 'POST', url: base, headers: keyed(key), payload: JSON.stringify(reversed) });
    expect([first.statusCode, again.statusCode]).toEqual([201, 201]);
    expect(again.json<Body>().id).toBe(first.json<Body>().id);
  });

  it('of a PUT, PATCH or DELETE by code, retried by id (and back), answers as the first time', async () => {
    const created = (await t.call({ method: 'POST', url: base, payload: sampleBody(userGroupType, uniqueCode()) })).json<Body>();
    const put = { ...sampleBody(userGroupType, created.code), name: 'replaced' };
    const [k1, k2, k3] = [randomUUID(), randomUUID(), randomUUID()];
    const r1 = await t.call({ method: 'PUT', url: `${base}/${created.code}`, headers: keyed(k1), payload: put });
    const r1again = await t.call({ method: 'PUT', url: `${base}/${created.id}`, headers: keyed(k1), payload: put });
    expect([r1.statusCode, r1again.statusCode]).toEqual([200, 200]);
    expect(r1again.json<Body>().auditInfo.version).toBe(1);
    const p = await t.call({ method: 'PATCH', url: `${base}/${created.id}`, headers: keyed(k2), payload: { name: 'patched' } });
    const pAgain = await t.call({ method: 'PATCH', url: `${base}/${created.code}`, headers: keyed(k2), payload: { name: 'patched' } });
    expect([p.statusCode, pAgain.statusCode]).toEqual([200, 200]);
    expect(pAgain.json<Body>().auditInfo.version).toBe(2);
    const d = await t.call({ method: 'DELETE', url: `${base}/${created.code}`, headers: keyed(k3) });
    const dById = await t.call({ method: 'DELETE', url: `${base}/${created.id}`, headers: keyed(k3) });
    const dByCode = await t.call({ method: 'DELETE', url: `${base}/${created.code}`, headers: keyed(k3) });
    expect([d.statusCode, dById.statusCode, dByCode.statusCode]).toEqual([204, 204, 204]);
    expect((await t.call({ method: 'GET', url: `${base}/${created.id}/history` })).json<unknown[]>()).toHaveLength(4);
  });

  it('of a change by a code the record has since given up still answers the first result', async () => {
    const created = (await t.call({ method: 'POST', url: base, payload: sampleBody(userGroupType, uniqueCode()) })).json<Body>();
    const key = randomUUID();
    const newCode = uniqueCode();
    const first = await t.call({ method: 'PATCH', url: `${base}/${created.code}`, headers: keyed(key), payload: { code: newCode } });
    const again = await t.call({ method: 'PATCH', url: `${base}/${created.code}`, headers: keyed(key), payload: { code: newCode } });
    expect([first.statusCode, again.statusCode]).toEqual([200, 200]);
    expect(again.json<Body>()).toMatchObject({ code: newCode, auditInfo: { version: 1 } });
  });
});

describe('client-chosen ids', () => {
  it.each([
    ['the nil UUID', '00000000-0000-0000-0000-000000000000'],
    ['a version 1 UUID', 'c232ab00-9414-11ec-b3c8-9f6bdeced846'],
    ['a version 5 UUID', '74738ff5-5367-5958-9aee-98fffdcd1876'],
  ])('refuse %s with a 400 naming id', async (_name, id) => {
    const res = await t.call({ method: 'POST', url: base, payload: { id, ...sampleBody(userGroupType, uniqueCode()) } });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json<{ errors: string[] }>().errors.join('\n')).toMatch(/^id: /m);
  });

  it('accept a random UUID', async () => {
    const id = randomUUID();
    const res = await t.call({ method: 'POST', url: base, payload: { id, ...sampleBody(userGroupType, uniqueCode()) } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json<Body>().id).toBe(id);
  });
});
