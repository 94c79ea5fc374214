// Roles as they are granted and held: a group's role is the code of the access rule it names; a
// caller touches a user only when it holds every role the user holds; the last enabled admin stays.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { multipart } from '../../support/multipart.ts';
import { givePassword } from '../../support/passwords.ts';
import { startIdentityApp, TEST_SECRET, type TestApp, type TestResponse } from '../../support/testApp.ts';

let t: TestApp;
const PASSWORD = 'a-long-enough-password-1';
type ErrorBody = { code: string; errors: string[]; message: string };
type Rec = { id: string; code: string; status?: string; roles?: string[]; auditInfo: { version: number } } & Record<string, unknown>;
/** An item of an apply's or an import's answer. */
type Outcome = { diffType?: string; left?: Rec; right?: Rec; error?: ErrorBody };

beforeAll(async () => {
  t = await startIdentityApp();
});
afterAll(async () => {
  await t.close();
});

const created = async (url: string, payload: Record<string, unknown>, as: 'admin' | 'editor' = 'admin'): Promise<{ id: string }> => {
  const res = await t.call({ method: 'POST', url, payload, as });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
};
const aUser = (code: string, extra: Record<string, unknown> = {}) =>
  created('/api/v1/users', { code, type: 'INDIVIDUAL', givenName: code, chars: {}, ...extra });
/** An access rule over every record of a resource. */
const aRule = (code: string, name: string, entityName: string, accessRule: 'READ' | 'READ_WRITE') =>
  created('/api/v1/access-rules', { code, name, entityName, accessRule, fullAccess: true });
/** A group whose members receive a rule's role. */
const aRoleGroup = (code: string, name: string, ruleId: string) =>
  created('/api/v1/user-groups', { code, name, type: 'TEAM', chars: {}, associatedUserRoleId: ruleId });
const session = async (code: string): Promise<{ roles: string[]; headers: Record<string, string> }> => {
  await givePassword(t, code, PASSWORD);
  const login = await t.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username: code, password: PASSWORD }, as: null });
  expect(login.statusCode, login.body).toBe(200);
  const body = login.json<{ access_token: string; roles: string[] }>();
  return { roles: body.roles, headers: { authorization: `Bearer ${body.access_token}` } };
};

describe("a group's role", () => {
  it('is the code of the access rule the group names, which authorizes its members; renamed, it follows', async () => {
    const rule = await aRule('GROUP_READER', 'Reads groups', 'user-groups', 'READ');
    await aRoleGroup('READERS', 'Readers', rule.id);
    const member = await aUser('gina', { groups: ['READERS'] });
    const { roles, headers } = await session('gina');
    expect(roles).toEqual(['GROUP_READER']);
    expect((await t.call({ method: 'GET', url: '/api/v1/user-groups', headers, as: null })).statusCode).toBe(200);
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${member.id}/roles` })).json()).toEqual(['GROUP_READER']);
    // Renamed: the session's next request carries the new code, and is still authorized by it.
    expect(
      (await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${rule.id}`, payload: { code: 'GROUP_READER_2' } })).statusCode,
    ).toBe(200);
    expect((await t.call({ method: 'GET', url: '/api/v1/user-groups', headers, as: null })).statusCode).toBe(200);
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${member.id}?expand=ROLES` })).json()).toMatchObject({
      roles: ['GROUP_READER_2'],
    });
    // The rule cannot go while the group names it.
    const gone = await t.call({ method: 'DELETE', url: `/api/v1/access-rules/${rule.id}` });
    expect(gone.statusCode).toBe(409);
    expect(gone.json<ErrorBody>().code).toBe('ACCESS_RULE.STILL_REFERENCED');
  });

  it('must name an access rule (422), and no rule is named like a built-in role (400)', async () => {
    const orphan = await t.call({
      method: 'POST',
      url: '/api/v1/user-groups',
      payload: { code: 'ORPHAN', name: 'o', type: 'TEAM', chars: {}, associatedUserRoleId: '6fab0c1a-1111-4a2b-8c3d-4e5f6a7b8c9d' },
    });
    expect(orphan.statusCode).toBe(422);
    expect(orphan.json<ErrorBody>()).toMatchObject({
      code: 'USER_GROUP.REFERENCE_NOT_FOUND',
      errors: ['associatedUserRoleId: no AccessRule "6fab0c1a-1111-4a2b-8c3d-4e5f6a7b8c9d"'],
    });
    await created('/api/v1/user-groups', { code: 'PLAIN', name: 'p', type: 'TEAM', chars: {} });
    expect(
      (
        await t.call({
          method: 'PATCH',
          url: '/api/v1/user-groups/PLAIN',
          payload: { associatedUserRoleId: '6fab0c1a-1111-4a2b-8c3d-4e5f6a7b8c9d' },
        })
      ).statusCode,
    ).toBe(422);
    for (const code of ['admin', 'auditor']) {
      const named = await t.call({
        method: 'POST',
        url: '/api/v1/access-rules',
        payload: { code, name: code, entityName: 'users', fullAccess: true },
      });
      expect(named.statusCode).toBe(400);
      expect(named.json<ErrorBody>().errors).toEqual([`code: "${code}" is a built-in role, never an access rule`]);
    }
  });
});

const bearer = async (sub: string, roles: string[]) => ({ authorization: `Bearer ${await signHs256(TEST_SECRET, { sub, roles })}` });
const as = (headers: Record<string, string>) => (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  t.call({ method, url, ...(payload === undefined ? {} : { payload }), headers, as: null });
const record = async (app: TestApp, code: string): Promise<Rec> => (await app.call({ method: 'GET', url: `/api/v1/users/${code}` })).json();
const importUsers = (app: TestApp, data: unknown[], query: string, headers: Record<string, string>): Promise<TestResponse> => {
  const file = multipart(JSON.stringify({ entityType: 'users', compareField: 'code', filtering: [], data }));
  return app.app.inject({
    method: 'POST',
    url: `/api/v1/users/import?${query}`,
    payload: file.payload,
    headers: { ...file.headers, ...headers },
  });
};
const adminHeaders = (app: TestApp) => ({ authorization: `Bearer ${app.tokens.admin}` });
const editorHeaders = (app: TestApp) => ({ authorization: `Bearer ${app.tokens.editor}` });

describe("a refusal over a user's roles", () => {
  it('names only the roles the user record shows, never an access rule a group carries (which the caller may not read)', async () => {
    const secret = await aRule('SECRET_ROLE', 'Secret', 'logs', 'READ');
    await aRoleGroup('SECRET_G', 'Secret', secret.id);
    await aRule('USER_WRITER', 'Writes users', 'users', 'READ_WRITE');
    await aUser('hidden_member', { groups: ['SECRET_G'], roles: ['viewer'] });
    const writer = as(await bearer('w', ['USER_WRITER']));
    const refused = await writer('PATCH', '/api/v1/users/hidden_member', { description: 'x' });
    expect(refused.statusCode, refused.body).toBe(403);
    expect(refused.json<ErrorBody>().message).toMatch(/^The user holds viewer and 1 role\(s\) its groups carry, which you do not hold/);
    expect(refused.body).not.toContain('SECRET');
  });
});

describe('a user who holds a role the caller does not', () => {
  it('cannot be changed, disabled, deleted or imported over by it, by any route; its session goes on', async () => {
    await aUser('BOSS', { roles: ['admin'] });
    const boss = await session('BOSS');
    const editor = as(editorHeaders(t));
    const refused = [
      await editor('PATCH', '/api/v1/users/BOSS', { status: 'DISABLE' }),
      await editor('PATCH', '/api/v1/users/BOSS', { authentication: 'LDAP' }),
      await editor('PATCH', '/api/v1/users/BOSS', { description: 'harmless?' }),
      await editor('PUT', '/api/v1/users/BOSS', { ...(await record(t, 'BOSS')), status: 'DISABLE' }),
      await editor('PUT', '/api/v1/users/BOSS/password', { password: `${PASSWORD}-taken` }),
      await editor('DELETE', '/api/v1/users/BOSS'),
    ];
    for (const res of refused) expect([res.statusCode, res.json<ErrorBody>().code]).toEqual([403, 'AUTH.FORBIDDEN']);
    expect(refused[0]?.json<ErrorBody>().message).toMatch(/holds admin, which you do not hold/);
    const current = await record(t, 'BOSS');
    const applied = await editor('POST', '/api/v1/users/diff/apply?compareField=code', [
      { diffType: 'DIFF_TYPE_CHANGE', left: current, right: { ...current, status: 'DISABLE' } },
      { diffType: 'DIFF_TYPE_REMOVE', left: current },
    ]);
    expect(applied.json<Outcome[]>().map((o) => o.error?.code)).toEqual(['AUTH.FORBIDDEN', 'AUTH.FORBIDDEN']);
    const imported = await importUsers(
      t,
      [{ ...current, status: 'DISABLE' }],
      'save=true&compareField=code&allowMassRemove=true',
      editorHeaders(t),
    );
    expect(imported.statusCode, imported.body).toBe(200);
    expect(imported.json<Outcome[]>().find((o) => (o.right ?? o.left)?.code === 'BOSS')?.error?.code).toBe('AUTH.FORBIDDEN');
    expect(await record(t, 'BOSS')).toMatchObject({
      status: 'ENABLE',
      authentication: 'PASSWORD',
      auditInfo: { version: current.auditInfo.version },
    });
    expect((await t.call({ method: 'GET', url: '/api/v1/users/BOSS', headers: boss.headers, as: null })).statusCode).toBe(200);
  });

  it("keeps roles an admin's to grant, to anyone by any route, an editor's own record included", async () => {
    await aUser('plain-1');
    await aUser('ed-self', { roles: ['editor'] });
    const self = await session('ed-self');
    const editor = as(editorHeaders(t));
    expect((await editor('PATCH', '/api/v1/users/plain-1', { roles: ['admin'] })).statusCode).toBe(403);
    expect(
      (
        await t.call({
          method: 'PATCH',
          url: '/api/v1/users/ed-self',
          payload: { roles: ['editor', 'admin'] },
          headers: self.headers,
          as: null,
        })
      ).statusCode,
    ).toBe(403);
    const current = await record(t, 'plain-1');
    expect((await editor('PUT', '/api/v1/users/plain-1', { ...current, roles: ['admin'] })).statusCode).toBe(403);
    const applied = await editor('POST', '/api/v1/users/diff/apply?compareField=code', [
      { diffType: 'DIFF_TYPE_CHANGE', left: current, right: { ...current, roles: ['admin'] } },
    ]);
    expect(applied.json<Outcome[]>()[0]?.error?.code).toBe('AUTH.FORBIDDEN');
    const imported = await importUsers(
      t,
      [{ ...current, roles: ['admin'] }],
      'save=true&compareField=code&allowMassRemove=true',
      editorHeaders(t),
    );
    expect(imported.json<Outcome[]>().find((o) => o.right?.code === 'plain-1')?.error?.code).toBe('AUTH.FORBIDDEN');
    expect((await record(t, 'plain-1')).roles).toBeUndefined();
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/plain-1', payload: { roles: ['admin'] } })).statusCode).toBe(200);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/plain-1', payload: { roles: [] } })).statusCode).toBe(200);
  });

  it("is one an editor still changes when it holds every role: viewers, editors, access rules' roles", async () => {
    const rule = await aRule('USERS_RW', 'Writes users', 'users', 'READ_WRITE');
    await aRoleGroup('RW_GROUP', 'Writers', rule.id);
    await aUser('held-viewer', { roles: ['viewer'] });
    await aUser('held-editor', { roles: ['editor'] });
    await aUser('held-rule', { groups: ['RW_GROUP'] });
    await aUser('held-auditor', { roles: ['auditor'] });
    await aRule('USERS_R', 'Reads users', 'users', 'READ');
    await aUser('held-other-rule', { roles: ['USERS_R'] });
    const editor = as(editorHeaders(t));
    for (const code of ['held-viewer', 'held-editor', 'held-rule', 'held-other-rule'])
      expect((await editor('PATCH', `/api/v1/users/${code}`, { status: 'DISABLE' })).statusCode, code).toBe(200);
    expect((await editor('PATCH', '/api/v1/users/held-auditor', { status: 'DISABLE' })).statusCode).toBe(403);
    // A caller writing users through an access rule holds that rule's role and no built-in one.
    const ruled = as(await bearer('rule-writer', ['USERS_RW']));
    expect((await ruled('PATCH', '/api/v1/users/held-rule', { description: 'x' })).statusCode).toBe(200);
    expect((await ruled('PATCH', '/api/v1/users/held-viewer', { description: 'x' })).statusCode).toBe(403);
    expect((await ruled('PATCH', '/api/v1/users/held-other-rule', { description: 'x' })).statusCode).toBe(403);
  });
});

describe('a group that carries a role', () => {
  it("gains or loses a member, or its role, only by an admin's change, by any route; other groups stay an editor's", async () => {
    const rule = await aRule('CARRIED', 'Carried', 'users', 'READ');
    const other = await aRule('CARRIED_2', 'Carried 2', 'users', 'READ');
    await aRoleGroup('CARRIER', 'Carrier', rule.id);
    await created('/api/v1/user-groups', { code: 'NO_ROLE', name: 'No role', type: 'TEAM', chars: {} });
    await aUser('member', { groups: ['CARRIER', 'NO_ROLE'] });
    await aUser('outsider');
    const editor = as(editorHeaders(t));
    const refusals = [
      await editor('PATCH', '/api/v1/users/member', { groups: ['NO_ROLE'] }),
      await editor('PUT', '/api/v1/users/member', { ...(await record(t, 'member')), groups: [] }),
      await editor('PATCH', '/api/v1/users/outsider', { groups: ['CARRIER'] }),
      await editor('PATCH', '/api/v1/user-groups/CARRIER', { associatedUserRoleId: other.id }),
      await editor('PATCH', '/api/v1/user-groups/CARRIER', { associatedUserRoleId: null }),
      await editor('PATCH', '/api/v1/user-groups/NO_ROLE', { associatedUserRoleId: rule.id }),
    ];
    for (const res of refusals) expect([res.statusCode, res.json<ErrorBody>().code], res.body).toEqual([403, 'AUTH.FORBIDDEN']);
    expect(refusals[0]?.json<ErrorBody>().message).toBe('Only an admin may remove a user from CARRIER: the group grants a role');
    const member = await record(t, 'member');
    const applied = await t.call({
      method: 'POST',
      url: '/api/v1/users/diff/apply?compareField=code',
      payload: [{ diffType: 'DIFF_TYPE_CHANGE', left: member, right: { ...member, groups: [] } }],
      headers: editorHeaders(t),
      as: null,
    });
    expect(applied.json<Outcome[]>()[0]?.error?.code).toBe('AUTH.FORBIDDEN');
    // A group that carries no role, and the user's other fields, stay an editor's to change.
    expect((await editor('PATCH', '/api/v1/users/member', { groups: ['CARRIER'], description: 'kept' })).statusCode).toBe(200);
    expect((await editor('PATCH', '/api/v1/users/outsider', { groups: ['NO_ROLE'] })).statusCode).toBe(200);
    const imported = await importUsers(
      t,
      [{ ...(await record(t, 'member')), groups: [] }],
      'save=true&compareField=code&allowMassRemove=true',
      editorHeaders(t),
    );
    expect(imported.json<Outcome[]>().find((o) => o.right?.code === 'member')?.error?.code).toBe('AUTH.FORBIDDEN');
    expect((await t.call({ method: 'GET', url: '/api/v1/users/member?expand=ROLES' })).json()).toMatchObject({
      groups: ['CARRIER'],
      roles: ['CARRIED'],
      auditInfo: { version: 1 },
    });
    // An admin's change is the way.
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/member', payload: { groups: [] } })).statusCode).toBe(200);
    expect((await t.call({ method: 'GET', url: '/api/v1/users/member?expand=ROLES' })).json<Rec>().roles ?? []).toEqual([]);
  });
});

describe('a change judged on the user as it is', () => {
  it('applies every one of concurrent changes without If-Match, each judged on the version it applies to', async () => {
    await aUser('busy', { roles: ['viewer'] });
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        t.call({ method: 'PATCH', url: '/api/v1/users/busy', payload: { description: `edit ${String(i)}` }, as: 'editor' }),
      ),
    );
    expect(answers.map((a) => a.statusCode)).toEqual(Array<number>(8).fill(200));
    expect((await record(t, 'busy')).auditInfo.version).toBe(8);
  });
});

describe('the last enabled admin', () => {
  it('stays one: no disable, delete, removal, expiry, demotion or move off PASSWORD, by anyone, until another who can log in is one', async () => {
    const own = await startIdentityApp();
    try {
      const call = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
        own.call({ method, url, ...(payload === undefined ? {} : { payload }) });
      const make = async (code: string, extra: Record<string, unknown> = {}, password = true) => {
        expect((await call('POST', '/api/v1/users', { code, type: 'INDIVIDUAL', givenName: code, chars: {}, ...extra })).statusCode).toBe(
          201,
        );
        if (password) expect((await call('PUT', `/api/v1/users/${code}/password`, { password: PASSWORD })).statusCode).toBe(204);
      };
      await make('root', { roles: ['admin'] });
      // Admins that cannot log in, each for one reason the login refuses them: they do not count.
      await make('off-admin', { roles: ['admin'], status: 'DISABLE' });
      await make('old-admin', { roles: ['admin'], validTo: '2020-01-01' });
      // A password is set only on PASSWORD; moved to LDAP since, it keeps one that no login takes.
      await make('dir-admin', { roles: ['admin'] });
      expect((await call('PATCH', '/api/v1/users/dir-admin', { authentication: 'LDAP' })).statusCode).toBe(200);
      await make('no-password-admin', { roles: ['admin'] }, false);
      for (const code of ['off-admin', 'old-admin', 'dir-admin', 'no-password-admin']) {
        expect(
          (await own.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username: code, password: PASSWORD }, as: null }))
            .statusCode,
          code,
        ).toBe(401);
      }
      const root = await record(own, 'root');
      const refused = [
        await call('PATCH', '/api/v1/users/root', { status: 'DISABLE' }),
        await call('PUT', '/api/v1/users/root', { ...root, status: 'DISABLE' }),
        await call('PATCH', '/api/v1/users/root', { validTo: '2020-01-01' }),
        await call('PATCH', '/api/v1/users/root', { roles: ['editor'] }),
        await call('PATCH', '/api/v1/users/root', { authentication: 'LDAP' }),
        await call('DELETE', '/api/v1/users/root'),
      ];
      for (const res of refused) expect([res.statusCode, res.json<ErrorBody>().code]).toEqual([409, 'USER.LAST_ADMIN']);
      const applied = await call('POST', '/api/v1/users/diff/apply?compareField=code', [{ diffType: 'DIFF_TYPE_REMOVE', left: root }]);
      expect(applied.json<Outcome[]>()[0]?.error?.code).toBe('USER.LAST_ADMIN');
      const imported = await importUsers(
        own,
        [await record(own, 'off-admin')],
        'save=true&compareField=code&allowMassRemove=true',
        adminHeaders(own),
      );
      expect(imported.json<Outcome[]>().find((o) => o.left?.code === 'root')?.error?.code).toBe('USER.LAST_ADMIN');
      expect(await record(own, 'root')).toMatchObject({ status: 'ENABLE', roles: ['admin'], auditInfo: { version: 1 } });
      expect((await call('PATCH', '/api/v1/users/root', { description: 'still here' })).statusCode).toBe(200);
      // With a second one, either may go, not both; two demoting each other at once: one wins.
      await make('second', { roles: ['admin'] });
      const both = await Promise.all([
        call('PATCH', '/api/v1/users/root', { status: 'DISABLE' }),
        call('PATCH', '/api/v1/users/second', { status: 'DISABLE' }),
      ]);
      expect(both.map((r) => r.statusCode).sort()).toEqual([200, 409]);
      const [kept] = ['root', 'second'].filter((_, i) => both[i]?.statusCode === 409);
      expect((await call('DELETE', `/api/v1/users/${String(kept)}`)).statusCode).toBe(409);
      // An admin that is not enabled is not held back.
      expect((await call('DELETE', '/api/v1/users/off-admin')).statusCode).toBe(204);
    } finally {
      await own.close();
    }
  });
});
