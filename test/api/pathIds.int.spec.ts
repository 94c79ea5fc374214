// The same id rules on every path: a parameter right after a resource's path names one of its
// records; a resource with codes takes the record's uuid or its code there, one without codes its
// uuid (anything else is 400 REQUEST.MALFORMED_UUID). Swept over every operation without a body of
// the served document, so a route added later is held to it too. The one exception is the seed's:
// the thumbnail upload names the user by `id (uuid, required)`, which its body repeats.
// Read models are named by their name (`user_groups`) or their resource's path (`user-groups`).

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allResources } from '../support/runtime.ts';
import type { ErrorBody } from '../../api/errorHandler.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

type Schema = { type?: string; enum?: string[]; format?: string };
type Parameter = { name: string; in: string; required?: boolean; schema: Schema };
type Operation = { parameters?: Parameter[]; requestBody?: unknown };

let t: TestApp;
let paths: Record<string, Record<string, Operation>>;
beforeAll(async () => {
  t = await startTestApp();
  paths = (await t.call({ method: 'GET', url: '/openapi.json', as: null })).json<{ paths: typeof paths }>().paths;
});
afterAll(async () => {
  await t.close();
});

/** A value the schema takes, for the parameters not under test. */
const valid = (p: Parameter): string =>
  p.schema.enum?.[0] ??
  (p.name === 'version' ? '1' : p.schema.format === 'date-time' ? '2026-01-01T00:00:00.000Z' : p.in === 'path' ? randomUUID() : 'x');

describe('a path parameter naming a record', () => {
  it('takes a code where the resource has codes (404 for none), and only a uuid where it has none (400)', async () => {
    const checked: string[] = [];
    for (const [path, item] of Object.entries(paths).filter(([p]) => p.startsWith('/api/v1/'))) {
      const segments = path.split('/');
      for (const [method, op] of Object.entries(item)) {
        if (op.requestBody !== undefined) continue;
        const parameters = op.parameters ?? [];
        for (const tested of parameters.filter((p) => p.in === 'path')) {
          const at = segments[segments.indexOf(`{${tested.name}}`) - 1];
          const def = allResources.find((r) => r.path === at);
          if (def === undefined) continue;
          const code = `no-such-${randomUUID().slice(0, 8)}`;
          const url = path.replace(/\{(\w+)\}/g, (_, name: string) =>
            name === tested.name ? code : valid(parameters.find((p) => p.name === name) ?? tested),
          );
          const query = parameters
            .filter((p) => p.in === 'query' && p.required === true)
            .map((p) => `${p.name}=${encodeURIComponent(valid(p))}`);
          const res = await t.call({ method: method.toUpperCase() as 'GET', url: query.length === 0 ? url : `${url}?${query.join('&')}` });
          const answer = `${method.toUpperCase()} ${path} (${tested.name}=${code}): ${String(res.statusCode)} ${res.body}`;
          if (def.hasCode) expect(res.statusCode, answer).toBe(404);
          else {
            expect(res.statusCode, answer).toBe(400);
            expect(res.json<ErrorBody>().code, answer).toBe('REQUEST.MALFORMED_UUID');
          }
          checked.push(`${method.toUpperCase()} ${path} ${tested.name}`);
        }
      }
    }
    expect(checked).toEqual(
      expect.arrayContaining([
        'GET /api/v1/users/{userId}/groups userId',
        'GET /api/v1/users/{userId}/roles userId',
        'GET /api/v1/users/{id}/thumbnail id',
        'GET /api/v1/user-group-regions/{idOrCode} idOrCode',
      ]),
    );
    expect(checked.length).toBeGreaterThan(60);
  });
});

describe('a user named by its code', () => {
  const REGION = '7a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
  const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('rest of a png')]);
  let ada: { id: string; code: string };
  beforeAll(async () => {
    const setup = [
      ['/api/v1/user-group-types', { code: 'PATH-TEAM', name: 'Team', registry: {} }],
      ['/api/v1/user-types', { code: 'PATH-PERSON', name: 'Person', type: 'INDIVIDUAL' }],
      ['/api/v1/user-groups', { code: 'PATH-OPS', name: 'Operations', type: 'PATH-TEAM', chars: {} }],
      ['/api/v1/users', { code: 'ada', givenName: 'Ada', type: 'INDIVIDUAL', chars: {}, groups: ['PATH-OPS'] }],
    ] as const;
    for (const [url, payload] of setup) {
      const res = await t.call({ method: 'POST', url, payload });
      expect(res.statusCode, res.body).toBe(201);
      if (url === '/api/v1/users') ada = res.json();
    }
  });

  it('has its groups at /users/{code}/groups as at /users/{id}/groups', async () => {
    const byCode = await t.call({ method: 'GET', url: '/api/v1/users/ada/groups?minPosition=0' });
    expect(byCode.statusCode, byCode.body).toBe(200);
    expect(byCode.json<{ code: string }[]>().map((g) => g.code)).toEqual(['PATH-OPS']);
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${ada.id}/groups` })).json()).toEqual(byCode.json());
  });

  it('has its thumbnail read by code; the upload names it by uuid, as the seed says (400 for a code)', async () => {
    const put = (idOrCode: string) =>
      t.call({ method: 'PUT', url: `/api/v1/users/${idOrCode}/thumbnail`, payload: { userId: ada.id, photoData: png.toString('base64') } });
    const refused = await put('ada');
    expect(refused.statusCode).toBe(400);
    expect(refused.json<ErrorBody>().code).toBe('REQUEST.MALFORMED_UUID');
    expect((await put(ada.id)).statusCode).toBe(204);
    const got = await t.call({ method: 'GET', url: '/api/v1/users/ada/thumbnail' });
    expect(got.statusCode).toBe(200);
    expect(got.rawPayload.equals(png)).toBe(true);
  });

  it("names its group by code in the group's region paths; the region stays a uuid (a value, not a record here)", async () => {
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/user-group-regions',
          payload: {
            userGroupId: (await t.call({ method: 'GET', url: '/api/v1/user-groups/PATH-OPS' })).json<{ id: string }>().id,
            regionId: REGION,
          },
        })
      ).statusCode,
    ).toBe(201);
    expect((await t.call({ method: 'GET', url: `/api/v1/user-groups/PATH-OPS/regions/${REGION}` })).statusCode).toBe(200);
    const region = await t.call({ method: 'GET', url: '/api/v1/user-groups/PATH-OPS/regions/north' });
    expect(region.statusCode).toBe(400);
    expect(region.json<ErrorBody>().code).toBe('REQUEST.MALFORMED_UUID');
  });
});

describe('a read model in /indexes/{indexName}', () => {
  it("is named by its name or by its resource's path", async () => {
    const names = (await t.call({ method: 'GET', url: '/api/v1/indexes' })).json<{ name: string }[]>().map((m) => m.name);
    expect(names).toContain('user_groups');
    expect(names).not.toContain('user-groups');
    for (const name of ['user_groups', 'user-groups']) {
      const recreated = await t.call({ method: 'POST', url: `/api/v1/indexes/${name}/recreate` });
      expect(recreated.statusCode, recreated.body).toBe(202);
      // Its job runs after the answer: a refresh meanwhile is 409 READ_MODEL.REBUILDING.
      await t.service.readModelJobs.idle();
      const refreshed = await t.call({ method: 'POST', url: `/api/v1/indexes/${name}/refresh`, payload: { filter: [] } });
      expect(refreshed.statusCode, refreshed.body).toBe(202);
      await t.service.readModelJobs.idle();
    }
    expect((await t.call({ method: 'DELETE', url: '/api/v1/indexes/user-group-types' })).statusCode).toBe(204);
    const unknown = await t.call({ method: 'DELETE', url: '/api/v1/indexes/no-such-index' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.json<ErrorBody>()).toMatchObject({ code: 'READ_MODEL.NOT_FOUND', message: expect.stringContaining('no-such-index') });
  });
});
