// The shared operation set of API.md for the resources beyond the registries (users, user groups,
// user group regions, sharings), from their declarations alone: what the registry contract checks,
// for records with or without a code, with their references made first.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userGroup } from '../../modules/identity/domain/userGroup.ts';
import { user } from '../../modules/identity/domain/user.ts';
import { userGroupRegion } from '../../modules/identity/domain/userGroupRegion.ts';
import { sharing } from '../../modules/sharing/domain/sharing.ts';
import { makeSampleReferences, optionalTextField, sampleBody, uniqueCode, type SampleReferences } from '../support/samples.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
let refs: SampleReferences;
beforeAll(async () => {
  t = await startTestApp();
  refs = await makeSampleReferences((o) => t.call(o));
});
afterAll(async () => {
  await t.close();
});

type Rec = { id: string; code?: string; auditInfo: { version: number } };
type ErrorBody = { status: string; message: string; errors: string[]; traceId: string; timestamp: string };
const errorBody = (body: unknown) => {
  expect(body).toMatchObject({
    status: expect.any(String),
    message: expect.any(String),
    errors: expect.any(Array),
    traceId: expect.any(String),
  });
};

describe.each([userGroup, user, userGroupRegion, sharing].map((def) => [def.path, def] as const))('%s', (path, def) => {
  const base = `/api/v1/${path}`;
  const offers = (op: string) => def.operations.has(op as never);
  const create = async () => {
    const res = await t.call({ method: 'POST', url: base, payload: sampleBody(def, uniqueCode(), refs) });
    expect(res.statusCode, res.body).toBe(201);
    return { record: res.json<Rec>(), res };
  };

  it('creates with Location, ETag and X-Event-Position; reads by id (and code) as written', async () => {
    const { record, res } = await create();
    expect(res.headers.location).toBe(`${base}/${record.id}`);
    expect(res.headers.etag).toBe('"0"');
    expect(String(res.headers['x-event-position'])).toMatch(/^\d+$/);
    const urls = [
      `${base}/${record.id}`,
      ...(def.hasCode && record.code !== undefined ? [`${base}/${record.code}`, `${base}/by-code/${record.code}`] : []),
    ];
    for (const url of urls) {
      const got = await t.call({ method: 'GET', url, as: 'viewer' });
      expect(got.statusCode, url).toBe(200);
      expect(got.json<Rec>()).toMatchObject({ id: record.id, auditInfo: { version: 0 } });
      expect(got.headers.etag).toBe('"0"');
    }
    if (!def.hasCode) {
      const bad = await t.call({ method: 'GET', url: `${base}/not-a-uuid` });
      expect(bad.statusCode).toBe(400);
      errorBody(bad.json());
    }
  });

  it('changes with If-Match (412 when stale), keeping every version in history and at its version', async () => {
    const { record } = await create();
    let version = 0;
    if (offers('replace')) {
      const body = { ...sampleBody(def, record.code ?? uniqueCode(), refs), ...(def.hasCode ? { code: record.code } : {}) };
      const stale = await t.call({ method: 'PUT', url: `${base}/${record.id}`, headers: { 'if-match': '"7"' }, payload: body });
      expect(stale.statusCode).toBe(412);
      errorBody(stale.json());
      const text = 'description' in def.fields.shape ? 'description' : optionalTextField(def);
      const put = await t.call({
        method: 'PUT',
        url: `${base}/${record.id}`,
        headers: { 'if-match': '"0"' },
        payload: { ...body, [text]: 'replaced' },
      });
      expect(put.statusCode, put.body).toBe(200);
      expect(String(put.headers['x-event-position'])).toMatch(/^\d+$/);
      version += 1;
      const patch = await t.call({
        method: 'PATCH',
        url: `${base}/${record.id}`,
        headers: { 'if-match': `"${String(version)}"` },
        payload: { [text]: 'patched' },
      });
      expect(patch.json()).toMatchObject({ [text]: 'patched', auditInfo: { version: 2 } });
      version += 1;
      const was = await t.call({ method: 'GET', url: `${base}/${record.id}/versions/1` });
      expect(was.json()).toMatchObject({ [text]: 'replaced', auditInfo: { version: 1 } });
    }
    const history = await t.call({ method: 'GET', url: `${base}/${record.id}/history`, as: 'viewer' });
    expect(history.json<{ version: number; type: string }[]>().map((e) => e.version)).toEqual(
      Array.from({ length: version + 1 }, (_, i) => i),
    );
    expect(history.json<{ type: string }[]>()[0]?.type).toBe(`${def.name}Created`);
  });

  it.runIf(def.hasCode)('refuses a code shaped like a UUID (400), on create and on a change', async () => {
    const shaped = randomUUID();
    const made = await t.call({ method: 'POST', url: base, payload: sampleBody(def, shaped, refs) });
    expect(made.statusCode, made.body).toBe(400);
    expect(made.json<ErrorBody>().errors).toEqual([
      `code: ${JSON.stringify(shaped)} never has the form of a UUID (a UUID in a path names a record by its id)`,
    ]);
    const { record } = await create();
    expect((await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { code: shaped.toUpperCase() } })).statusCode).toBe(400);
  });

  it('is found by search, paged search, count, list and by ids once minPosition is reached', async () => {
    const { record, res } = await create();
    const at = String(res.headers['x-event-position']);
    const byId = { filter: [{ column: 'id', operator: 'EQ', value: record.id }] };
    if (offers('search'))
      expect(
        (await t.call({ method: 'POST', url: `${base}/search?minPosition=${at}`, payload: byId, as: 'viewer' }))
          .json<Rec[]>()
          .map((r) => r.id),
      ).toEqual([record.id]);
    if (offers('searchPage'))
      expect((await t.call({ method: 'POST', url: `${base}/search/page?minPosition=${at}`, payload: byId })).json()).toMatchObject({
        totalElements: 1,
      });
    expect((await t.call({ method: 'POST', url: `${base}/count?minPosition=${at}`, payload: byId })).json()).toBe(1);
    expect((await t.call({ method: 'GET', url: `${base}?minPosition=${at}` })).json<Rec[]>().some((r) => r.id === record.id)).toBe(true);
    if (offers('byIds')) {
      const found = await t.call({ method: 'POST', url: `${base}/by-ids`, payload: [record.id, '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5'] });
      expect(found.json<Rec[]>().map((r) => r.id)).toEqual([record.id]);
    }
  });

  it("deletes (then 404, history still readable); refuses unknown fields, malformed JSON and viewers' writes", async () => {
    const { record } = await create();
    expect((await t.call({ method: 'DELETE', url: `${base}/${record.id}`, as: 'viewer' })).statusCode).toBe(403);
    const del = await t.call({ method: 'DELETE', url: `${base}/${record.id}` });
    expect(del.statusCode).toBe(204);
    expect(String(del.headers['x-event-position'])).toMatch(/^\d+$/);
    const gone = await t.call({ method: 'GET', url: `${base}/${record.id}` });
    expect(gone.statusCode).toBe(404);
    errorBody(gone.json());
    expect((await t.call({ method: 'GET', url: `${base}/${record.id}/history` })).json<unknown[]>().at(-1)).toMatchObject({
      type: `${def.name}Deleted`,
    });
    const unknown = await t.call({ method: 'POST', url: base, payload: { ...sampleBody(def, uniqueCode(), refs), surprise: 1 } });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json<ErrorBody>().errors.join('\n')).toMatch(/surprise/);
    const malformed = await t.call({ method: 'POST', url: base, payload: '{"oops": ' });
    expect(malformed.statusCode).toBe(400);
    errorBody(malformed.json());
    expect((await t.call({ method: 'POST', url: base, payload: sampleBody(def, uniqueCode(), refs), as: 'viewer' })).statusCode).toBe(403);
  });
});
