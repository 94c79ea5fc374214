// Roles as a catalogue (issue 26, part 3): GET /api/v1/roles lists what can be granted; a user's
// roles must each name one (422 by every write route); an access rule a user holds cannot be
// deleted or renamed while held (409), one a group names cannot be deleted; users stored with a
// role that names nothing (before the check) still fold and stay changeable.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import type { EventStore } from '../../../domain/ports.ts';
import { EVENT_LOG_FILE, READ_MODELS_FILE } from '../../../infra/embedded.ts';
import { openSqliteEventStore } from '../../../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../../../infra/sqlite/readStore.ts';
import { multipart } from '../../support/multipart.ts';
import { storedBefore } from '../../support/storedBefore.ts';
import { startTestApp, TEST_SECRET, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
let events: EventStore;
/** The X-Event-Position of the last write `created` made. */
let lastPosition = '';
type ErrorBody = { code: string; errors: string[] };
type Role = { code: string; kind: string; id?: string; permissions?: string[]; entityName?: string; validNow?: boolean };
type Rec = { id: string; code: string; roles?: string[]; auditInfo: { version: number } } & Record<string, unknown>;
/** An item of an apply's or an import's answer. */
type Outcome = { right?: Rec; error?: ErrorBody };

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'roles-catalogue-'));
  events = openSqliteEventStore(join(dataDir, EVENT_LOG_FILE));
  t = await startTestApp({
    dataDir,
    stores: { eventStore: events, readStore: openSqliteReadStore({ path: join(dataDir, READ_MODELS_FILE) }) },
  });
  await created('/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' });
  await created('/api/v1/user-group-types', { code: 'TEAM', name: 'Team', registry: {} });
});
afterAll(async () => {
  await t.close();
});

async function created(url: string, payload: Record<string, unknown>): Promise<Rec> {
  const res = await t.call({ method: 'POST', url, payload });
  expect(res.statusCode, res.body).toBe(201);
  lastPosition = String(res.headers['x-event-position']);
  return res.json();
}
const aRule = (code: string, extra: Record<string, unknown> = {}) =>
  created('/api/v1/access-rules', { code, name: `Rule ${code}`, entityName: 'user-groups', fullAccess: true, ...extra });
const userBody = (code: string, extra: Record<string, unknown> = {}) => ({
  code,
  type: 'INDIVIDUAL',
  givenName: code,
  chars: {},
  ...extra,
});
const roles = async (query = '', as: 'admin' | 'viewer' | 'nobody' = 'admin') => {
  const res = await t.call({ method: 'GET', url: `/api/v1/roles${query}`, as });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<Role[]>();
};

describe('GET /api/v1/roles', () => {
  it('lists the built-in roles with what they grant, then every access rule by code with its id', async () => {
    const b = await aRule('CAT_B', { accessRule: 'READ_WRITE' });
    const a = await aRule('CAT_A', { validFor: { validTo: '2020-01-01T00:00:00.000Z' } });
    const listed = await roles(`?minPosition=${lastPosition}`);
    expect(listed.slice(0, 4)).toEqual([
      expect.objectContaining({ code: 'admin', kind: 'BUILT_IN', permissions: ['read', 'write', 'admin', 'audit'] }),
      expect.objectContaining({ code: 'editor', kind: 'BUILT_IN', permissions: ['read', 'write'] }),
      expect.objectContaining({ code: 'viewer', kind: 'BUILT_IN', permissions: ['read'] }),
      expect.objectContaining({ code: 'auditor', kind: 'BUILT_IN', permissions: ['read', 'audit'] }),
    ]);
    const rules = listed.slice(4);
    expect(rules.every((r) => r.kind === 'ACCESS_RULE')).toBe(true);
    expect(rules.map((r) => r.code)).toEqual([...rules.map((r) => r.code)].sort());
    expect(rules.find((r) => r.code === 'CAT_A')).toMatchObject({
      id: a.id,
      entityName: 'user-groups',
      accessRule: 'READ',
      validNow: false,
    });
    expect(rules.find((r) => r.code === 'CAT_B')).toMatchObject({ id: b.id, accessRule: 'READ_WRITE', validNow: true });
  });

  it('is read as access rules are: a viewer reads it, a caller without roles is refused', async () => {
    expect((await roles('', 'viewer')).some((r) => r.code === 'CAT_A')).toBe(true);
    expect((await t.call({ method: 'GET', url: '/api/v1/roles', as: 'nobody' })).statusCode).toBe(403);
    expect((await t.call({ method: 'GET', url: '/api/v1/roles', as: null })).statusCode).toBe(401);
  });

  it('narrows the rules to those a caller narrowed by access rules may read', async () => {
    await aRule('SEES_SOME_RULES', {
      entityName: 'access-rules',
      fullAccess: false,
      expression: JSON.stringify([{ column: 'code', operator: 'LIKE', value: 'CAT_%' }]),
    });
    const token = await signHs256(TEST_SECRET, { sub: 'narrow', roles: ['SEES_SOME_RULES'] });
    const res = await t.call({ method: 'GET', url: '/api/v1/roles', headers: { authorization: `Bearer ${token}` }, as: null });
    expect(res.statusCode, res.body).toBe(200);
    const codes = res.json<Role[]>().map((r) => r.code);
    expect(codes).toEqual(['admin', 'editor', 'viewer', 'auditor', 'CAT_A', 'CAT_B']);
  });

  it('pages the access rules by code: the built-in roles on the first page, then Link rel=next to the end', async () => {
    for (const code of ['PG_1', 'PG_2', 'PG_3', 'PG_4', 'PG_5']) await aRule(code);
    const everything = (await roles(`?minPosition=${lastPosition}`)).filter((r) => r.kind === 'ACCESS_RULE').map((r) => r.code);
    const seen: string[] = [];
    let url: string | undefined = `/api/v1/roles?limit=2&minPosition=${lastPosition}`;
    for (let page = 0; url !== undefined; page++) {
      const res = await t.call({ method: 'GET', url });
      expect(res.statusCode, res.body).toBe(200);
      const listed = res.json<Role[]>();
      expect(listed.filter((r) => r.kind === 'BUILT_IN').map((r) => r.code)).toEqual(
        page === 0 ? ['admin', 'editor', 'viewer', 'auditor'] : [],
      );
      const rules = listed.filter((r) => r.kind === 'ACCESS_RULE');
      expect(rules.length).toBeLessThanOrEqual(2);
      seen.push(...rules.map((r) => r.code));
      const link = res.headers.link as string | undefined;
      url = link === undefined ? undefined : /^<([^>]+)>; rel="next"$/.exec(link)?.[1];
      if (link !== undefined) expect(url).toBeDefined();
    }
    expect(seen).toEqual(everything);
    expect(seen).toEqual(expect.arrayContaining(['PG_1', 'PG_2', 'PG_3', 'PG_4', 'PG_5']));
  });

  it('waits for minPosition, and refuses a position ahead of the log', async () => {
    const rule = await t.call({ method: 'POST', url: '/api/v1/access-rules', payload: { code: 'CAT_C', name: 'C', fullAccess: true } });
    const at = String(rule.headers['x-event-position']);
    expect((await roles(`?minPosition=${at}`)).map((r) => r.code)).toContain('CAT_C');
    expect((await t.call({ method: 'GET', url: '/api/v1/roles?minPosition=99999999999' })).statusCode).toBe(400);
  });
});

describe("an access rule stored under a built-in role's name (before that was refused)", () => {
  it('is not in the catalogue, and users holding the built-in role do not keep it from being deleted', async () => {
    const { id, position } = await storedBefore(events, 'accessRule', await aRule('LIKE_VIEWER'), { code: 'viewer' });
    await created('/api/v1/users', userBody('plain-viewer', { roles: ['viewer'] }));
    const listed = await roles(`?minPosition=${position}`);
    expect(listed.filter((r) => r.code === 'viewer')).toEqual([expect.objectContaining({ kind: 'BUILT_IN' })]);
    expect(listed.some((r) => r.id === id)).toBe(false);
    const gone = await t.call({ method: 'DELETE', url: `/api/v1/access-rules/${id}` });
    expect(gone.statusCode, gone.body).toBe(204);
  });
});

describe("a user's roles", () => {
  it('must each be a built-in role or an access rule code: 422 naming the entry, on create, replace and patch', async () => {
    await aRule('HELD_ROLE');
    const made = await created('/api/v1/users', userBody('holder', { roles: ['viewer', 'HELD_ROLE'] }));
    expect(made.roles).toEqual(['viewer', 'HELD_ROLE']);

    const bad = await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: userBody('bad-role', { roles: ['viewer', 'NO_SUCH_ROLE'] }),
    });
    expect(bad.statusCode, bad.body).toBe(422);
    expect(bad.json<ErrorBody>()).toMatchObject({ code: 'USER.REFERENCE_NOT_FOUND' });
    expect(bad.json<ErrorBody>().errors).toEqual([expect.stringContaining('roles: no AccessRule "NO_SUCH_ROLE"')]);
    expect(bad.json<ErrorBody>().errors[0]).toContain('built-in role');
    // Case matters: codes are exact.
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/holder', payload: { roles: ['Viewer'] } })).statusCode).toBe(422);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/holder', payload: { roles: ['held_role'] } })).statusCode).toBe(422);
    const current = (await t.call({ method: 'GET', url: '/api/v1/users/holder' })).json<Rec>();
    const { auditInfo: _, ...body } = current;
    expect((await t.call({ method: 'PUT', url: '/api/v1/users/holder', payload: { ...body, roles: ['GHOST'] } })).statusCode).toBe(422);
    expect((await t.call({ method: 'GET', url: '/api/v1/users/holder' })).json<Rec>().roles).toEqual(['viewer', 'HELD_ROLE']);
  });

  it('are checked on import and diff/apply too', async () => {
    // The file's filtering scopes the import to the one code (nothing else is compared or removed).
    const file = multipart(
      JSON.stringify({
        entityType: 'users',
        compareField: 'code',
        filtering: [{ column: 'code', operator: 'EQ', value: 'imported-bad' }],
        data: [userBody('imported-bad', { roles: ['GHOST_IMPORT'] })],
      }),
    );
    const imported = await t.app.inject({
      method: 'POST',
      url: '/api/v1/users/import?save=true&compareField=code',
      payload: file.payload,
      headers: { ...file.headers, authorization: `Bearer ${t.tokens.admin}` },
    });
    expect(imported.statusCode, imported.body).toBe(200);
    expect(imported.json<Outcome[]>().find((o) => o.right?.code === 'imported-bad')?.error?.code).toBe('USER.REFERENCE_NOT_FOUND');
    expect((await t.call({ method: 'GET', url: '/api/v1/users/imported-bad' })).statusCode).toBe(404);

    const applied = await t.call({
      method: 'POST',
      url: '/api/v1/users/diff/apply?compareField=code',
      payload: [{ diffType: 'DIFF_TYPE_NEW', right: userBody('applied-bad', { roles: ['GHOST_APPLY'] }) }],
    });
    expect(applied.json<Outcome[]>()[0]?.error?.code).toBe('USER.REFERENCE_NOT_FOUND');
    expect((await t.call({ method: 'GET', url: '/api/v1/users/applied-bad' })).statusCode).toBe(404);
  });

  it('keep an access rule they hold: no delete, no rename (409); once released it goes', async () => {
    const rule = await aRule('KEPT_ROLE');
    await created('/api/v1/users', userBody('keeper', { roles: ['KEPT_ROLE'] }));
    const gone = await t.call({ method: 'DELETE', url: `/api/v1/access-rules/${rule.id}` });
    expect(gone.statusCode, gone.body).toBe(409);
    expect(gone.json<ErrorBody>().code).toBe('ACCESS_RULE.STILL_REFERENCED');
    expect(gone.json<ErrorBody>().errors.join(' ')).toContain('keeper');
    const renamed = await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${rule.id}`, payload: { code: 'KEPT_ROLE_2' } });
    expect(renamed.statusCode, renamed.body).toBe(409);
    expect(renamed.json<ErrorBody>().code).toBe('ACCESS_RULE.STILL_REFERENCED');
    // Other changes of the rule are the admin's as before.
    expect((await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${rule.id}`, payload: { name: 'Kept' } })).statusCode).toBe(200);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/keeper', payload: { roles: [] } })).statusCode).toBe(200);
    expect((await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${rule.id}`, payload: { code: 'KEPT_ROLE_2' } })).statusCode).toBe(
      200,
    );
    expect((await t.call({ method: 'DELETE', url: `/api/v1/access-rules/${rule.id}` })).statusCode).toBe(204);
  });

  it("a group's rule may be renamed (the group names its id, its members get the new code) but not deleted", async () => {
    const rule = await aRule('GROUP_ROLE');
    await created('/api/v1/user-groups', { code: 'CARRIERS', name: 'Carriers', type: 'TEAM', chars: {}, associatedUserRoleId: rule.id });
    const member = await created('/api/v1/users', userBody('carried', { groups: ['CARRIERS'] }));
    expect((await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${rule.id}`, payload: { code: 'GROUP_ROLE_2' } })).statusCode).toBe(
      200,
    );
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${member.id}/roles` })).json()).toEqual(['GROUP_ROLE_2']);
    expect((await roles()).find((r) => r.id === rule.id)?.code).toBe('GROUP_ROLE_2');
    expect((await t.call({ method: 'DELETE', url: `/api/v1/access-rules/${rule.id}` })).statusCode).toBe(409);
  });

  it('stored before the check with a role that names nothing, still fold and stay changeable; the role stays until removed', async () => {
    const like = await created('/api/v1/users', userBody('legacy-like'));
    const { id, position } = await storedBefore(events, 'user', like, { code: 'legacy', roles: ['viewer', 'LONG_GONE'] });
    const read = await t.call({ method: 'GET', url: `/api/v1/users/${id}` });
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json<Rec>().roles).toEqual(['viewer', 'LONG_GONE']);
    expect((await t.call({ method: 'POST', url: `/api/v1/users/count?minPosition=${position}`, payload: {} })).statusCode).toBe(200);
    const patched = await t.call({ method: 'PATCH', url: `/api/v1/users/${id}`, payload: { description: 'still here' } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json<Rec>().roles).toEqual(['viewer', 'LONG_GONE']);
    // Adding another unknown one is refused; removing the old one is fine.
    expect(
      (await t.call({ method: 'PATCH', url: `/api/v1/users/${id}`, payload: { roles: ['viewer', 'LONG_GONE', 'NEW_GHOST'] } })).statusCode,
    ).toBe(422);
    expect((await t.call({ method: 'PATCH', url: `/api/v1/users/${id}`, payload: { roles: ['viewer'] } })).statusCode).toBe(200);
  });
});
