// Records a caller may not read (access rules with row-level expressions) leak through no answer
// about other records: a 409 STILL_REFERENCED counts every record that names the one changed but
// names only those the caller may read, on each restricting reference; a diff entry touching a
// hidden record answers what the plain create, replace or delete would, never its content; a diff
// computed by the caller compares with the records it may read.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { startTestApp, TEST_SECRET, type TestApp, type TestResponse } from '../../support/testApp.ts';

type ErrorBody = { status: number; code: string; message: string; errors: string[] };
type Group = { id: string; code: string; name: string; auditInfo: { version: number; whoInserted: string } };

let t: TestApp;
const ids: Record<string, string> = {};
const base = '/api/v1/user-groups';

const admin = (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown) =>
  t.call({ method, url, ...(payload === undefined ? {} : { payload }) });

async function created(url: string, payload: Record<string, unknown>): Promise<string> {
  const res = await admin('POST', url, payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string }>().id;
}

const rule = async (code: string, extra: Record<string, unknown>) => {
  const res = await admin('POST', '/api/v1/access-rules', { code, name: code, fullAccess: false, ...extra });
  expect(res.statusCode, res.body).toBe(201);
};

const as = async (roles: string[]) => {
  const token = await signHs256(TEST_SECRET, { sub: `caller-${roles.join('+')}`, roles });
  return (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown): Promise<TestResponse> =>
    t.call({ method, url, ...(payload === undefined ? {} : { payload }), headers: { authorization: `Bearer ${token}` }, as: null });
};

const publicLike = JSON.stringify([{ column: 'name', operator: 'LIKE', value: 'Public%' }]);

beforeAll(async () => {
  t = await startTestApp();
  await created('/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' });
  await created('/api/v1/user-group-types', { code: 'TEAM', name: 'Team', registry: {} });
  await created('/api/v1/user-group-types', { code: 'T_USED', name: 'Used', registry: {} });
  ids.R_PUB = await created(base, { code: 'R_PUB', name: 'Public root', type: 'TEAM', chars: {} });
  ids.R_PUB_CHILD = await created(base, {
    code: 'R_PUB_CHILD',
    name: 'Public child',
    type: 'TEAM',
    chars: {},
    parentUserGroupId: ids.R_PUB,
  });
  ids.R_HIDDEN_CHILD = await created(base, {
    code: 'R_HIDDEN_CHILD',
    name: 'Secret child',
    type: 'TEAM',
    chars: {},
    parentUserGroupId: ids.R_PUB,
  });
  ids.R_SECRET = await created(base, { code: 'R_SECRET', name: 'Secret', type: 'TEAM', chars: {}, description: 'the hidden one' });
  ids.R_HIDDEN_USER = await created('/api/v1/users', {
    code: 'R_HIDDEN_USER',
    type: 'INDIVIDUAL',
    givenName: 'H',
    chars: {},
    groups: ['R_PUB'],
  });
  ids.assignment = await created('/api/v1/user-group-regions', { userGroupId: ids.R_PUB, regionId: randomUUID() });
  // The type is named by two groups: one public, one hidden from a caller reading public groups.
  ids.T_PUB = await created(base, { code: 'T_PUB', name: 'Public typed', type: 'T_USED', chars: {} });
  ids.T_HIDDEN = await created(base, { code: 'T_HIDDEN', name: 'Secret typed', type: 'T_USED', chars: {} });
  // Users some callers may read (V_…) and some they may not (H_…).
  ids.V_BOSS = await created('/api/v1/users', { code: 'V_BOSS', type: 'INDIVIDUAL', givenName: 'B', chars: {} });
  ids.V_SUB = await created('/api/v1/users', { code: 'V_SUB', type: 'INDIVIDUAL', givenName: 'S', chars: {}, supervisorId: ids.V_BOSS });
  for (const code of ['H_SUB1', 'H_SUB2'])
    ids[code] = await created('/api/v1/users', { code, type: 'INDIVIDUAL', givenName: 'S', chars: {}, supervisorId: ids.V_BOSS });
  await rule('RW_PUBLIC_GROUPS', { entityName: 'user-groups', accessRule: 'READ_WRITE', expression: publicLike });
  await rule('RW_GROUP_TYPES', { entityName: 'user-group-types', accessRule: 'READ_WRITE', fullAccess: true });
  await rule('RW_VISIBLE_USERS', {
    entityName: 'users',
    accessRule: 'READ_WRITE',
    expression: JSON.stringify([{ column: 'code', operator: 'LIKE', value: 'V_%' }]),
  });
  await rule('R_ALL_USERS', { entityName: 'users', accessRule: 'READ', fullAccess: true });
});
afterAll(async () => {
  await t.close();
});

/** What of an answer's text may not appear: every name of the records the caller may not read. */
const hiddenNames = (...codes: string[]) => codes.flatMap((c) => [c, ids[c] ?? c]);

function expectNoneOf(text: string, secrets: readonly string[]): void {
  for (const secret of secrets) expect(text, `the answer names ${secret}`).not.toContain(secret);
}

/** A 409 STILL_REFERENCED of a resource with exactly these lines, naming none of the secrets. */
function expectReferenced(res: TestResponse, resource: string, lines: readonly string[], secrets: readonly string[]): void {
  expect(res.statusCode, res.body).toBe(409);
  expect(res.json<ErrorBody>()).toMatchObject({ code: `${resource}.STILL_REFERENCED`, errors: lines });
  expectNoneOf(res.body, secrets);
}

describe('409 STILL_REFERENCED counts every referrer and names only those the caller may read', () => {
  it('a code change of a group users name (users.groups by code), for a caller with no access to users', async () => {
    const call = await as(['RW_PUBLIC_GROUPS']);
    const res = await call('PATCH', `${base}/R_PUB`, { code: 'R_PUB2' });
    expectReferenced(res, 'USER_GROUP', ['users.groups: 1 User record(s) name it (1 you may not read)'], hiddenNames('R_HIDDEN_USER'));
  });

  it('a delete of a group named by a hidden child group, hidden region assignments and hidden users; readable children named', async () => {
    const call = await as(['RW_PUBLIC_GROUPS']);
    const res = await call('DELETE', `${base}/R_PUB`);
    const lines = [
      'user-groups.parentUserGroupId: 2 UserGroup record(s) name it (R_PUB_CHILD; 1 you may not read)',
      'users.groups: 1 User record(s) name it (1 you may not read)',
      'user-group-regions.userGroupId: 1 UserGroupRegion record(s) name it (1 you may not read)',
    ];
    expectReferenced(res, 'USER_GROUP', lines, hiddenNames('R_HIDDEN_CHILD', 'R_HIDDEN_USER', 'assignment'));
  });

  it("names what another resource's rule lets the caller read (users), and everything to a caller reading all", async () => {
    const both = await as(['RW_PUBLIC_GROUPS', 'R_ALL_USERS']);
    const res = await both('DELETE', `${base}/R_PUB`);
    expect(res.json<ErrorBody>().errors).toContain('users.groups: 1 User record(s) name it (R_HIDDEN_USER)');
    const full = await admin('DELETE', `${base}/R_PUB`);
    expect(full.statusCode).toBe(409);
    expect(full.json<ErrorBody>().errors).toEqual([
      'user-groups.parentUserGroupId: 2 UserGroup record(s) name it (R_HIDDEN_CHILD, R_PUB_CHILD)',
      'users.groups: 1 User record(s) name it (R_HIDDEN_USER)',
      `user-group-regions.userGroupId: 1 UserGroupRegion record(s) name it (${ids.assignment ?? ''})`,
    ]);
  });

  it('a delete or a code change of a user group type named by groups the caller may not read (a types-only rule)', async () => {
    const call = await as(['RW_GROUP_TYPES']);
    const lines = ['user-groups.type: 2 UserGroup record(s) name it (2 you may not read)'];
    expectReferenced(await call('DELETE', '/api/v1/user-group-types/T_USED'), 'USER_GROUP_TYPE', lines, hiddenNames('T_PUB', 'T_HIDDEN'));
    expectReferenced(
      await call('PATCH', '/api/v1/user-group-types/T_USED', { code: 'T_USED2' }),
      'USER_GROUP_TYPE',
      lines,
      hiddenNames('T_PUB', 'T_HIDDEN'),
    );
    const withGroups = await as(['RW_GROUP_TYPES', 'RW_PUBLIC_GROUPS']);
    expect((await withGroups('DELETE', '/api/v1/user-group-types/T_USED')).json<ErrorBody>().errors).toEqual([
      'user-groups.type: 2 UserGroup record(s) name it (T_PUB; 1 you may not read)',
    ]);
  });

  it('a delete of a user that hidden users name as their supervisor', async () => {
    const call = await as(['RW_VISIBLE_USERS']);
    const res = await call('DELETE', '/api/v1/users/V_BOSS');
    expectReferenced(
      res,
      'USER',
      ['users.supervisorId: 3 User record(s) name it (V_SUB; 2 you may not read)'],
      hiddenNames('H_SUB1', 'H_SUB2'),
    );
  });

  it('counts past the five it names', async () => {
    const boss = await created('/api/v1/users', { code: 'V_BIG_BOSS', type: 'INDIVIDUAL', givenName: 'B', chars: {} });
    for (let i = 0; i < 7; i++)
      await created('/api/v1/users', { code: `V_M${String(i)}`, type: 'INDIVIDUAL', givenName: 'M', chars: {}, supervisorId: boss });
    for (let i = 0; i < 3; i++)
      await created('/api/v1/users', { code: `H_M${String(i)}`, type: 'INDIVIDUAL', givenName: 'M', chars: {}, supervisorId: boss });
    const res = await (await as(['RW_VISIBLE_USERS']))('DELETE', '/api/v1/users/V_BIG_BOSS');
    expect(res.statusCode, res.body).toBe(409);
    const [line] = res.json<ErrorBody>().errors;
    expect(line).toMatch(/^users\.supervisorId: 10 User record\(s\) name it \((V_M\d, ){5}…; 3 you may not read\)$/);
    expect(res.body).not.toMatch(/H_M\d/);
  });
});

describe('the other errors about other records name only what the request sent', () => {
  it('a taken code, a taken directory group, a taken id, a hidden parent and a cycle through hidden groups', async () => {
    const call = await as(['RW_PUBLIC_GROUPS']);
    const secretDn = 'CN=Hidden Team, OU=Secret';
    const secret = await created(base, { code: 'R_DN_HIDDEN', name: 'Secret directory', type: 'TEAM', chars: {}, ldapMemberOf: secretDn });
    const code = await call('PATCH', `${base}/R_PUB_CHILD`, { code: 'R_DN_HIDDEN' });
    expect([code.statusCode, code.json<ErrorBody>().code]).toEqual([409, 'USER_GROUP.CODE_TAKEN']);
    const dn = await call('POST', base, {
      code: 'R_DN_MINE',
      name: 'Public directory',
      type: 'TEAM',
      chars: {},
      ldapMemberOf: 'cn=hidden team,ou=secret',
    });
    expect([dn.statusCode, dn.json<ErrorBody>().code]).toEqual([409, 'USER_GROUP.LDAP_MEMBER_OF_TAKEN']);
    expect(dn.body).not.toContain(secretDn);
    const id = await call('POST', base, { id: secret, code: 'R_ID_MINE', name: 'Public id', type: 'TEAM', chars: {} });
    expect([id.statusCode, id.json<ErrorBody>().code]).toEqual([409, 'USER_GROUP.ALREADY_EXISTS']);
    const parent = await call('POST', base, {
      code: 'R_UNDER_HIDDEN',
      name: 'Public under',
      type: 'TEAM',
      chars: {},
      parentUserGroupId: secret,
    });
    expect([parent.statusCode, parent.json<ErrorBody>().code]).toEqual([422, 'USER_GROUP.REFERENCE_NOT_FOUND']);
    // Public top → Secret middle → Public bottom: moving top under bottom closes a cycle through the hidden group.
    const top = await created(base, { code: 'R_CY_TOP', name: 'Public top', type: 'TEAM', chars: {} });
    const middle = await created(base, { code: 'R_CY_MIDDLE', name: 'Secret middle', type: 'TEAM', chars: {}, parentUserGroupId: top });
    const bottom = await created(base, { code: 'R_CY_BOTTOM', name: 'Public bottom', type: 'TEAM', chars: {}, parentUserGroupId: middle });
    const cycle = await call('PATCH', `${base}/R_CY_TOP`, { parentUserGroupId: bottom });
    expect([cycle.statusCode, cycle.json<ErrorBody>().code]).toEqual([422, 'USER_GROUP.REFERENCE_CYCLE']);
    expectNoneOf(code.body, ['Secret', secret]);
    for (const res of [dn, id, parent, cycle]) expectNoneOf(res.body, ['Secret', 'R_DN_HIDDEN', 'R_CY_MIDDLE', middle]);
  });
});

/** The parts of an error body two requests answering alike share (not their trace or time). */
const errorOf = (body: ErrorBody) => ({ status: body.status, code: body.code, message: body.message, errors: body.errors });

describe('diff/apply, export/diff and import treat a record the caller may not read as the plain requests do', () => {
  const secret = async (): Promise<Group> => (await admin('GET', `${base}/R_SECRET`)).json<Group>();

  /** The one item diff/apply answers for one entry, as the caller. */
  async function applied(entry: Record<string, unknown>, compareField = 'id'): Promise<Record<string, unknown>> {
    const res = await (await as(['RW_PUBLIC_GROUPS']))('POST', `${base}/diff/apply?compareField=${compareField}`, [entry]);
    expect(res.statusCode, res.body).toBe(200);
    const [item] = res.json<Record<string, unknown>[]>();
    if (item === undefined) throw new Error('no item');
    return item;
  }

  it("NEW with the id of a hidden record, differing or equal to it: the plain create's 409, never the record", async () => {
    const hidden = await secret();
    const plain = await (await as(['RW_PUBLIC_GROUPS']))('POST', base, { ...hidden, name: 'Public now' });
    expect(plain.statusCode).toBe(409);
    for (const right of [{ ...hidden, name: 'Public now' }, hidden]) {
      const item = await applied({ diffType: 'DIFF_TYPE_NEW', right });
      expect(item).not.toHaveProperty('auditInfo');
      expect(errorOf(item.error as ErrorBody)).toEqual(errorOf(plain.json<ErrorBody>()));
      expect(JSON.stringify(item)).not.toContain(hidden.auditInfo.whoInserted);
    }
    expect((await secret()).auditInfo.version).toBe(hidden.auditInfo.version);
  });

  it("NEW matched by the code of a hidden record: the plain create's 409 CODE_TAKEN", async () => {
    const hidden = await secret();
    const right = { code: hidden.code, name: 'Public too', type: 'TEAM', chars: {} };
    const plain = await (await as(['RW_PUBLIC_GROUPS']))('POST', base, right);
    expect(plain.json<ErrorBody>().code).toBe('USER_GROUP.CODE_TAKEN');
    const item = await applied({ diffType: 'DIFF_TYPE_NEW', right }, 'code');
    expect(errorOf(item.error as ErrorBody)).toEqual(errorOf(plain.json<ErrorBody>()));
  });

  it("CHANGE and REMOVE of a hidden record: the plain replace's and delete's 404, naming what the entry named", async () => {
    const hidden = await secret();
    const call = await as(['RW_PUBLIC_GROUPS']);
    const put = await call('PUT', `${base}/${hidden.id}`, { ...hidden, name: 'Public now' });
    const del = await call('DELETE', `${base}/${hidden.id}`);
    expect([put.statusCode, del.statusCode]).toEqual([404, 404]);
    const change = await applied({ diffType: 'DIFF_TYPE_CHANGE', left: hidden, right: { ...hidden, name: 'Public now' } });
    expect(errorOf(change.error as ErrorBody)).toEqual(errorOf(put.json<ErrorBody>()));
    const remove = await applied({ diffType: 'DIFF_TYPE_REMOVE', left: hidden });
    expect(errorOf(remove.error as ErrorBody)).toEqual(errorOf(del.json<ErrorBody>()));
    const byCode = await call('DELETE', `${base}/${hidden.code}`);
    const removeByCode = await applied({ diffType: 'DIFF_TYPE_REMOVE', left: hidden }, 'code');
    expect(errorOf(removeByCode.error as ErrorBody)).toEqual(errorOf(byCode.json<ErrorBody>()));
    expect((await secret()).auditInfo.version).toBe(hidden.auditInfo.version);
  });

  it('a REMOVE of a record the caller may read still deletes it, and a record named by others answers the 409 the caller may see', async () => {
    const call = await as(['RW_PUBLIC_GROUPS']);
    const root = (await admin('GET', `${base}/R_PUB`)).json<Group>();
    const item = await applied({ diffType: 'DIFF_TYPE_REMOVE', left: root });
    const plain = await call('DELETE', `${base}/R_PUB`);
    expect(errorOf(item.error as ErrorBody)).toEqual(errorOf(plain.json<ErrorBody>()));
    expectNoneOf(JSON.stringify(item), hiddenNames('R_HIDDEN_CHILD', 'R_HIDDEN_USER', 'assignment'));
    const lone = await created(base, { code: 'R_PUB_LONE', name: 'Public lone', type: 'TEAM', chars: {} });
    const removed = await applied({ diffType: 'DIFF_TYPE_REMOVE', left: (await admin('GET', `${base}/${lone}`)).json() });
    expect(removed).toMatchObject({ id: lone, code: 'R_PUB_LONE' });
    expect((await admin('GET', `${base}/${lone}`)).statusCode).toBe(404);
  });

  it('matching by a field a hidden record shares is no clash: only the records the caller may read are matched', async () => {
    await rule('RW_OPEN_GROUPS', {
      entityName: 'user-groups',
      accessRule: 'READ_WRITE',
      expression: JSON.stringify([{ column: 'description', operator: 'EQ', value: 'open' }]),
    });
    const open = await created(base, { code: 'D_OPEN', name: 'Twin', description: 'open', type: 'TEAM', chars: {} });
    await created(base, { code: 'D_SHUT', name: 'Twin', description: 'shut', type: 'TEAM', chars: {} });
    const current = (await admin('GET', `${base}/${open}`)).json<Group>();
    const res = await (
      await as(['RW_OPEN_GROUPS'])
    )('POST', `${base}/diff/apply?compareField=name`, [
      { diffType: 'DIFF_TYPE_CHANGE', left: current, right: { ...current, email: 'twin@example.com' } },
    ]);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<Record<string, unknown>[]>()[0]).toMatchObject({ id: open, email: 'twin@example.com' });
    expect(res.body).not.toContain('D_SHUT');
  });

  it('export/diff and a dry-run import compare with the records the caller may read: no REMOVE of a hidden one, no CHANGE showing it', async () => {
    const hidden = await secret();
    const call = await as(['RW_PUBLIC_GROUPS']);
    const exported = { data: [{ ...hidden, name: 'Public now' }], filtering: [], compareField: 'id' };
    const diff = await call('POST', `${base}/export/diff`, exported);
    expect(diff.statusCode, diff.body).toBe(200);
    const entries = diff.json<{ diffType: string; left?: Group; right?: Group }[]>();
    const removed = entries.filter((e) => e.diffType === 'DIFF_TYPE_REMOVE').map((e) => e.left?.code);
    expect(removed).toEqual(expect.arrayContaining(['R_PUB', 'R_PUB_CHILD', 'T_PUB']));
    for (const e of entries) if (e.left !== undefined) expect(e.left.name).toMatch(/^Public/);
    expect(entries.find((e) => e.right?.id === hidden.id)).toEqual({ diffType: 'DIFF_TYPE_NEW', right: { ...hidden, name: 'Public now' } });
    expectNoneOf(diff.body, ['Secret', ...hiddenNames('R_HIDDEN_CHILD', 'T_HIDDEN')]);
    const boundary = `----test${randomUUID()}`;
    const file = JSON.stringify(exported);
    const token = await signHs256(TEST_SECRET, { sub: 'caller-import', roles: ['RW_PUBLIC_GROUPS'] });
    const imported = await t.app.inject({
      method: 'POST',
      url: `${base}/import`,
      payload: `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="e.json"\r\nContent-Type: application/json\r\n\r\n${file}\r\n--${boundary}--\r\n`,
      headers: { 'content-type': `multipart/form-data; boundary=${boundary}`, authorization: `Bearer ${token}` },
    });
    expect(imported.statusCode, imported.body).toBe(200);
    expect(imported.json()).toEqual(entries);
  });
});
