// Roles as they are granted and held: a group's role is the code of the access rule it names; a
// caller touches a user only when it holds every role the user holds; the last enabled admin stays.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const PASSWORD = 'a-long-enough-password-1';
type ErrorBody = { code: string; errors: string[]; message: string };

beforeAll(async () => {
  t = await startTestApp();
  await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } });
});
afterAll(async () => {
  await t.close();
});

const created = async (url: string, payload: Record<string, unknown>, as: 'admin' | 'editor' = 'admin'): Promise<{ id: string }> => {
  const res = await t.call({ method: 'POST', url, payload, as });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
};
const aUser = (code: string, extra: Record<string, unknown> = {}) => created('/api/v1/users', { code, type: 'INDIVIDUAL', givenName: code, chars: {}, ...extra });
const session = async (code: string): Promise<{ roles: string[]; headers: Record<string, string> }> => {
  expect((await t.call({ method: 'PUT', url: `/api/v1/users/${code}/password`, payload: { password: PASSWORD } })).statusCode).toBe(204);
  const login = await t.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username: code, password: PASSWORD }, as: null });
  expect(login.statusCode, login.body).toBe(200);
  const body = login.json<{ access_token: string; roles: string[] }>();
  return { roles: body.roles, headers: { authorization: `Bearer ${body.access_token}` } };
};

describe('a group\'s role', () => {
  it('is the code of the access rule the group names, which authorizes its members; renamed, it follows', async () => {
    const rule = await created('/api/v1/access-rules', { code: 'GROUP_READER', name: 'Reads groups', entityName: 'user-groups', accessRule: 'READ', fullAccess: true });
    await created('/api/v1/user-groups', { code: 'READERS', name: 'Readers', type: 'TEAM', chars: {}, associatedUserRoleId: rule.id });
    const member = await aUser('gina', { groups: ['READERS'] });
    const { roles, headers } = await session('gina');
    expect(roles).toEqual(['GROUP_READER']);
    expect((await t.call({ method: 'GET', url: '/api/v1/user-groups', headers, as: null })).statusCode).toBe(200);
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${member.id}/roles` })).json()).toEqual(['GROUP_READER']);
    // Renamed: the session's next request carries the new code, and is still authorized by it.
    expect((await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${rule.id}`, payload: { code: 'GROUP_READER_2' } })).statusCode).toBe(200);
    expect((await t.call({ method: 'GET', url: '/api/v1/user-groups', headers, as: null })).statusCode).toBe(200);
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${member.id}?expand=ROLES` })).json()).toMatchObject({ roles: ['GROUP_READER_2'] });
    // The rule cannot go while the group names it.
    const gone = await t.call({ method: 'DELETE', url: `/api/v1/access-rules/${rule.id}` });
    expect(gone.statusCode).toBe(409);
    expect(gone.json<ErrorBody>().code).toBe('ACCESS_RULE.STILL_REFERENCED');
  });

  it('must name an access rule (422), and no rule is named like a built-in role (400)', async () => {
    const orphan = await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'ORPHAN', name: 'o', type: 'TEAM', chars: {}, associatedUserRoleId: '6fab0c1a-1111-4a2b-8c3d-4e5f6a7b8c9d' } });
    expect(orphan.statusCode).toBe(422);
    expect(orphan.json<ErrorBody>()).toMatchObject({ code: 'USER_GROUP.REFERENCE_NOT_FOUND', errors: ['associatedUserRoleId: no AccessRule "6fab0c1a-1111-4a2b-8c3d-4e5f6a7b8c9d"'] });
    await created('/api/v1/user-groups', { code: 'PLAIN', name: 'p', type: 'TEAM', chars: {} });
    expect((await t.call({ method: 'PATCH', url: '/api/v1/user-groups/PLAIN', payload: { associatedUserRoleId: '6fab0c1a-1111-4a2b-8c3d-4e5f6a7b8c9d' } })).statusCode).toBe(422);
    for (const code of ['admin', 'auditor']) {
      const named = await t.call({ method: 'POST', url: '/api/v1/access-rules', payload: { code, name: code, entityName: 'users', fullAccess: true } });
      expect(named.statusCode).toBe(400);
      expect(named.json<ErrorBody>().errors).toEqual([`code: "${code}" is a built-in role, never an access rule`]);
    }
  });
});
