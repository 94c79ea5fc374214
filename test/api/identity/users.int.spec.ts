// Users over HTTP: their rules and references, effective roles and expansions, the queries of
// API.md's Users table, the thumbnail, and group regions joined with their current group.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const ROLE_ID = '3c9e6c1a-1111-4a2b-8c3d-4e5f6a7b8c9d';
const PAST_ROLE_ID = '4c9e6c1a-1111-4a2b-8c3d-4e5f6a7b8c9d';
const REGION = '7a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
let ops: { id: string };
beforeAll(async () => {
  t = await startTestApp();
  const setup = [
    ['/api/v1/user-group-types', { code: 'TEAM', name: 'Team', registry: {} }],
    ['/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' }],
    ['/api/v1/user-types', { code: 'COMPANY', name: 'Company', type: 'ORGANIZATION' }],
    ['/api/v1/user-types', { code: 'OLD-WG', name: 'Expired', type: 'WORK_GROUP', validityTo: '2000-01-01T00:00:00Z' }],
    ['/api/v1/access-rules', { id: ROLE_ID, code: 'OPS_ROLE', name: 'Operations', entityName: 'users', fullAccess: true }],
    ['/api/v1/access-rules', { id: PAST_ROLE_ID, code: 'PAST_ROLE', name: 'Past', entityName: 'users', fullAccess: true }],
  ] as const;
  for (const [url, payload] of setup) expect((await t.call({ method: 'POST', url, payload })).statusCode).toBe(201);
  const g = await t.call({
    method: 'POST',
    url: '/api/v1/user-groups',
    payload: { code: 'OPS', name: 'Operations', type: 'TEAM', chars: {}, associatedUserRoleId: ROLE_ID },
  });
  ops = g.json();
  await t.call({
    method: 'POST',
    url: '/api/v1/user-groups',
    payload: { code: 'PAST', name: 'Past', type: 'TEAM', chars: {}, associatedUserRoleId: PAST_ROLE_ID, validTo: '2001-01-01T00:00:00Z' },
  });
});
afterAll(async () => {
  await t.close();
});

type User = {
  id: string;
  code: string;
  name?: string;
  status: string;
  authentication: string;
  roles?: string[];
  groups?: string[];
  validFrom?: string;
  validTo?: string;
  regions?: { regionId: string; source?: string }[];
};
type ErrorBody = { status: string; code: string; errors: string[]; message: string };

const create = (payload: Record<string, unknown>) =>
  t.call({ method: 'POST', url: '/api/v1/users', payload: { type: 'INDIVIDUAL', chars: {}, ...payload } });

describe('users', () => {
  it("applies defaults and derives an individual's name; takes days or date-times for validity", async () => {
    const res = await create({ code: 'jan', givenName: 'Jan', familyName: 'Novák', validFrom: '2026-01-01', validTo: '2030-12-31' });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      name: 'Jan Novák',
      status: 'ENABLE',
      authentication: 'PASSWORD',
      validFrom: '2026-01-01T00:00:00.000Z',
      validTo: '2030-12-31T23:59:59.999Z',
    });
    const renamed = await t.call({ method: 'PATCH', url: '/api/v1/users/jan', payload: { familyName: 'Dvořák' } });
    expect(renamed.json<User>().name).toBe('Jan Dvořák');
    const chosen = await t.call({ method: 'PATCH', url: '/api/v1/users/jan', payload: { name: 'J. D.' } });
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/jan', payload: { givenName: 'Honza' } })).json<User>().name).toBe('J. D.');
    expect(chosen.statusCode).toBe(200);
  });

  it('requires a name for organizations and a valid user type of the kind (422)', async () => {
    const org = await create({ code: 'acme', type: 'ORGANIZATION' });
    expect(org.statusCode).toBe(400);
    expect(org.json<ErrorBody>().errors).toEqual(['name: required for type ORGANIZATION']);
    expect((await create({ code: 'acme', type: 'ORGANIZATION', name: 'ACME' })).statusCode).toBe(201);
    const expired = await create({ code: 'wg', type: 'WORK_GROUP', name: 'WG' });
    expect(expired.statusCode).toBe(422);
    expect(expired.json<ErrorBody>()).toMatchObject({
      code: 'USER.REFERENCE_NOT_VALID',
      errors: ['type: no UserType with type "WORK_GROUP" is valid now'],
    });
    const none = await create({ code: 'ext', type: 'EXTERNAL', name: 'X' });
    expect(none.statusCode).toBe(422);
    expect(none.json<ErrorBody>().errors).toEqual(['type: no UserType with type "EXTERNAL"']);
  });

  it('refuses unknown groups naming them, a missing supervisor, self-supervision and cycles (422), bad e-mails and URLs (400)', async () => {
    const groups = await create({ code: 'g1', givenName: 'G', groups: ['OPS', 'NOPE', 'ALSO-NOPE'] });
    expect(groups.statusCode).toBe(422);
    expect(groups.json<ErrorBody>().errors).toEqual(['groups: no UserGroup "NOPE"', 'groups: no UserGroup "ALSO-NOPE"']);
    const boss = (await create({ code: 'boss', givenName: 'B' })).json<User>();
    const mid = (await create({ code: 'mid', givenName: 'M', supervisorId: boss.id })).json<User>();
    expect((await t.call({ method: 'PATCH', url: `/api/v1/users/${boss.id}`, payload: { supervisorId: boss.id } })).statusCode).toBe(422);
    const cycle = await t.call({ method: 'PATCH', url: `/api/v1/users/${boss.id}`, payload: { supervisorId: mid.id } });
    expect(cycle.statusCode).toBe(422);
    expect(cycle.json<ErrorBody>().code).toBe('USER.REFERENCE_CYCLE');
    expect((await create({ code: 'x1', givenName: 'X', supervisorId: '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5' })).statusCode).toBe(422);
    expect((await create({ code: 'x2', givenName: 'X', email: 'not an email' })).statusCode).toBe(400);
    expect((await create({ code: 'x3', givenName: 'X', webSite: 'javascript:alert(1)' })).statusCode).toBe(400);
    expect(
      (
        await create({
          code: 'x4',
          givenName: 'X',
          regions: [{ regionId: REGION, validFrom: '2026-02-01T00:00:00Z', validTo: '2026-01-01T00:00:00Z' }],
        })
      ).json<ErrorBody>().errors,
    ).toEqual(['regions.0.validTo: must not be before validFrom']);
    // A supervisor with subordinates cannot go.
    expect((await t.call({ method: 'DELETE', url: `/api/v1/users/${boss.id}` })).statusCode).toBe(409);
  });

  it("answers effective roles: its own, then the codes of its valid groups' access rules, each once", async () => {
    const u = (await create({ code: 'roley', givenName: 'R', roles: ['viewer', 'OPS_ROLE'], groups: ['OPS', 'PAST'] })).json<User>();
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${u.id}/roles`, as: 'viewer' })).json()).toEqual(['viewer', 'OPS_ROLE']);
    const other = (await create({ code: 'roley2', givenName: 'R', roles: ['editor'], groups: ['OPS'] })).json<User>();
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${other.id}/roles` })).json()).toEqual(['editor', 'OPS_ROLE']);
    const expanded = await t.call({ method: 'GET', url: '/api/v1/users/roley2?expand=ROLES' });
    expect(expanded.json<User>().roles).toEqual(['editor', 'OPS_ROLE']);
    expect((await t.call({ method: 'GET', url: '/api/v1/users/roley2?expand=EVERYTHING' })).statusCode).toBe(400);
  });

  it("expands regions with those of the user's valid groups", async () => {
    const assigned = await t.call({
      method: 'POST',
      url: '/api/v1/user-group-regions',
      payload: { userGroupId: ops.id, regionId: REGION },
    });
    expect(assigned.statusCode, assigned.body).toBe(201);
    const own = '8a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
    await create({ code: 'regy', givenName: 'R', groups: ['OPS'], regions: [{ regionId: own, coefficient: 0.5 }] });
    const res = await t.call({
      method: 'GET',
      url: `/api/v1/users/regy?expand=REGIONS,ROLES&minPosition=${String(assigned.headers['x-event-position'])}`,
    });
    expect(res.json<User>().regions).toEqual([
      { regionId: own, coefficient: 0.5, source: 'USER' },
      {
        regionId: REGION,
        source: 'USER_GROUP',
        userGroupId: ops.id,
        userGroupCode: 'OPS',
        assignmentId: assigned.json<{ id: string }>().id,
      },
    ]);
    expect((await t.call({ method: 'GET', url: '/api/v1/users/regy' })).json<User>().regions).toEqual([
      { regionId: own, coefficient: 0.5 },
    ]);
  });

  it("lists users by type, by groups, a user's groups and several users' groups", async () => {
    const a = (await create({ code: 'q-a', givenName: 'A', groups: ['OPS'] })).json<User>();
    const last = await create({ code: 'q-b', type: 'ORGANIZATION', name: 'Org B', groups: ['OPS', 'PAST'] });
    const b = last.json<User>();
    const at = String(last.headers['x-event-position']);
    const byType = await t.call({ method: 'GET', url: `/api/v1/users/by-type/ORGANIZATION?minPosition=${at}`, as: 'viewer' });
    expect(byType.json<User[]>().map((u) => u.code)).toContain('q-b');
    expect(byType.json<User[]>().every((u) => (u as { type?: string }).type === 'ORGANIZATION')).toBe(true);
    expect((await t.call({ method: 'GET', url: '/api/v1/users/by-type/ROBOT' })).statusCode).toBe(400);
    const byGroups = await t.call({ method: 'POST', url: `/api/v1/users/by-groups?minPosition=${at}`, payload: { ids: [ops.id] } });
    expect(byGroups.json<User[]>().map((u) => u.code)).toEqual(expect.arrayContaining(['q-a', 'q-b']));
    const groupsOfB = await t.call({ method: 'GET', url: `/api/v1/users/${b.id}/groups?minPosition=${at}` });
    expect(groupsOfB.json<{ code: string }[]>().map((g) => g.code)).toEqual(['OPS', 'PAST']);
    const byUsers = await t.call({
      method: 'POST',
      url: `/api/v1/user-groups/by-users?minPosition=${at}`,
      payload: { userIds: [a.id, b.id, '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5'] },
    });
    const map = byUsers.json<Record<string, { code: string }[]>>();
    expect(map[a.id]?.map((g) => g.code)).toEqual(['OPS']);
    expect(map[b.id]?.map((g) => g.code)).toEqual(['OPS', 'PAST']);
    expect(map['6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5']).toEqual([]);
    const members = await t.call({ method: 'GET', url: `/api/v1/user-groups/OPS/users?minPosition=${at}` });
    expect(members.json<User[]>().map((u) => u.code)).toEqual(expect.arrayContaining(['q-a', 'q-b']));
    const disabled = await t.call({ method: 'PATCH', url: '/api/v1/users/q-a', payload: { status: 'DISABLE' } });
    const valid = await t.call({
      method: 'GET',
      url: `/api/v1/user-groups/OPS/users/valid?minPosition=${String(disabled.headers['x-event-position'])}`,
    });
    expect(valid.json<User[]>().map((u) => u.code)).not.toContain('q-a');
    expect(valid.json<User[]>().map((u) => u.code)).toContain('q-b');
  });

  it('stores a thumbnail checked by its bytes, at most 1 MiB, and serves it with its type and an ETag', async () => {
    const u = (await create({ code: 'pic', givenName: 'P' })).json<User>();
    const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.from('rest of a png')]);
    const put = (photoData: string, userId = u.id) =>
      t.call({ method: 'PUT', url: `/api/v1/users/${u.id}/thumbnail`, payload: { userId, photoData } });
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${u.id}/thumbnail` })).statusCode).toBe(404);
    expect((await put(png.toString('base64'))).statusCode).toBe(204);
    const got = await t.app.inject({
      method: 'GET',
      url: `/api/v1/users/${u.id}/thumbnail`,
      headers: { authorization: `Bearer ${t.tokens.viewer}` },
    });
    expect(got.statusCode).toBe(200);
    expect(got.headers['content-type']).toBe('image/png');
    expect(got.headers['x-content-type-options']).toBe('nosniff');
    expect(got.rawPayload.equals(png)).toBe(true);
    const etag = String(got.headers.etag);
    const again = await t.app.inject({
      method: 'GET',
      url: `/api/v1/users/${u.id}/thumbnail`,
      headers: { authorization: `Bearer ${t.tokens.viewer}`, 'if-none-match': etag },
    });
    expect(again.statusCode).toBe(304);
    expect((await put(Buffer.from('GIF89a...').toString('base64'))).statusCode).toBe(204);
    expect((await put(Buffer.from('<svg onload=alert(1)>').toString('base64'))).statusCode).toBe(400);
    expect((await put('not base64!!')).statusCode).toBe(400);
    expect((await put(png.toString('base64'), '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5')).statusCode).toBe(400);
    const big = Buffer.concat([png, Buffer.alloc(1024 * 1024)]);
    expect((await put(big.toString('base64'))).statusCode).toBe(413);
    const history = await t.call({ method: 'GET', url: `/api/v1/users/${u.id}/history` });
    const changed = history.json<{ type: string; data: Record<string, unknown> }[]>().find((e) => e.type === 'UserThumbnailChanged');
    expect(changed?.data).toMatchObject({ contentType: 'image/png', size: png.length });
    expect(JSON.stringify(changed)).not.toContain(png.toString('base64'));
  });
});

describe('user group regions', () => {
  it('allows one assignment of a pair: of 16 concurrent, one 201 and fifteen 409', async () => {
    const g = (
      await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'RACE', name: 'Race', type: 'TEAM', chars: {} } })
    ).json<{ id: string }>();
    const region = '9a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
    const answers = await Promise.all(
      Array.from({ length: 16 }, () =>
        t.call({ method: 'POST', url: '/api/v1/user-group-regions', payload: { userGroupId: g.id, regionId: region } }),
      ),
    );
    expect(answers.map((a) => a.statusCode).sort()).toEqual([201, ...Array<number>(15).fill(409)]);
    expect(answers.find((a) => a.statusCode === 409)?.json<ErrorBody>().code).toBe('USER_GROUP_REGION.USER_GROUP_REGION_TAKEN');
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/user-group-regions',
          payload: { userGroupId: '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5', regionId: region },
        })
      ).statusCode,
    ).toBe(422);
  });

  it('serves assignments by group id, code, and pair, and lists all, each with the group as it is now', async () => {
    const g = (
      await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'REG-G', name: 'Before', type: 'TEAM', chars: {} } })
    ).json<{ id: string }>();
    const r1 = '1b1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
    const made = await t.call({ method: 'POST', url: '/api/v1/user-group-regions', payload: { userGroupId: g.id, regionId: r1 } });
    expect(made.json()).toMatchObject({ userGroupId: g.id, regionId: r1 });
    const renamed = await t.call({ method: 'PATCH', url: `/api/v1/user-groups/${g.id}`, payload: { name: 'After' } });
    const at = String(renamed.headers['x-event-position']);
    type Assignment = { id: string; regionId: string; userGroup?: { name: string } };
    for (const url of [
      `/api/v1/user-groups/${g.id}/regions`,
      '/api/v1/user-groups/REG-G/regions',
      '/api/v1/user-groups/by-code/REG-G/regions',
    ]) {
      const res = await t.call({ method: 'GET', url: `${url}?minPosition=${at}`, as: 'viewer' });
      expect(
        res.json<Assignment[]>().map((a) => [a.regionId, a.userGroup?.name]),
        url,
      ).toEqual([[r1, 'After']]);
    }
    const pair = await t.call({ method: 'GET', url: `/api/v1/user-groups/${g.id}/regions/${r1}` });
    expect(pair.json<Assignment>().userGroup?.name).toBe('After');
    expect(
      (await t.call({ method: 'GET', url: `/api/v1/user-groups/${g.id}/regions/2b1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5` })).statusCode,
    ).toBe(404);
    const all = await t.call({ method: 'GET', url: `/api/v1/user-group-regions?minPosition=${at}` });
    expect(all.json<Assignment[]>().find((a) => a.regionId === r1)?.userGroup?.name).toBe('After');
    const one = await t.call({ method: 'GET', url: `/api/v1/user-group-regions/${made.json<Assignment>().id}` });
    expect(one.json<Assignment>().userGroup?.name).toBe('After');
  });
});

// GET /user-group-regions/{id} was a copy of the shared get without `asOf`; it is the shared get
// now, whose expansion embeds the group.
describe('a user group region as of a time (the shared get)', () => {
  it('answers 404 before it existed and the assignment with its group after', async () => {
    const g = (
      await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'REG-AS-OF', name: 'As of', type: 'TEAM', chars: {} } })
    ).json<{ id: string }>();
    const made = await t.call({ method: 'POST', url: '/api/v1/user-group-regions', payload: { userGroupId: g.id, regionId: REGION } });
    expect(made.statusCode, made.body).toBe(201);
    const id = made.json<{ id: string }>().id;
    const before = await t.call({ method: 'GET', url: `/api/v1/user-group-regions/${id}?asOf=2000-01-01T00:00:00Z` });
    expect(before.statusCode, before.body).toBe(404);
    const later = await t.call({ method: 'GET', url: `/api/v1/user-group-regions/${id}?asOf=2100-01-01T00:00:00Z` });
    expect(later.statusCode, later.body).toBe(200);
    expect(later.json()).toMatchObject({ id, regionId: REGION, userGroup: { code: 'REG-AS-OF' } });
    expect(later.headers.etag).toBe('"0"');
  });
});
