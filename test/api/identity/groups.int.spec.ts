// User groups over HTTP: references (type, parent, cycles), the normalised directory key, the
// expanded forms, by-chars, convertors and scripts, and what keeps a group from being deleted.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const ROLE_ID = '0b9e6c1a-1111-4a2b-8c3d-4e5f6a7b8c9d';
beforeAll(async () => {
  t = await startTestApp();
  expect(
    (await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } })).statusCode,
  ).toBe(201);
  expect(
    (await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } }))
      .statusCode,
  ).toBe(201);
  const rule = { id: ROLE_ID, code: 'ADMINS_ROLE', name: 'Admins', entityName: 'users', fullAccess: true };
  expect((await t.call({ method: 'POST', url: '/api/v1/access-rules', payload: rule })).statusCode).toBe(201);
});
afterAll(async () => {
  await t.close();
});

type Group = { id: string; code: string; name: string; parentUserGroupId?: string; auditInfo: { version: number } };
type ErrorBody = { status: string; code: string; errors: string[]; message: string };

const group = async (code: string, extra: Record<string, unknown> = {}) => {
  const res = await t.call({
    method: 'POST',
    url: '/api/v1/user-groups',
    payload: { code, name: `Group ${code}`, type: 'TEAM', chars: {}, ...extra },
  });
  expect(res.statusCode, res.body).toBe(201);
  return { group: res.json<Group>(), at: String(res.headers['x-event-position']) };
};

describe('user groups', () => {
  it('refuses an unknown type or parent (422 naming the field) and a missing chars (400)', async () => {
    const badType = await t.call({
      method: 'POST',
      url: '/api/v1/user-groups',
      payload: { code: 'X1', name: 'x', type: 'NOPE', chars: {} },
    });
    expect(badType.statusCode).toBe(422);
    expect(badType.json<ErrorBody>().errors).toEqual(['type: no UserGroupType "NOPE"']);
    const badParent = await t.call({
      method: 'POST',
      url: '/api/v1/user-groups',
      payload: { code: 'X2', name: 'x', type: 'TEAM', chars: {}, parentUserGroupId: '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5' },
    });
    expect(badParent.statusCode).toBe(422);
    expect(badParent.json<ErrorBody>().errors[0]).toMatch(/^parentUserGroupId: no UserGroup/);
    const noChars = await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'X3', name: 'x', type: 'TEAM' } });
    expect(noChars.statusCode).toBe(400);
  });

  it('keeps the tree free of cycles (422), itself included', async () => {
    const { group: a } = await group('CY-A');
    const { group: b } = await group('CY-B', { parentUserGroupId: a.id });
    const { group: c } = await group('CY-C', { parentUserGroupId: b.id });
    const self = await t.call({ method: 'PATCH', url: `/api/v1/user-groups/${a.id}`, payload: { parentUserGroupId: a.id } });
    expect(self.statusCode).toBe(422);
    expect(self.json<ErrorBody>().code).toBe('USER_GROUP.REFERENCE_CYCLE');
    const loop = await t.call({ method: 'PATCH', url: `/api/v1/user-groups/${a.id}`, payload: { parentUserGroupId: c.id } });
    expect(loop.statusCode).toBe(422);
    expect(loop.json<ErrorBody>().errors[0]).toMatch(/^parentUserGroupId: .* would make a cycle/);
    // Moving a leaf under another branch is fine.
    const { group: d } = await group('CY-D');
    expect((await t.call({ method: 'PATCH', url: `/api/v1/user-groups/${c.id}`, payload: { parentUserGroupId: d.id } })).statusCode).toBe(
      200,
    );
  });

  it('keeps ldapMemberOf unique as a normalised DN and finds a group by it (expanded form)', async () => {
    await group('LDAP-1', {
      ldapMemberOf: 'CN=Admins, OU=Groups, DC=example, DC=com',
      chars: { region: 'north' },
      associatedUserRoleId: ROLE_ID,
    });
    const dup = await t.call({
      method: 'POST',
      url: '/api/v1/user-groups',
      payload: { code: 'LDAP-2', name: 'x', type: 'TEAM', chars: {}, ldapMemberOf: 'cn=admins,ou=groups,dc=example,dc=com' },
    });
    expect(dup.statusCode).toBe(409);
    expect(dup.json<ErrorBody>().code).toBe('USER_GROUP.LDAP_MEMBER_OF_TAKEN');
    const found = await t.call({
      method: 'GET',
      url: `/api/v1/user-groups/by-ldap?ldapMemberOf=${encodeURIComponent('cn = ADMINS ,ou=groups,dc=example,dc=com')}`,
      as: 'viewer',
    });
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json()).toMatchObject({
      code: 'LDAP-1',
      readonlyAccess: true,
      version: 0,
      period: { isValid: true },
      chars: { empty: false, region: 'north' },
      userGroupType: { code: 'TEAM', valid: 'true', localizationData: { empty: true }, registry: {} },
    });
    expect((await t.call({ method: 'GET', url: '/api/v1/user-groups/by-ldap?ldapMemberOf=cn%3Dnobody' })).statusCode).toBe(404);
    const byCodes = await t.call({ method: 'POST', url: '/api/v1/user-groups/by-codes', payload: ['LDAP-1', 'MISSING'] });
    expect(byCodes.json<{ code: string; readonlyAccess: boolean }[]>().map((g) => [g.code, g.readonlyAccess])).toEqual([['LDAP-1', false]]);
  });

  it('finds groups by a characteristic path, validating the path', async () => {
    const { at } = await group('CH-1', { chars: { site: { city: 'Brno' }, floor: 3 } });
    const byChars = async (query: string) =>
      t.call({ method: 'GET', url: `/api/v1/user-groups/by-chars?${query}&minPosition=${at}`, as: 'viewer' });
    expect((await byChars('path=site.city&value=Brno')).json<Group[]>().map((g) => g.code)).toEqual(['CH-1']);
    expect((await byChars('path=floor&value=3')).json<Group[]>().map((g) => g.code)).toEqual(['CH-1']);
    for (const bad of ['site..city', 'site.$where', "a'b", '']) {
      const res = await byChars(`path=${encodeURIComponent(bad)}&value=x`);
      expect(res.statusCode, bad).toBe(400);
    }
  });

  it('converts keys with the built-in convertors, leaving unknown keys out; 404 for an unknown convertor', async () => {
    const { group: g } = await group('CV-1', { ldapMemberOf: 'cn=cv,dc=x' });
    const convert = async (code: string, keys: string[]) =>
      t.call({ method: 'POST', url: `/api/v1/user-groups/convert/${code}`, payload: { keys: keys.map((key) => ({ key })) }, as: 'viewer' });
    expect((await convert('CODE_TO_NAME', ['CV-1', 'NOPE'])).json()).toEqual({ 'CV-1': 'Group CV-1' });
    expect((await convert('CODE_TO_ID', ['CV-1'])).json()).toEqual({ 'CV-1': g.id });
    expect((await convert('ID_TO_CODE', [g.id, 'not-a-uuid'])).json()).toEqual({ [g.id]: 'CV-1' });
    expect((await convert('LDAP_TO_CODE', ['CN=CV, DC=X'])).json()).toEqual({ 'CN=CV, DC=X': 'CV-1' });
    expect((await convert('EVAL', ['x'])).statusCode).toBe(404);
  });

  it('runs the HIERARCHY and EFFECTIVE_MEMBERS scripts; 404 for another', async () => {
    const { group: root } = await group('H-ROOT');
    const { group: child } = await group('H-CHILD', { parentUserGroupId: root.id });
    await group('H-LEAF', { parentUserGroupId: child.id });
    await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code: 'h-u1', type: 'INDIVIDUAL', givenName: 'H', chars: {}, groups: ['H-ROOT', 'H-LEAF'] },
    });
    const last = await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code: 'h-u2', type: 'INDIVIDUAL', givenName: 'H', chars: {}, groups: ['H-CHILD'] },
    });
    const at = String(last.headers['x-event-position']);
    const tree = await t.call({
      method: 'POST',
      url: '/api/v1/user-groups/scripts/HIERARCHY',
      payload: { group: 'H-ROOT', minPosition: at },
    });
    expect(tree.json()).toMatchObject({
      root: { code: 'H-ROOT', children: [{ code: 'H-CHILD', children: [{ code: 'H-LEAF', children: [] }] }] },
    });
    const members = await t.call({
      method: 'POST',
      url: '/api/v1/user-groups/scripts/EFFECTIVE_MEMBERS',
      payload: { group: root.id, minPosition: at },
    });
    expect(
      members
        .json<{ users: { code: string }[] }>()
        .users.map((u) => u.code)
        .sort(),
    ).toEqual(['h-u1', 'h-u2']);
    expect((await t.call({ method: 'POST', url: '/api/v1/user-groups/scripts/rm%20-rf', payload: { group: 'H-ROOT' } })).statusCode).toBe(
      404,
    );
  });

  it('refuses to delete a group with members, children or regions (409 naming them), and to change the code of one with members', async () => {
    const { group: parent } = await group('DEL-P');
    const { group: child } = await group('DEL-C', { parentUserGroupId: parent.id });
    await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code: 'del-u', type: 'INDIVIDUAL', givenName: 'D', chars: {}, groups: ['DEL-P'] },
    });
    const region = await t.call({
      method: 'POST',
      url: '/api/v1/user-group-regions',
      payload: { userGroupId: parent.id, regionId: '7a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5' },
    });
    expect(region.statusCode, region.body).toBe(201);
    const del = await t.call({ method: 'DELETE', url: `/api/v1/user-groups/${parent.id}` });
    expect(del.statusCode).toBe(409);
    const body = del.json<ErrorBody>();
    expect(body.code).toBe('USER_GROUP.STILL_REFERENCED');
    expect(body.errors.join('\n')).toMatch(/users\.groups: 1 User record\(s\) name it \(del-u\)/);
    expect(body.errors.join('\n')).toMatch(/user-groups\.parentUserGroupId: 1 UserGroup record\(s\) name it \(DEL-C\)/);
    expect(body.errors.join('\n')).toMatch(/user-group-regions\.userGroupId: 1 /);
    const recode = await t.call({ method: 'PATCH', url: `/api/v1/user-groups/${parent.id}`, payload: { code: 'DEL-P2' } });
    expect(recode.statusCode).toBe(409);
    // Renaming is fine; once nothing names it, it goes.
    expect((await t.call({ method: 'PATCH', url: `/api/v1/user-groups/${parent.id}`, payload: { name: 'Renamed' } })).statusCode).toBe(200);
    expect((await t.call({ method: 'DELETE', url: `/api/v1/user-groups/${child.id}` })).statusCode).toBe(204);
    expect((await t.call({ method: 'DELETE', url: `/api/v1/user-group-regions/${region.json<{ id: string }>().id}` })).statusCode).toBe(
      204,
    );
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/del-u', payload: { groups: [] } })).statusCode).toBe(200);
    expect((await t.call({ method: 'DELETE', url: `/api/v1/user-groups/${parent.id}` })).statusCode).toBe(204);
  });
});
