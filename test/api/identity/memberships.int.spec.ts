// Membership operations on the real HTTP service and the embedded stores: PUT and DELETE
// /users/{userId}/groups/{groupIdOrCode} (one event each, 204 also when nothing changes) and POST
// /user-groups/{idOrCode}/members (many users, judged whole before any is written). Concurrent
// additions to one user never lose one another; the users of a group and the groups of a user
// reflect a change at its answer's position; the rules of `groups` in a replace or patch hold here.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { readModelDocuments, startTestApp, TEST_SECRET, type TestApp, type TestResponse } from '../../support/testApp.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type User = { id: string; code: string; groups?: string[]; auditInfo: { version: number } };
type ErrorBody = { code: string; errors: string[] };

let t: TestApp;
let n = 0;
const fresh = (prefix: string) => `${prefix}-${String(++n)}`;

const call = (
  method: Method,
  url: string,
  payload?: unknown,
  as: 'admin' | 'editor' | 'viewer' = 'admin',
  headers?: Record<string, string>,
) => t.call({ method, url, as, ...(payload === undefined ? {} : { payload }), ...(headers === undefined ? {} : { headers }) });

async function made(url: string, payload: Record<string, unknown>): Promise<{ id: string; code: string }> {
  const res = await call('POST', url, payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

const aGroup = (extra: Record<string, unknown> = {}) =>
  made('/api/v1/user-groups', { code: fresh('G'), name: 'Group', type: 'TEAM', chars: {}, ...extra });
const aUser = (extra: Record<string, unknown> = {}) =>
  made('/api/v1/users', { code: fresh('u'), type: 'INDIVIDUAL', givenName: 'M', chars: {}, ...extra });
/** A group whose members receive an access rule's role. */
async function aRoleGroup(): Promise<{ id: string; code: string }> {
  const rule = await made('/api/v1/access-rules', {
    code: fresh('RULE'),
    name: 'r',
    fullAccess: true,
    entityName: 'users',
    accessRule: 'READ',
  });
  return aGroup({ associatedUserRoleId: rule.id });
}
const userNow = async (id: string) => (await call('GET', `/api/v1/users/${id}`)).json<User>();
const position = (res: TestResponse) => String(res.headers['x-event-position']);

/** A caller with these roles (access rules' codes among them). */
const as = async (roles: string[]) => {
  const token = await signHs256(TEST_SECRET, { sub: `caller-${roles.join('+')}`, roles });
  return (method: Method, url: string, payload?: unknown): Promise<TestResponse> =>
    t.call({ method, url, ...(payload === undefined ? {} : { payload }), headers: { authorization: `Bearer ${token}` }, as: null });
};

beforeAll(async () => {
  t = await startTestApp();
  await made('/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' });
  await made('/api/v1/user-group-types', { code: 'TEAM', name: 'Team', registry: {} });
});
afterAll(async () => {
  await t.close();
});

describe('PUT and DELETE /users/{userId}/groups/{groupIdOrCode}', () => {
  it('adds and removes one membership, each one event, read back at the answer position', async () => {
    const group = await aGroup();
    const u = await aUser();
    const added = await call('PUT', `/api/v1/users/${u.code}/groups/${group.id}`);
    expect(added.statusCode, added.body).toBe(204);
    expect(added.headers.etag).toBe('"1"');
    const at = position(added);
    const groupsOfUser = await call('GET', `/api/v1/users/${u.id}/groups?minPosition=${at}`, undefined, 'viewer');
    expect(groupsOfUser.json<{ code: string }[]>().map((g) => g.code)).toEqual([group.code]);
    const usersOfGroup = await call('GET', `/api/v1/user-groups/${group.code}/users?minPosition=${at}`, undefined, 'viewer');
    expect(usersOfGroup.json<User[]>().map((m) => m.id)).toEqual([u.id]);
    const byUsers = await call('POST', `/api/v1/user-groups/by-users?minPosition=${at}`, { userIds: [u.id] });
    expect(byUsers.json<Record<string, { code: string }[]>>()[u.id]?.map((g) => g.code)).toEqual([group.code]);

    // Again: nothing changes, nothing is written.
    const again = await call('PUT', `/api/v1/users/${u.id}/groups/${group.code}`);
    expect(again.statusCode).toBe(204);
    expect(again.headers.etag).toBe('"1"');
    expect(position(again)).toBe(at);

    const removed = await call('DELETE', `/api/v1/users/${u.id}/groups/${group.code}`);
    expect(removed.statusCode, removed.body).toBe(204);
    expect(removed.headers.etag).toBe('"2"');
    const after = position(removed);
    expect((await call('GET', `/api/v1/users/${u.id}/groups?minPosition=${after}`)).json()).toEqual([]);
    expect((await call('GET', `/api/v1/user-groups/${group.code}/users?minPosition=${after}`)).json()).toEqual([]);
    const removedAgain = await call('DELETE', `/api/v1/users/${u.id}/groups/${group.code}`);
    expect(removedAgain.statusCode).toBe(204);
    expect(removedAgain.headers.etag).toBe('"2"');

    const history = await call('GET', `/api/v1/users/${u.id}/history`);
    expect(history.statusCode, history.body).toBe(200);
    const entries = history.json<{ type: string; data: unknown; changes: unknown }[]>();
    expect(entries.map((e) => e.type)).toEqual(['UserCreated', 'UserAddedToGroup', 'UserRemovedFromGroup']);
    expect(entries[1]?.data).toEqual({ group: group.code });
    const audit = await call('GET', `/api/v1/audit/events?streams=user-${u.id}`);
    expect(audit.statusCode, audit.body).toBe(200);
    expect(JSON.stringify(audit.json())).toContain('UserAddedToGroup');
  });

  it('never loses one of many concurrent additions to one user', async () => {
    const u = await aUser({ groups: [] });
    const groups = await Promise.all(Array.from({ length: 24 }, () => aGroup()));
    const answers = await Promise.all(groups.map((g) => call('PUT', `/api/v1/users/${u.id}/groups/${g.code}`)));
    expect(answers.map((a) => a.statusCode)).toEqual(groups.map(() => 204));
    const now = await userNow(u.id);
    expect(new Set(now.groups)).toEqual(new Set(groups.map((g) => g.code)));
    expect(now.auditInfo.version).toBe(groups.length);
    // And as many concurrent removals of a user's groups, over real HTTP this time.
    await t.listen();
    const left = await Promise.all(groups.map((g) => call('DELETE', `/api/v1/users/${u.code}/groups/${g.id}`)));
    expect(left.map((a) => a.statusCode)).toEqual(groups.map(() => 204));
    expect((await userNow(u.id)).groups).toEqual([]);
  });

  it('never leaves a user naming a group deleted while users joined it', async () => {
    for (let round = 0; round < 5; round++) {
      const group = await aGroup();
      const users = await Promise.all(Array.from({ length: 8 }, () => aUser()));
      const [deleted, ...joins] = await Promise.all([
        call('DELETE', `/api/v1/user-groups/${group.id}`),
        ...users.map((u) => call('PUT', `/api/v1/users/${u.id}/groups/${group.code}`)),
      ]);
      expect([204, 409]).toContain(deleted.statusCode);
      for (const j of joins) expect([204, 404, 422], j.body).toContain(j.statusCode);
      const members = (await Promise.all(users.map((u) => userNow(u.id)))).filter((u) => u.groups?.includes(group.code) === true);
      if (deleted.statusCode === 204) expect(members).toEqual([]);
      else expect(members.length).toBeGreaterThan(0);
    }
  });

  it('answers 404 for an unknown user or group, and 412 for a stale If-Match', async () => {
    const group = await aGroup();
    const u = await aUser();
    const noUser = await call('PUT', `/api/v1/users/nobody-here/groups/${group.code}`);
    expect(noUser.statusCode).toBe(404);
    expect(noUser.json<ErrorBody>().code).toBe('USER.NOT_FOUND');
    const noGroup = await call('PUT', `/api/v1/users/${u.code}/groups/NO_SUCH_GROUP`);
    expect(noGroup.statusCode).toBe(404);
    expect(noGroup.json<ErrorBody>().code).toBe('USER_GROUP.NOT_FOUND');
    expect((await call('DELETE', `/api/v1/users/${u.code}/groups/NO_SUCH_GROUP`)).statusCode).toBe(404);
    const stale = await call('PUT', `/api/v1/users/${u.code}/groups/${group.code}`, undefined, 'admin', { 'if-match': '"7"' });
    expect(stale.statusCode, stale.body).toBe(412);
    expect((await userNow(u.id)).groups).toBeUndefined();
    const pinned = await call('PUT', `/api/v1/users/${u.code}/groups/${group.code}`, undefined, 'admin', { 'if-match': '"0"' });
    expect(pinned.statusCode, pinned.body).toBe(204);
  });

  it('answers a retry under the same Idempotency-Key as the first time', async () => {
    const [a, b] = [await aGroup(), await aGroup()];
    const u = await aUser();
    const key = { 'idempotency-key': fresh('key') };
    const first = await call('PUT', `/api/v1/users/${u.id}/groups/${a.code}`, undefined, 'admin', key);
    await call('PUT', `/api/v1/users/${u.id}/groups/${b.code}`);
    const retry = await call('PUT', `/api/v1/users/${u.id}/groups/${a.code}`, undefined, 'admin', key);
    expect(retry.statusCode).toBe(204);
    expect(position(retry)).toBe(position(first));
    expect(retry.headers.etag).toBe('"1"');
    const reused = await call('DELETE', `/api/v1/users/${u.id}/groups/${a.code}`, undefined, 'admin', key);
    expect(reused.statusCode, reused.body).toBe(409);
  });

  it('keeps a group that carries a role an admin’s to give and take, and a user holding a role its holders’ to change', async () => {
    const granting = await aRoleGroup();
    const plain = await aGroup();
    const u = await aUser();
    const byEditor = await call('PUT', `/api/v1/users/${u.id}/groups/${granting.code}`, undefined, 'editor');
    expect(byEditor.statusCode, byEditor.body).toBe(403);
    expect((await call('PUT', `/api/v1/users/${u.id}/groups/${granting.code}`)).statusCode).toBe(204);
    const leaveByEditor = await call('DELETE', `/api/v1/users/${u.id}/groups/${granting.code}`, undefined, 'editor');
    expect(leaveByEditor.statusCode, leaveByEditor.body).toBe(403);
    expect((await userNow(u.id)).groups).toEqual([granting.code]);
    // An editor adds a plain group to a user holding nothing it lacks, not to an auditor.
    expect((await call('PUT', `/api/v1/users/${u.id}/groups/${plain.code}`, undefined, 'editor')).statusCode).toBe(204);
    const auditor = await aUser({ roles: ['auditor'] });
    expect((await call('PUT', `/api/v1/users/${auditor.id}/groups/${plain.code}`, undefined, 'editor')).statusCode).toBe(403);
    expect((await call('PUT', `/api/v1/users/${u.id}/groups/${plain.code}`, undefined, 'viewer')).statusCode).toBe(403);
  });

  it('keeps a group a member names: no delete, no code change (the read model folds the new events)', async () => {
    const group = await aGroup();
    const u = await aUser();
    expect((await call('PUT', `/api/v1/users/${u.id}/groups/${group.code}`)).statusCode).toBe(204);
    const deleting = await call('DELETE', `/api/v1/user-groups/${group.code}`);
    expect(deleting.statusCode, deleting.body).toBe(409);
    expect((await call('PATCH', `/api/v1/user-groups/${group.code}`, { code: fresh('RENAMED') })).statusCode).toBe(409);
    expect((await call('DELETE', `/api/v1/users/${u.id}/groups/${group.code}`)).statusCode).toBe(204);
    expect((await call('DELETE', `/api/v1/user-groups/${group.code}`)).statusCode).toBe(204);
  });
});

describe('a join racing an admin giving the group a role', () => {
  it('is judged on the group as it is when written: never an editor join stored after the group carries a role', async () => {
    for (let round = 0; round < 20; round++) {
      const group = await aGroup();
      const rule = await made('/api/v1/access-rules', {
        code: fresh('RACE'),
        name: 'r',
        fullAccess: true,
        entityName: 'users',
        accessRule: 'READ',
      });
      const u = await aUser();
      const [join, setRole] = await Promise.all([
        call('PUT', `/api/v1/users/${u.id}/groups/${group.code}`, undefined, 'editor'),
        call('PATCH', `/api/v1/user-groups/${group.id}`, { associatedUserRoleId: rule.id }),
      ]);
      expect(setRole.statusCode, setRole.body).toBe(200);
      // Either the join came first (and the role then reaches a member the admin could see), or it
      // was judged on the group carrying the role: 403.
      if (join.statusCode === 204) expect(BigInt(position(join))).toBeLessThan(BigInt(position(setRole)));
      else expect(join.statusCode, join.body).toBe(403);
    }
  });
});

describe('records hidden by access rules', () => {
  it('answers 404 for a user or group the caller may not read, 403 for a user it may read and not write', async () => {
    const open = await aGroup({ name: 'Public open' });
    const secret = await aGroup({ name: 'Secret' });
    const visible = await aUser({ code: fresh('V') });
    const readOnly = await aUser({ code: fresh('R') });
    const hidden = await aUser({ code: fresh('H') });
    const rule = (code: string, extra: Record<string, unknown>) =>
      made('/api/v1/access-rules', { code, name: code, fullAccess: false, ...extra });
    const like = (column: string, value: string) => JSON.stringify([{ column, operator: 'LIKE', value }]);
    await rule('M_PUBLIC_GROUPS', { entityName: 'user-groups', accessRule: 'READ', expression: like('name', 'Public%') });
    await rule('M_WRITE_V', { entityName: 'users', accessRule: 'READ_WRITE', expression: like('code', 'V-%') });
    await rule('M_READ_R', { entityName: 'users', accessRule: 'READ', expression: like('code', 'R-%') });
    const caller = await as(['M_PUBLIC_GROUPS', 'M_WRITE_V', 'M_READ_R']);
    expect((await caller('PUT', `/api/v1/users/${visible.code}/groups/${open.code}`)).statusCode).toBe(204);
    const secretGroup = await caller('PUT', `/api/v1/users/${visible.code}/groups/${secret.code}`);
    expect(secretGroup.statusCode).toBe(404);
    expect(secretGroup.body).not.toContain(secret.id);
    expect((await caller('PUT', `/api/v1/users/${hidden.code}/groups/${open.code}`)).statusCode).toBe(404);
    expect((await caller('PUT', `/api/v1/users/${readOnly.code}/groups/${open.code}`)).statusCode).toBe(403);
    const bulk = await caller('POST', `/api/v1/user-groups/${open.code}/members`, { add: [hidden.code, visible.id] });
    expect(bulk.statusCode).toBe(422);
    expect(bulk.json<ErrorBody>().errors).toEqual([`add[0]: no User ${JSON.stringify(hidden.code)}`]);
    expect((await caller('POST', `/api/v1/user-groups/${secret.code}/members`, { add: [visible.id] })).statusCode).toBe(404);
    expect((await caller('POST', `/api/v1/user-groups/${open.code}/members`, { add: [readOnly.id] })).statusCode).toBe(403);
    expect((await userNow(hidden.id)).groups).toBeUndefined();
    expect((await userNow(readOnly.id)).groups).toBeUndefined();
    expect((await userNow(visible.id)).groups).toEqual([open.code]);
  });
});

describe('POST /user-groups/{idOrCode}/members', () => {
  it('adds and removes many users in one request, one event each, and says which changed', async () => {
    const group = await aGroup();
    const [a, b, c, d] = [await aUser(), await aUser(), await aUser(), await aUser()];
    await call('PUT', `/api/v1/users/${b.id}/groups/${group.code}`);
    await call('PUT', `/api/v1/users/${c.id}/groups/${group.code}`);
    const res = await call('POST', `/api/v1/user-groups/${group.id}/members`, { add: [a.code, b.id], remove: [c.code, d.code] });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ added: [a.id], removed: [c.id] });
    const at = position(res);
    const members = await call('GET', `/api/v1/user-groups/${group.code}/users?minPosition=${at}`);
    expect(new Set(members.json<User[]>().map((m) => m.id))).toEqual(new Set([a.id, b.id]));
    for (const [who, version] of [
      [a, 1],
      [b, 1],
      [c, 2],
      [d, 0],
    ] as const)
      expect((await userNow(who.id)).auditInfo.version, who.code).toBe(version);
    // Nothing left to change: nothing written, and the position still reads it all.
    const again = await call('POST', `/api/v1/user-groups/${group.code}/members`, { add: [a.code, b.code], remove: [c.code] });
    expect(again.json()).toEqual({ added: [], removed: [] });
    expect(BigInt(position(again))).toBeLessThanOrEqual(BigInt(at));
    expect((await call('POST', `/api/v1/user-groups/${group.code}/members`, {})).json()).toEqual({ added: [], removed: [] });
  });

  it('judges the whole request before writing anything', async () => {
    const group = await aGroup();
    const [a, b] = [await aUser(), await aUser()];
    const both = await call('POST', `/api/v1/user-groups/${group.code}/members`, { add: [a.code], remove: [a.code] });
    expect(both.statusCode).toBe(400);
    const bothByIdAndCode = await call('POST', `/api/v1/user-groups/${group.code}/members`, { add: [a.code, b.code], remove: [a.id] });
    expect(bothByIdAndCode.statusCode).toBe(400);
    const unknown = await call('POST', `/api/v1/user-groups/${group.code}/members`, { add: [a.code, 'ghost', b.code], remove: ['ghost2'] });
    expect(unknown.statusCode).toBe(422);
    expect(unknown.json<ErrorBody>()).toMatchObject({
      code: 'USER_GROUP.REFERENCE_NOT_FOUND',
      errors: ['add[1]: no User "ghost"', 'remove[0]: no User "ghost2"'],
    });
    const tooMany = await call('POST', `/api/v1/user-groups/${group.code}/members`, {
      add: Array.from({ length: 1001 }, (_, i) => `x${String(i)}`),
    });
    expect(tooMany.statusCode).toBe(400);
    expect((await call('POST', `/api/v1/user-groups/${group.code}/members`, { add: [a.code], extra: 1 })).statusCode).toBe(400);
    expect((await call('POST', '/api/v1/user-groups/NO_SUCH_GROUP/members', { add: [a.code] })).statusCode).toBe(404);
    // A user the editor may not change (an auditor), after one it may: neither is written.
    const auditor = await aUser({ roles: ['auditor'] });
    const refused = await call('POST', `/api/v1/user-groups/${group.code}/members`, { add: [a.code, auditor.code] }, 'editor');
    expect(refused.statusCode, refused.body).toBe(403);
    // Removing from a group that carries a role is an admin's: refused whole for an editor.
    const granting = await aRoleGroup();
    await call('PUT', `/api/v1/users/${b.id}/groups/${granting.code}`);
    const leave = await call('POST', `/api/v1/user-groups/${granting.code}/members`, { add: [a.code], remove: [b.code] }, 'editor');
    expect(leave.statusCode, leave.body).toBe(403);
    const join = await call('POST', `/api/v1/user-groups/${granting.code}/members`, { add: [b.code, a.code] }, 'editor');
    expect(join.statusCode, join.body).toBe(403);
    for (const who of [a, b, auditor]) expect((await userNow(who.id)).auditInfo.version, who.code).toBe(who === b ? 1 : 0);
  });
});

describe('the read models fold the membership events', () => {
  it('rebuilds the users read model from the log into what the live fold made', async () => {
    await call('POST', '/api/v1/indexes/refresh');
    const before = await readModelDocuments(t, 'users');
    expect(before.some((d) => Array.isArray(d.groups) && d.groups.length > 0)).toBe(true);
    const ack = await call('POST', '/api/v1/indexes/users/recreate');
    expect(ack.statusCode, ack.body).toBe(202);
    await t.service.readModelJobs.idle();
    expect(await readModelDocuments(t, 'users')).toEqual(before);
  });
});
