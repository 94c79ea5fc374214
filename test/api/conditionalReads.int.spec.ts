// Conditional reads (issue 26, part 6), over real HTTP on the embedded stores: a GET of one
// record whose If-None-Match holds its current ETag answers 304 with no body and the ETag; weak
// comparison (W/"3" matches "3"), lists and `*` as RFC 9110 §13.1.2 says; a changed record, an
// expanded answer (other records as they are now) and a record the caller may not read are never 304.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../api/auth.ts';
import { startIdentityApp, TEST_SECRET, type TestApp, type TestResponse } from '../support/testApp.ts';

let t: TestApp;
type Rec = { id: string; code: string; auditInfo: { version: number } };

beforeAll(async () => {
  t = await startIdentityApp();
  await t.listen();
});
afterAll(async () => {
  await t.close();
});

const get = (url: string, ifNoneMatch?: string, as: 'admin' | 'viewer' | null = 'admin'): Promise<TestResponse> =>
  t.call({ method: 'GET', url, as, ...(ifNoneMatch === undefined ? {} : { headers: { 'if-none-match': ifNoneMatch } }) });

async function created(url: string, payload: Record<string, unknown>): Promise<Rec> {
  const res = await t.call({ method: 'POST', url, payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

const expectNotModified = (res: TestResponse, etag: string): void => {
  expect(res.statusCode, res.body).toBe(304);
  expect(res.body).toBe('');
  expect(res.headers.etag).toBe(etag);
};

describe('a GET of one record with If-None-Match', () => {
  it('answers 304 with no body and the ETag while the record is at that version, 200 once it moves on', async () => {
    const kind = await created('/api/v1/log-types', { code: 'COND_LOG', name: 'Conditional' });
    const first = await get(`/api/v1/log-types/${kind.id}`);
    expect(first.statusCode).toBe(200);
    expect(first.headers.etag).toBe('"0"');
    expectNotModified(await get(`/api/v1/log-types/${kind.id}`, '"0"'), '"0"');
    expectNotModified(await get('/api/v1/log-types/COND_LOG', '"0"'), '"0"');
    expect((await t.call({ method: 'PATCH', url: '/api/v1/log-types/COND_LOG', payload: { name: 'Changed' } })).statusCode).toBe(200);
    const moved = await get('/api/v1/log-types/COND_LOG', '"0"');
    expect(moved.statusCode).toBe(200);
    expect(moved.headers.etag).toBe('"1"');
    expect(moved.json<{ name: string }>().name).toBe('Changed');
  });

  it('compares weakly, takes a list and `*`, and ignores a header with no entity tag', async () => {
    const type = await created('/api/v1/user-group-types', { code: 'COND_TYPE', name: 'T', registry: {} });
    const url = `/api/v1/user-group-types/${type.id}`;
    expectNotModified(await get(url, 'W/"0"'), '"0"');
    expectNotModified(await get(url, '"7", W/"0"'), '"0"');
    expectNotModified(await get(url, '"7",W/"0" , "8"'), '"0"');
    expectNotModified(await get(url, '*'), '"0"');
    for (const other of ['"1"', '"00"', 'W/"10"', '0', 'abc', '""']) {
      const res = await get(url, other);
      expect(res.statusCode, other).toBe(200);
      expect(res.json<Rec>().code).toBe('COND_TYPE');
    }
    // `*` matches a current representation only: a missing record is still 404.
    expect((await get('/api/v1/user-group-types/NO_SUCH_TYPE', '*')).statusCode).toBe(404);
  });

  it('by code, at one version and as of a time: 304 for the version the answer would carry', async () => {
    const type = await created('/api/v1/user-types', { code: 'COND_UT', name: 'Before', type: 'INDIVIDUAL' });
    const at = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect((await t.call({ method: 'PATCH', url: '/api/v1/user-types/COND_UT', payload: { name: 'After' } })).statusCode).toBe(200);
    expectNotModified(await get('/api/v1/user-types/by-code/COND_UT', '"1"'), '"1"');
    expect((await get('/api/v1/user-types/by-code/COND_UT', '"0"')).statusCode).toBe(200);
    expectNotModified(await get(`/api/v1/user-types/${type.id}/versions/0`, '"0"'), '"0"');
    expect((await get(`/api/v1/user-types/${type.id}/versions/0`, '"1"')).json<{ name: string }>().name).toBe('Before');
    expectNotModified(await get(`/api/v1/user-types/${type.id}?asOf=${encodeURIComponent(at)}`, '"0"'), '"0"');
    const asOf = await get(`/api/v1/user-types/${type.id}?asOf=${encodeURIComponent(at)}`, '"1"');
    expect(asOf.statusCode).toBe(200);
    expect(asOf.headers.etag).toBe('"0"');
  });

  it('a user: 304 for the record alone; an answer that embeds other records as they are now is always sent whole', async () => {
    const u = await created('/api/v1/users', { code: 'cond-user', type: 'INDIVIDUAL', givenName: 'C', chars: {} });
    expectNotModified(await get(`/api/v1/users/${u.id}`, '"0"'), '"0"');
    // Expanded: its groups' roles and regions are read as they are now, which the user's version does not name.
    const expanded = await get(`/api/v1/users/${u.id}?expand=ROLES`, '"0"');
    expect(expanded.statusCode).toBe(200);
    expect(expanded.headers.etag).toBe('"0"');
    expect(expanded.json<{ roles: string[] }>().roles).toEqual([]);
    // A group's region assignment embeds its group as it is now.
    const group = await created('/api/v1/user-groups', { code: 'COND_GROUP', name: 'G', type: 'TEAM', chars: {} });
    const assignment = await created('/api/v1/user-group-regions', {
      userGroupId: group.id,
      regionId: '7a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5',
    });
    const region = await get(`/api/v1/user-group-regions/${assignment.id}`, '"0"');
    expect(region.statusCode, region.body).toBe(200);
    expect(region.headers.etag).toBe('"0"');
  });

  it("a user's thumbnail: its ETag (the image's SHA-256) compared weakly and in a list, as a record's is", async () => {
    const u = await created('/api/v1/users', { code: 'cond-pic', type: 'INDIVIDUAL', givenName: 'P', chars: {} });
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('rest of a png')]);
    const put = await t.call({
      method: 'PUT',
      url: `/api/v1/users/${u.id}/thumbnail`,
      payload: { userId: u.id, photoData: png.toString('base64') },
    });
    expect(put.statusCode, put.body).toBe(204);
    const url = `/api/v1/users/${u.id}/thumbnail`;
    const etag = String((await get(url)).headers.etag);
    expectNotModified(await get(url, etag), etag);
    expectNotModified(await get(url, `W/${etag}`), etag);
    expectNotModified(await get(url, `"0", ${etag}`), etag);
    expect((await get(url, '"0"')).statusCode).toBe(200);
  });

  it('answers 304 to HEAD as to GET', async () => {
    const kind = await created('/api/v1/worklog-types', { code: 'COND_WL', name: 'W' });
    const head = await fetchHead(`/api/v1/worklog-types/${kind.id}`, '"0"');
    expect(head.status).toBe(304);
    expect(head.headers.get('etag')).toBe('"0"');
  });

  it('checks the caller first: no token 401, a record its access rules do not cover 404', async () => {
    await created('/api/v1/access-rules', {
      code: 'COND_SOME_TYPES',
      name: 'Reads some log types',
      entityName: 'log-types',
      fullAccess: false,
      expression: JSON.stringify([{ column: 'code', operator: 'EQ', value: 'COND_VISIBLE' }]),
    });
    const hidden = await created('/api/v1/log-types', { code: 'COND_HIDDEN', name: 'H' });
    const visible = await created('/api/v1/log-types', { code: 'COND_VISIBLE', name: 'V' });
    expect((await get(`/api/v1/log-types/${hidden.id}`, '"0"', null)).statusCode).toBe(401);
    const token = await signHs256(TEST_SECRET, { sub: 'narrow', roles: ['COND_SOME_TYPES'] });
    const as = (id: string) =>
      t.call({
        method: 'GET',
        url: `/api/v1/log-types/${id}`,
        as: null,
        headers: { authorization: `Bearer ${token}`, 'if-none-match': '"0"' },
      });
    expect((await as(hidden.id)).statusCode).toBe(404);
    expectNotModified(await as(visible.id), '"0"');
  });

  it('a job and its state: 304 while the job stays at that version; with its steps (expand=JOB_STEPS) always whole', async () => {
    const ack = await t.call({ method: 'POST', url: '/api/v1/indexes/log_types/recreate' });
    expect(ack.statusCode, ack.body).toBe(202);
    await t.service.readModelJobs.idle();
    const jobUrl = `/api/v1/jobs/${ack.json<{ jobId: string }>().jobId}`;
    const state = await get(`${jobUrl}/state`);
    expect(state.json()).toMatchObject({ status: 'COMPLETED' });
    const etag = String(state.headers.etag);
    expectNotModified(await get(`${jobUrl}/state`, etag), etag);
    expectNotModified(await get(jobUrl, etag), etag);
    const withSteps = await get(`${jobUrl}?expand=JOB_STEPS`, etag);
    expect(withSteps.statusCode).toBe(200);
    expect(withSteps.headers.etag).toBe(etag);
  });
});

/** A HEAD over the socket the app listens on (the test client sends GET and writes only). */
async function fetchHead(url: string, ifNoneMatch: string): Promise<Response> {
  const base = t.app.server.address();
  if (base === null || typeof base === 'string') throw new Error('not listening');
  return fetch(`http://127.0.0.1:${String(base.port)}${url}`, {
    method: 'HEAD',
    headers: { authorization: `Bearer ${t.tokens.admin}`, 'if-none-match': ifNoneMatch },
  });
}
