// Sharing over HTTP: the shared operation set of a resource without a code, and its three queries.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

type Sharing = {
  id: string;
  ownerType: string;
  ownerId: string;
  refType?: string;
  refId?: string;
  sharingTypeCode?: string;
  auditInfo: { version: number };
};

const share = async (body: Record<string, unknown>) => {
  const res = await t.call({ method: 'POST', url: '/api/v1/sharings', payload: body });
  expect(res.statusCode, res.body).toBe(201);
  return { record: res.json<Sharing>(), at: String(res.headers['x-event-position']) };
};

describe('sharings', () => {
  it('creates, reads, patches and deletes a sharing; it has no code routes', async () => {
    const { record } = await share({ ownerType: 'USER_GROUP', ownerId: 'g-1', refType: 'DOCUMENT', refId: 'd-1', sharingTypeCode: 'READ' });
    expect((await t.call({ method: 'GET', url: `/api/v1/sharings/${record.id}`, as: 'viewer' })).json()).toMatchObject({
      ownerId: 'g-1',
      refId: 'd-1',
    });
    expect((await t.call({ method: 'GET', url: '/api/v1/sharings/not-a-uuid' })).statusCode).toBe(400);
    const patched = await t.call({ method: 'PATCH', url: `/api/v1/sharings/${record.id}`, payload: { description: 'for the audit' } });
    expect(patched.json()).toMatchObject({ description: 'for the audit', auditInfo: { version: 1 } });
    expect((await t.call({ method: 'GET', url: `/api/v1/sharings/${record.id}/history` })).json<unknown[]>()).toHaveLength(2);
    expect((await t.call({ method: 'GET', url: '/api/v1/sharings/by-code/x' })).statusCode).toBe(404);
    expect((await t.call({ method: 'DELETE', url: `/api/v1/sharings/${record.id}` })).statusCode).toBe(204);
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/sharings', payload: { ownerType: 'A', ownerId: '1', refType: 'DOC' } })).json(),
    ).toMatchObject({ status: 'BAD_REQUEST', errors: ['refId: required with refType'] });
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/sharings', payload: { ownerType: 'A', ownerId: '1' }, as: 'viewer' })).statusCode,
    ).toBe(403);
  });

  it('answers by reference, by owner and by references (with and without a sub type)', async () => {
    const owner = `G-${String(Date.now())}`;
    await share({ ownerType: 'USER_GROUP', ownerId: owner, refType: 'DOCUMENT', refId: 'r-1', sharingTypeCode: 'READ' });
    await share({ ownerType: 'USER_GROUP', ownerId: owner, refType: 'DOCUMENT', refId: 'r-2', sharingTypeCode: 'WRITE' });
    await share({ ownerType: 'USER', ownerId: 'u-1', refType: 'DOCUMENT', refId: 'r-1', sharingTypeCode: 'READ' });
    const { at } = await share({ ownerType: 'USER_GROUP', ownerId: `${owner}-other`, isPublic: true });
    const get = async (url: string) => (await t.call({ method: 'GET', url: `${url}&minPosition=${at}`, as: 'viewer' })).json<Sharing[]>();
    expect((await get(`/api/v1/sharings/by-ref?ownerType=USER_GROUP&refType=DOCUMENT&refId=r-1`)).map((s) => s.ownerId)).toContain(owner);
    expect(
      (await get(`/api/v1/sharings/by-ref?ownerType=USER_GROUP&refType=DOCUMENT&refId=r-1`)).every(
        (s) => s.ownerType === 'USER_GROUP' && s.refId === 'r-1',
      ),
    ).toBe(true);
    expect((await get(`/api/v1/sharings/by-owner?ownerType=USER_GROUP&ownerId=${owner}`)).map((s) => s.refId)).toEqual(['r-1', 'r-2']);
    const byRefs = async (body: Record<string, unknown>) =>
      (await t.call({ method: 'POST', url: `/api/v1/sharings/by-refs?minPosition=${at}`, payload: body, as: 'viewer' })).json<Sharing[]>();
    const all = await byRefs({ ownerType: 'USER_GROUP', refIds: ['r-1', 'r-2'] });
    expect(all.filter((s) => s.ownerId === owner).map((s) => s.sharingTypeCode)).toEqual(['READ', 'WRITE']);
    const writes = await byRefs({ ownerType: 'USER_GROUP', subType: 'WRITE', refIds: ['r-1', 'r-2'] });
    expect(writes.filter((s) => s.ownerId === owner).map((s) => s.refId)).toEqual(['r-2']);
    expect((await t.call({ method: 'POST', url: '/api/v1/sharings/by-refs', payload: { ownerType: 'X', refIds: [] } })).statusCode).toBe(
      400,
    );
    expect((await t.call({ method: 'GET', url: '/api/v1/sharings/by-owner?ownerType=X' })).statusCode).toBe(400);
  });
});
