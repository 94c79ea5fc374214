// The shared operation set, run for every registry descriptor through the whole stack: on the
// embedded stores through inject and over real HTTP, and over real HTTP with the read models and
// blobs on each MongoDB peer (test/support/mongoPeers.ts: FerretDB in every run), the log embedded,
// the stores opened as the service opens them (infra/stores.ts).

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { registries } from '../../modules/registries/domain/index.ts';
import { eachMongoDatabase } from '../support/mongoPeers.ts';
import { limitedIt, type PeerLimits } from '../support/peerLimits.ts';
import { enumField, optionalTextField, sampleBody, uniqueCode } from '../support/samples.ts';
import { manualClock, startTestApp, type TestApp } from '../support/testApp.ts';

const expectErrorBody = (body: unknown, status: string) => {
  expect(body).toMatchObject({ status, message: expect.any(String), traceId: expect.any(String), errors: expect.any(Array) });
  expect(Number.isNaN(Date.parse((body as { timestamp: string }).timestamp))).toBe(false);
};

/** Where the service's read models and blobs live: the embedded stores, or a MongoDB peer's database. */
type ReadModelsAt = { mongodbUrl: () => string; limits: PeerLimits };

describe.each(['inject', 'real HTTP'] as const)('over %s', (transport) => {
  registryContract(transport);
});

eachMongoDatabase('over real HTTP, read models and blobs', 'registries', (peer, url) => {
  registryContract('real HTTP', { mongodbUrl: url, limits: peer.limits });
});

function registryContract(transport: 'inject' | 'real HTTP', readModels?: ReadModelsAt): void {
  const it = limitedIt(readModels?.limits);
  let t: TestApp;
  const clock = manualClock();
  beforeAll(async () => {
    t = await startTestApp({ clock, ...(readModels === undefined ? {} : { readModelsOn: readModels.mongodbUrl() }) });
    if (transport === 'real HTTP') await t.listen();
  });
  afterAll(async () => {
    await t.close();
  });

  describe.each(registries.map((def) => [def.path, def] as const))('%s', (path, def) => {
    const base = `/api/v1/${path}`;
    const text = optionalTextField(def);
    const create = async (code = uniqueCode(), extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) => {
      const res = await t.call({ method: 'POST', url: base, payload: { ...sampleBody(def, code), ...extra }, headers });
      expect(res.statusCode, res.body).toBe(201);
      return { res, record: res.json<{ id: string; code: string; name: string; auditInfo: { version: number } }>() };
    };

    it('creates a record with derived auditInfo, Location, ETag and event position', async () => {
      const code = uniqueCode();
      const { res, record } = await create(code, {}, { 'x-request-id': 'req-1', 'x-correlation-id': 'corr-1' });
      expect(record).toMatchObject({ code, auditInfo: { version: 0, whoInserted: 'alice-admin', whoEdited: 'alice-admin' } });
      expect(res.headers.location).toBe(`${base}/${record.id}`);
      expect(res.headers.etag).toBe('"0"');
      expect(res.headers['x-event-position']).toMatch(/^\d+$/);
      expect(res.headers['x-request-id']).toBe('req-1');
      expect(res.headers['x-correlation-id']).toBe('corr-1');
    });

    it('accepts a client id and reads by id, by code and through by-code', async () => {
      const id = randomUUID();
      const code = uniqueCode();
      await create(code, { id });
      for (const url of [`${base}/${id}`, `${base}/${code}`, `${base}/by-code/${code}`]) {
        const res = await t.call({ method: 'GET', url, as: 'viewer' });
        expect(res.statusCode, url).toBe(200);
        expect(res.json()).toMatchObject({ id, code });
        expect(res.headers.etag).toBe('"0"');
      }
      expect((await t.call({ method: 'GET', url: `${base}/by-code/${id}` })).statusCode).toBe(404);
    });

    it('lists, searches, pages, counts and autocompletes from the read model', async () => {
      const prefix = uniqueCode('S');
      const made = [];
      for (const n of ['B', 'A', 'C']) made.push((await create(`${prefix}_${n}`)).res);
      const minPosition = made.at(-1)?.headers['x-event-position'] as string;

      const all = await t.call({ method: 'GET', url: `${base}?minPosition=${minPosition}`, as: 'viewer' });
      expect(all.statusCode).toBe(200);
      const codes = all.json<{ code: string }[]>().map((r) => r.code);
      expect(codes).toEqual(expect.arrayContaining([`${prefix}_A`, `${prefix}_B`, `${prefix}_C`]));
      expect(codes).toEqual([...codes].sort());

      const filtering = { filter: [{ column: 'code', operator: 'LIKE', value: `${prefix}%` }] };
      const search = await t.call({
        method: 'POST',
        url: `${base}/search?size=2`,
        payload: { ...filtering, sort: [{ column: 'code', order: 'DESC' }] },
      });
      expect(search.json<{ code: string }[]>().map((r) => r.code)).toEqual([`${prefix}_C`, `${prefix}_B`]);

      const page = await t.call({ method: 'POST', url: `${base}/search/page`, payload: { ...filtering, page: 1, size: 2 } });
      expect(page.json()).toMatchObject({
        totalElements: 3,
        totalPages: 2,
        number: 1,
        size: 2,
        numberOfElements: 1,
        first: false,
        last: true,
        empty: false,
      });
      expect(page.json<{ content: { code: string }[] }>().content.map((r) => r.code)).toEqual([`${prefix}_C`]);

      const count = await t.call({ method: 'POST', url: `${base}/count`, payload: filtering });
      expect(count.json()).toBe(3);
      const eq = await t.call({
        method: 'POST',
        url: `${base}/count`,
        payload: { filter: [{ key: 'code', operator: 'EQ', value: `${prefix}_A` }] },
      });
      expect(eq.json()).toBe(1);

      const ac = await t.call({ method: 'GET', url: `${base}/autocomplete?search=${prefix.toLowerCase()}&size=5` });
      expect(ac.statusCode, ac.body).toBe(200);
      expect(ac.json<string[]>().slice(0, 3)).toEqual([`${prefix}_A`, `${prefix}_B`, `${prefix}_C`]);
    });

    it('gets by ids, leaving out missing ones, and refuses malformed ids', async () => {
      const a = (await create()).record;
      const b = (await create()).record;
      const res = await t.call({ method: 'POST', url: `${base}/by-ids`, payload: [a.id, randomUUID(), b.id] });
      expect(
        res
          .json<{ id: string }[]>()
          .map((r) => r.id)
          .sort(),
      ).toEqual([a.id, b.id].sort());
      const bad = await t.call({ method: 'POST', url: `${base}/by-ids`, payload: [a.id, 'not-a-uuid'] });
      expect(bad.statusCode).toBe(400);
      expectErrorBody(bad.json(), 'BAD_REQUEST');
      expect(bad.json<{ message: string }>().message).toMatch(/wrong uuid format/i);
      expect(bad.json<{ errors: string[] }>().errors).toEqual(['[1]: expected type uuid']);
    });

    it('replaces and patches with If-Match, keeping every version in history', async () => {
      const { record } = await create();
      const stale = await t.call({
        method: 'PUT',
        url: `${base}/${record.id}`,
        headers: { 'if-match': '"7"' },
        payload: sampleBody(def, record.code),
      });
      expect(stale.statusCode).toBe(412);
      expectErrorBody(stale.json(), 'PRECONDITION_FAILED');

      const renamed = { ...record, name: 'Replaced name' };
      // Access rules are an admin's to write; every other registry an editor's too.
      const writer = def.path === 'access-rules' ? 'admin' : 'editor';
      if (writer === 'admin')
        expect((await t.call({ method: 'PUT', url: `${base}/${record.id}`, payload: renamed, as: 'editor' })).statusCode).toBe(403);
      const put = await t.call({
        method: 'PUT',
        url: `${base}/${record.id}`,
        headers: { 'if-match': '"0"' },
        payload: renamed,
        as: writer,
      });
      expect(put.statusCode, put.body).toBe(200);
      expect(put.json()).toMatchObject({
        name: 'Replaced name',
        auditInfo: { version: 1, whoEdited: writer === 'admin' ? 'alice-admin' : 'eddie-editor', whoInserted: 'alice-admin' },
      });
      expect(put.headers.etag).toBe('"1"');

      const patch = await t.call({
        method: 'PATCH',
        url: `${base}/${record.code}?immediatelyRefresh=true`,
        headers: { 'content-type': 'application/merge-patch+json', 'x-correlation-id': 'corr-patch' },
        payload: JSON.stringify({ name: 'Patched name', [text]: 'described' }),
      });
      expect(patch.statusCode, patch.body).toBe(200);
      expect(patch.json()).toMatchObject({ name: 'Patched name', [text]: 'described', auditInfo: { version: 2 } });

      const unset = await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { [text]: null } });
      expect(unset.json()).not.toHaveProperty(text);
      const noop = await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { name: 'Patched name' } });
      expect(noop.json()).toMatchObject({ auditInfo: { version: 3 } });

      // immediatelyRefresh: the search already sees the patch
      const seen = await t.call({
        method: 'POST',
        url: `${base}/search`,
        payload: {
          filter: [
            { column: 'id', operator: 'EQ', value: record.id },
            { column: 'name', operator: 'EQ', value: 'Patched name' },
          ],
        },
      });
      expect(seen.json()).toHaveLength(1);

      const history = await t.call({ method: 'GET', url: `${base}/${record.id}/history`, as: 'viewer' });
      const entries = history.json<{ version: number; type: string; actor: string; correlationId: string; changes: unknown[] }[]>();
      expect(entries.map((e) => [e.version, e.type, e.actor])).toEqual([
        [0, `${def.name}Created`, 'alice-admin'],
        [1, `${def.name}Replaced`, writer === 'admin' ? 'alice-admin' : 'eddie-editor'],
        [2, `${def.name}Patched`, 'alice-admin'],
        [3, `${def.name}Patched`, 'alice-admin'],
      ]);
      expect(entries[2]).toMatchObject({
        correlationId: 'corr-patch',
        changes: expect.arrayContaining([{ op: 'replace', path: '/name', value: 'Patched name' }]),
      });

      const v0 = await t.call({ method: 'GET', url: `${base}/${record.id}/versions/0` });
      expect(v0.json()).toMatchObject({ name: record.name, auditInfo: { version: 0 } });
      expect((await t.call({ method: 'GET', url: `${base}/${record.id}/versions/9` })).statusCode).toBe(404);
    });

    it('refuses read-only fields in a patch and validates the merged record', async () => {
      const { record } = await create();
      const ro = await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { auditInfo: { version: 9 } } });
      expect(ro.statusCode).toBe(400);
      expect(ro.json<{ errors: string[] }>().errors).toEqual(['auditInfo: read-only']);
      const required = await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { code: null } });
      expect(required.statusCode).toBe(400);
      expect(required.json<{ errors: string[] }>().errors.join()).toMatch(/^code: /);
    });

    it('deletes: the record is gone, its history stays, its code is free again', async () => {
      const { record } = await create();
      const del = await t.call({ method: 'DELETE', url: `${base}/${record.code}` });
      expect(del.statusCode).toBe(204);
      for (const url of [`${base}/${record.id}`, `${base}/${record.code}`]) {
        const res = await t.call({ method: 'GET', url });
        expect(res.statusCode).toBe(404);
        expectErrorBody(res.json(), 'NOT_FOUND');
      }
      expect((await t.call({ method: 'DELETE', url: `${base}/${record.id}` })).statusCode).toBe(404);
      const history = await t.call({ method: 'GET', url: `${base}/${record.id}/history` });
      expect(history.json<unknown[]>()).toHaveLength(2);
      await create(record.code);
    });

    it('moves the code reservation when the code changes', async () => {
      const { record } = await create();
      const newCode = uniqueCode();
      const res = await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { code: newCode } });
      expect(res.statusCode).toBe(200);
      await create(record.code);
      const taken = await t.call({ method: 'POST', url: base, payload: sampleBody(def, newCode) });
      expect(taken.statusCode).toBe(409);
      expectErrorBody(taken.json(), 'CONFLICT');
    });

    it('refuses a code shaped like a UUID (400), so no record created with that id takes the code over', async () => {
      const shaped = randomUUID();
      for (const code of [shaped, shaped.toUpperCase()]) {
        const made = await t.call({ method: 'POST', url: base, payload: sampleBody(def, code) });
        expect(made.statusCode, made.body).toBe(400);
        expect(made.json<{ errors: string[] }>().errors).toEqual([
          `code: ${JSON.stringify(code)} never has the form of a UUID (a UUID in a path names a record by its id)`,
        ]);
      }
      const { record } = await create();
      expect((await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { code: shaped } })).statusCode).toBe(400);
      expect((await t.call({ method: 'PUT', url: `${base}/${record.id}`, payload: sampleBody(def, shaped) })).statusCode).toBe(400);
      // The record whose id it is stays the only one that path names; the other keeps its code.
      const { record: other } = await create(uniqueCode(), { id: shaped });
      expect((await t.call({ method: 'GET', url: `${base}/${shaped}` })).json()).toMatchObject({ id: shaped, code: other.code });
      expect((await t.call({ method: 'GET', url: `${base}/${record.code}` })).json()).toMatchObject({ id: record.id });
    });

    it('shows a record as of a time', async () => {
      const { record } = await create();
      const before = clock.now().toISOString();
      clock.advance(1000);
      await t.call({ method: 'PATCH', url: `${base}/${record.id}`, payload: { name: 'Later name' } });
      const asOf = await t.call({ method: 'GET', url: `${base}/${record.id}?asOf=${encodeURIComponent(before)}` });
      expect(asOf.json()).toMatchObject({ name: record.name, auditInfo: { version: 0 } });
      const past = await t.call({ method: 'GET', url: `${base}/${record.id}?asOf=2000-01-01T00:00:00Z` });
      expect(past.statusCode).toBe(404);
    });

    it('answers a retried create with the same Idempotency-Key once, and refuses the key for another body', async () => {
      const key = randomUUID();
      const body = sampleBody(def, uniqueCode());
      const first = await t.call({ method: 'POST', url: base, payload: body, headers: { 'idempotency-key': key } });
      const again = await t.call({ method: 'POST', url: base, payload: body, headers: { 'idempotency-key': key } });
      expect(first.statusCode).toBe(201);
      expect(again.statusCode).toBe(201);
      expect(again.json()).toEqual(first.json());
      expect(again.headers['x-event-position']).toBe(first.headers['x-event-position']);
      const other = await t.call({
        method: 'POST',
        url: base,
        payload: sampleBody(def, uniqueCode()),
        headers: { 'idempotency-key': key },
      });
      expect(other.statusCode).toBe(409);
      const history = await t.call({ method: 'GET', url: `${base}/${first.json<{ id: string }>().id}/history` });
      expect(history.json<unknown[]>()).toHaveLength(1);
    });

    describe('bad input answers 4xx with the error body', () => {
      const cases: [string, () => Promise<{ statusCode: number; json: () => unknown }>, number, string][] = [
        [
          'unknown field',
          () => t.call({ method: 'POST', url: base, payload: { ...sampleBody(def, uniqueCode()), bogus: 1 } }),
          400,
          'BAD_REQUEST',
        ],
        [
          'wrong type',
          () => t.call({ method: 'POST', url: base, payload: { ...sampleBody(def, uniqueCode()), name: 42 } }),
          400,
          'BAD_REQUEST',
        ],
        ['over-long code', () => t.call({ method: 'POST', url: base, payload: sampleBody(def, 'X'.repeat(256)) }), 400, 'BAD_REQUEST'],
        ['code with a space', () => t.call({ method: 'POST', url: base, payload: sampleBody(def, 'A B') }), 400, 'BAD_REQUEST'],
        [
          'malformed id',
          () => t.call({ method: 'POST', url: base, payload: { ...sampleBody(def, uniqueCode()), id: 'nope' } }),
          400,
          'BAD_REQUEST',
        ],
        [
          'malformed JSON',
          () => t.call({ method: 'POST', url: base, headers: { 'content-type': 'application/json' }, payload: '{"code":' }),
          400,
          'BAD_REQUEST',
        ],
        [
          'wrong content type',
          () => t.call({ method: 'POST', url: base, headers: { 'content-type': 'text/plain' }, payload: 'x' }),
          415,
          'UNSUPPORTED_MEDIA_TYPE',
        ],
        [
          'unknown filter column',
          () => t.call({ method: 'POST', url: `${base}/count`, payload: { filter: [{ column: 'nope', value: 'x' }] } }),
          400,
          'BAD_REQUEST',
        ],
        [
          'unknown filter operator',
          () =>
            t.call({
              method: 'POST',
              url: `${base}/search`,
              payload: { filter: [{ column: 'code', operator: 'SOUNDS_LIKE', value: 'x' }] },
            }),
          400,
          'BAD_REQUEST',
        ],
        [
          'filter value of the wrong type',
          () =>
            t.call({
              method: 'POST',
              url: `${base}/search/page`,
              payload: { filter: [{ column: 'auditInfo.version', operator: 'GT', value: 'ten' }] },
            }),
          400,
          'BAD_REQUEST',
        ],
        [
          'page size over the limit',
          () => t.call({ method: 'POST', url: `${base}/search/page`, payload: { size: 5000 } }),
          400,
          'BAD_REQUEST',
        ],
        [
          'unpaged size over the limit',
          () => t.call({ method: 'POST', url: `${base}/search?size=10001`, payload: {} }),
          400,
          'BAD_REQUEST',
        ],
        ['missing token', () => t.call({ method: 'GET', url: base, as: null }), 401, 'UNAUTHORIZED'],
        [
          'forged token',
          () =>
            t.call({ method: 'GET', url: base, as: null, headers: { authorization: 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.AAAA' } }),
          401,
          'UNAUTHORIZED',
        ],
        [
          'viewer writing',
          () => t.call({ method: 'POST', url: base, as: 'viewer', payload: sampleBody(def, uniqueCode()) }),
          403,
          'FORBIDDEN',
        ],
        ['token without roles', () => t.call({ method: 'GET', url: base, as: 'nobody' }), 403, 'FORBIDDEN'],
        ['unknown record', () => t.call({ method: 'GET', url: `${base}/${randomUUID()}` }), 404, 'NOT_FOUND'],
        [
          'stale If-Match on delete',
          async () => {
            const { record } = await create();
            return t.call({ method: 'DELETE', url: `${base}/${record.id}`, headers: { 'if-match': '"3"' } });
          },
          412,
          'PRECONDITION_FAILED',
        ],
      ];
      const enumeration = enumField(def);
      if (enumeration) {
        cases.push([
          'bad enumeration',
          () => t.call({ method: 'POST', url: base, payload: { ...sampleBody(def, uniqueCode()), [enumeration.key]: 'NOT_A_VALUE' } }),
          400,
          'BAD_REQUEST',
        ]);
      }
      it.each(cases)('%s', async (_name, send, status, statusName) => {
        const res = await send();
        expect(res.statusCode).toBe(status);
        expectErrorBody(res.json(), statusName);
      });
    });
  });
}
