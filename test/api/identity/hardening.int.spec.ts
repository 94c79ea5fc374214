// What an adversarial review found, kept found: who may grant roles and set passwords, the login
// limit under concurrent guesses, sessions that end with their user, patches that would bring a
// default back, references and cycles under concurrent writes, types in use.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { givePassword } from '../../support/passwords.ts';
import { startTestApp, TEST_SECRET, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const ROLE_ID = '6d9e6c1a-1111-4a2b-8c3d-4e5f6a7b8c9d';
const PASSWORD = 'a-long-enough-password-1';
type ErrorBody = { code: string; errors: string[] };

beforeAll(async () => {
  t = await startTestApp();
  await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } });
  await t.call({
    method: 'POST',
    url: '/api/v1/access-rules',
    payload: { id: ROLE_ID, code: 'PRIV_ROLE', name: 'Privileged', entityName: 'users', fullAccess: true },
  });
  await t.call({
    method: 'POST',
    url: '/api/v1/user-groups',
    payload: { code: 'PRIV', name: 'Privileged', type: 'TEAM', chars: {}, associatedUserRoleId: ROLE_ID },
  });
  await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'PLAIN', name: 'Plain', type: 'TEAM', chars: {} } });
});
afterAll(async () => {
  await t.close();
});

const user = (code: string, extra: Record<string, unknown> = {}, as: 'admin' | 'editor' = 'admin') =>
  t.call({ method: 'POST', url: '/api/v1/users', payload: { code, type: 'INDIVIDUAL', givenName: code, chars: {}, ...extra }, as });
const bearer = async (sub: string, roles: string[]) => ({ authorization: `Bearer ${await signHs256(TEST_SECRET, { sub, roles })}` });

describe('granting roles and setting passwords', () => {
  it('takes an admin to give roles, directly or through a group that carries one', async () => {
    expect((await user('ed-1', { roles: ['admin'] }, 'editor')).statusCode).toBe(403);
    expect((await user('ed-2', {}, 'editor')).statusCode).toBe(201);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/ed-2', payload: { roles: ['admin'] }, as: 'editor' })).statusCode).toBe(
      403,
    );
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/ed-2', payload: { groups: ['PRIV'] }, as: 'editor' })).statusCode).toBe(
      403,
    );
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/ed-2', payload: { groups: ['PLAIN'] }, as: 'editor' })).statusCode).toBe(
      200,
    );
    expect(
      (await t.call({ method: 'PATCH', url: '/api/v1/user-groups/PLAIN', payload: { associatedUserRoleId: ROLE_ID }, as: 'editor' }))
        .statusCode,
    ).toBe(403);
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/access-rules',
          payload: { code: 'R', name: 'R', fullAccess: true, entityName: 'users' },
          as: 'editor',
        })
      ).statusCode,
    ).toBe(403);
    // An admin may; and a user already in a role-carrying group can still be edited by an editor.
    expect(
      (await t.call({ method: 'PATCH', url: '/api/v1/users/ed-2', payload: { roles: ['viewer'], groups: ['PLAIN', 'PRIV'] } })).statusCode,
    ).toBe(200);
    expect(
      (await t.call({ method: 'PATCH', url: '/api/v1/users/ed-2', payload: { description: 'edited' }, as: 'editor' })).statusCode,
    ).toBe(200);
  });

  it("takes an admin to set another user's password; a user may set its own", async () => {
    await user('boss', { roles: ['admin'] });
    const byEditor = await t.call({ method: 'PUT', url: '/api/v1/users/boss/password', payload: { password: PASSWORD }, as: 'editor' });
    expect(byEditor.statusCode).toBe(403);
    // A token minted for `sub: "self"` names no user: only a login session does.
    await user('self', { roles: ['editor'] });
    expect(
      (
        await t.call({
          method: 'PUT',
          url: '/api/v1/users/self/password',
          payload: { password: PASSWORD },
          headers: await bearer('self', ['editor']),
          as: null,
        })
      ).statusCode,
    ).toBe(403);
    const session = { authorization: `Bearer ${await givePassword(t, 'self', PASSWORD)}` };
    expect(
      (
        await t.call({
          method: 'PUT',
          url: '/api/v1/users/self/password',
          payload: { password: `${PASSWORD}-2`, currentPassword: PASSWORD },
          headers: session,
          as: null,
        })
      ).statusCode,
    ).toBe(204);
    // Renaming another user to one's own token's sub gives nothing (an admin, the editor may not even rename).
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/boss', payload: { code: 'integration' }, as: 'editor' })).statusCode).toBe(
      403,
    );
    await user('worker');
    expect(
      (await t.call({ method: 'PATCH', url: '/api/v1/users/worker', payload: { code: 'integration' }, as: 'editor' })).statusCode,
    ).toBe(200);
    expect(
      (
        await t.call({
          method: 'PUT',
          url: '/api/v1/users/integration/password',
          payload: { password: PASSWORD },
          headers: await bearer('integration', ['editor']),
          as: null,
        })
      ).statusCode,
    ).toBe(403);
  });

  it('tells codes apart by case: a group differing only in case is another group, checked as such', async () => {
    await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'priv', name: 'lower', type: 'TEAM', chars: {} } });
    expect((await user('case-1', { groups: ['priv'] }, 'editor')).statusCode).toBe(201);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/case-1', payload: { groups: ['PRIV'] }, as: 'editor' })).statusCode).toBe(
      403,
    );
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/case-1', payload: { groups: ['Priv'] }, as: 'editor' })).statusCode).toBe(
      422,
    );
  });

  it('takes an admin to change the validity of a group that grants a role', async () => {
    await t.call({
      method: 'POST',
      url: '/api/v1/user-groups',
      payload: { code: 'OLDPRIV', name: 'o', type: 'TEAM', chars: {}, associatedUserRoleId: ROLE_ID, validTo: '2020-01-01T00:00:00Z' },
    });
    expect(
      (await t.call({ method: 'PATCH', url: '/api/v1/user-groups/OLDPRIV', payload: { validTo: null }, as: 'editor' })).statusCode,
    ).toBe(403);
    expect(
      (await t.call({ method: 'PATCH', url: '/api/v1/user-groups/PLAIN', payload: { validTo: '2030-01-01T00:00:00Z' }, as: 'editor' }))
        .statusCode,
    ).toBe(200);
  });

  it('refuses repeated groups or roles (400)', async () => {
    const res = await user('dup', { groups: ['PLAIN', 'PLAIN'] });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().errors).toEqual(['groups[1]: "PLAIN" is listed twice']);
  });
});

describe('login', () => {
  it('counts concurrent guesses as they start: at most the limit get an answer from the password check', async () => {
    await user('burst');
    await t.call({ method: 'PUT', url: '/api/v1/users/burst/password', payload: { password: PASSWORD } });
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        t.call({
          method: 'POST',
          url: '/api/v1/auth/token',
          payload: { username: 'burst', password: `guess-number-${String(i)}` },
          as: null,
        }),
      ),
    );
    const statuses = answers.map((a) => a.statusCode);
    expect(statuses.filter((s) => s === 401).length).toBe(10);
    expect(statuses.filter((s) => s === 429).length).toBe(20);
  });

  it('ends a session when its user is disabled or changes its password, and follows its roles as they are', async () => {
    await user('sess', { roles: ['viewer'] });
    await givePassword(t, 'sess', PASSWORD);
    const login = async () =>
      (await t.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username: 'sess', password: PASSWORD }, as: null })).json<{
        access_token: string;
      }>().access_token;
    const read = async (token: string) =>
      (await t.call({ method: 'GET', url: '/api/v1/users/sess', headers: { authorization: `Bearer ${token}` }, as: null })).statusCode;
    const token = await login();
    expect(await read(token)).toBe(200);
    await t.call({ method: 'PATCH', url: '/api/v1/users/sess', payload: { roles: [] } });
    expect(await read(token)).toBe(403);
    await t.call({ method: 'PATCH', url: '/api/v1/users/sess', payload: { roles: ['viewer'], status: 'DISABLE' } });
    expect(await read(token)).toBe(401);
    await t.call({ method: 'PATCH', url: '/api/v1/users/sess', payload: { status: 'ENABLE' } });
    expect(await read(token)).toBe(200);
    await t.call({ method: 'PUT', url: '/api/v1/users/sess/password', payload: { password: `${PASSWORD}-new` } });
    expect(await read(token)).toBe(401);
  });
});

describe('changes', () => {
  it('will not bring a default back through a null in a patch (400)', async () => {
    await user('nul', { status: 'DISABLE', authentication: 'LDAP' });
    for (const field of ['status', 'authentication']) {
      const res = await t.call({ method: 'PATCH', url: '/api/v1/users/nul', payload: { [field]: null } });
      expect(res.statusCode).toBe(400);
      expect(res.json<ErrorBody>().errors).toEqual([`${field}: cannot be null (it has a default); set a value`]);
    }
    expect((await t.call({ method: 'GET', url: '/api/v1/users/nul' })).json()).toMatchObject({ status: 'DISABLE', authentication: 'LDAP' });
  });

  it('keeps a user changeable when its type has expired since, and a group type in use from going', async () => {
    await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'TEMP', name: 'Temp', type: 'EXTERNAL' } });
    await user('ext', { type: 'EXTERNAL', name: 'Ext' });
    expect(
      (await t.call({ method: 'PATCH', url: '/api/v1/user-types/TEMP', payload: { validityTo: '2020-01-01T00:00:00Z' } })).statusCode,
    ).toBe(200);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/ext', payload: { status: 'DISABLE' } })).statusCode).toBe(200);
    expect((await user('ext-2', { type: 'EXTERNAL', name: 'Ext' })).statusCode).toBe(422);
    const del = await t.call({ method: 'DELETE', url: '/api/v1/user-group-types/TEAM' });
    expect(del.statusCode).toBe(409);
    expect(del.json<ErrorBody>().code).toBe('USER_GROUP_TYPE.STILL_REFERENCED');
  });

  it('never lets two concurrent moves close a cycle', async () => {
    for (let i = 0; i < 10; i++) {
      const a = (
        await t.call({
          method: 'POST',
          url: '/api/v1/user-groups',
          payload: { code: `CA-${String(i)}`, name: 'a', type: 'TEAM', chars: {} },
        })
      ).json<{ id: string }>();
      const b = (
        await t.call({
          method: 'POST',
          url: '/api/v1/user-groups',
          payload: { code: `CB-${String(i)}`, name: 'b', type: 'TEAM', chars: {} },
        })
      ).json<{ id: string }>();
      const [x, y] = await Promise.all([
        t.call({ method: 'PATCH', url: `/api/v1/user-groups/${a.id}`, payload: { parentUserGroupId: b.id } }),
        t.call({ method: 'PATCH', url: `/api/v1/user-groups/${b.id}`, payload: { parentUserGroupId: a.id } }),
      ]);
      expect([x.statusCode, y.statusCode].sort()).toEqual([200, 422]);
    }
  });

  it('never lets a reference land beside the delete of what it names', async () => {
    for (let i = 0; i < 40; i++) {
      const g = (
        await t.call({
          method: 'POST',
          url: '/api/v1/user-groups',
          payload: { code: `RD-${String(i)}`, name: 'g', type: 'TEAM', chars: {} },
        })
      ).json<{ id: string }>();
      // The delete a few milliseconds after (0 to 5): its check reads the read model while the
      // assignment is being decided and appended.
      const [assign, del] = await Promise.all([
        t.call({
          method: 'POST',
          url: '/api/v1/user-group-regions',
          payload: { userGroupId: g.id, regionId: '7a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5' },
        }),
        new Promise<Awaited<ReturnType<TestApp['call']>>>((resolve) => {
          setTimeout(() => void t.call({ method: 'DELETE', url: `/api/v1/user-groups/${g.id}` }).then(resolve), i % 6);
        }),
      ]);
      expect([assign.statusCode, del.statusCode], `${assign.body} ${del.body}`).not.toEqual([201, 204]);
    }
  });
});
