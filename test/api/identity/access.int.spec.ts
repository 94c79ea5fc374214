// Access rules enforced: a matrix of callers (roles naming rules, built-in roles, both) against
// users and other resources, for searches, counts, lists, single reads, autocomplete, history,
// module queries and writes (before and after the change), with validity honoured at request time.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../../api/auth.ts';
import { givePassword } from '../../support/passwords.ts';
import { startTestApp, TEST_SECRET, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const north = { column: 'chars.region', operator: 'EQ', value: 'north' };
let at = '';
const ids: Record<string, string> = {};

const rule = (code: string, extra: Record<string, unknown>) =>
  t.call({ method: 'POST', url: '/api/v1/access-rules', payload: { code, name: code, fullAccess: false, ...extra } });

beforeAll(async () => {
  t = await startTestApp();
  await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } });
  await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'G1', name: 'G1', type: 'TEAM', chars: {} } });
  for (const [code, region] of [
    ['n-ann', 'north'],
    ['n-bob', 'north'],
    ['s-cid', 'south'],
    ['s-dan', 'south'],
    ['x-eve', undefined],
  ] as const) {
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code, type: 'INDIVIDUAL', givenName: code, chars: region === undefined ? {} : { region }, groups: ['G1'] },
    });
    expect(res.statusCode, res.body).toBe(201);
    ids[code] = res.json<{ id: string }>().id;
  }
  for (const [code, extra] of [
    ['R_NORTH', { entityName: 'users', accessRule: 'READ', expression: JSON.stringify([north]) }],
    ['RW_NORTH', { entityName: 'users', accessRule: 'READ_WRITE', expression: JSON.stringify({ filter: [north] }) }],
    ['ALL_GROUPS', { entityName: 'user-groups', fullAccess: true }],
    ['EXPIRED', { entityName: 'users', fullAccess: true, validFor: { validTo: '2000-01-01T00:00:00Z' } }],
    ['LATER', { entityName: 'users', fullAccess: true, validFor: { validFrom: '2999-01-01T00:00:00Z' } }],
  ] as const) {
    const res = await rule(code, extra);
    expect(res.statusCode, res.body).toBe(201);
    at = String(res.headers['x-event-position']);
  }
});
afterAll(async () => {
  await t.close();
});

const as = async (roles: string[]) => {
  const token = await signHs256(TEST_SECRET, { sub: `caller-${roles.join('+')}`, roles });
  return (method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown, headers: Record<string, string> = {}) =>
    t.call({
      method,
      url,
      ...(payload === undefined ? {} : { payload }),
      headers: { ...headers, authorization: `Bearer ${token}` },
      as: null,
    });
};
const codes = (body: unknown) => (body as { code: string }[]).map((u) => u.code).sort();
const filtering = { filter: [], sort: [] };

describe('access rules', () => {
  it('refuse an expression that is not a filter over the resource when saved (400 naming the problem)', async () => {
    const notJson = await rule('BAD1', { entityName: 'users', expression: 'status = ENABLE' });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.body).toMatch(/expression: not JSON/);
    const unknownColumn = await rule('BAD2', {
      entityName: 'users',
      expression: JSON.stringify([{ column: 'salary', operator: 'GT', value: '1' }]),
    });
    expect(unknownColumn.statusCode).toBe(400);
    expect(unknownColumn.body).toMatch(/expression: .*salary/);
    expect(
      (await rule('BAD3', { entityName: 'users', expression: JSON.stringify([{ column: 'status', operator: 'SOUNDS_LIKE', value: 'x' }]) }))
        .statusCode,
    ).toBe(400);
    // An entity this service does not serve: the JSON is still checked, the columns cannot be.
    expect(
      (await rule('OTHER', { entityName: 'ticket', expression: JSON.stringify([{ column: 'x', operator: 'EQ', value: '1' }]) })).statusCode,
    ).toBe(201);
  });

  it('a READ rule with an expression: exactly the covered users in search, count, list, get, by ids, autocomplete, history and module queries', async () => {
    const call = await as(['R_NORTH']);
    expect(codes((await call('POST', `/api/v1/users/search?minPosition=${at}`, filtering)).json())).toEqual(['n-ann', 'n-bob']);
    expect((await call('POST', '/api/v1/users/count', filtering)).json()).toBe(2);
    const page = (await call('POST', '/api/v1/users/search/page', { ...filtering, size: 1 })).json<{
      totalElements: number;
      content: unknown[];
    }>();
    expect(page.totalElements).toBe(2);
    expect(codes((await call('GET', '/api/v1/users')).json())).toEqual(['n-ann', 'n-bob']);
    expect((await call('GET', '/api/v1/users/n-ann')).statusCode).toBe(200);
    expect((await call('GET', `/api/v1/users/${ids['s-cid'] ?? ''}`)).statusCode).toBe(404);
    expect((await call('GET', '/api/v1/users/by-code/s-cid')).statusCode).toBe(404);
    expect((await call('GET', '/api/v1/users/x-eve')).statusCode).toBe(404);
    expect(codes((await call('POST', '/api/v1/users/by-ids', Object.values(ids))).json())).toEqual(['n-ann', 'n-bob']);
    expect((await call('GET', '/api/v1/users/autocomplete?search=')).json<string[]>().sort()).toEqual(['n-ann', 'n-bob']);
    expect((await call('GET', '/api/v1/users/autocomplete?search=-b')).json<string[]>()).toEqual(['n-bob']);
    expect((await call('GET', `/api/v1/users/autocomplete?search=${'_'.repeat(200)}`)).json<string[]>()).toEqual([]);
    expect((await call('GET', `/api/v1/users/${ids['s-cid'] ?? ''}/history`)).statusCode).toBe(404);
    expect((await call('GET', `/api/v1/users/${ids['n-ann'] ?? ''}/history`)).statusCode).toBe(200);
    expect(codes((await call('GET', '/api/v1/users/by-type/INDIVIDUAL')).json())).toEqual(['n-ann', 'n-bob']);
    // The group is another resource, which this caller may not read: as if it did not exist.
    expect((await call('GET', '/api/v1/user-groups/G1/users')).statusCode).toBe(404);
    const both = await as(['R_NORTH', 'ALL_GROUPS']);
    expect(codes((await both('GET', '/api/v1/user-groups/G1/users')).json())).toEqual(['n-ann', 'n-bob']);
    expect((await call('GET', `/api/v1/users/${ids['s-cid'] ?? ''}/roles`)).statusCode).toBe(404);
  });

  it('a READ rule allows no write (403), and nothing of other resources (403)', async () => {
    const call = await as(['R_NORTH']);
    expect((await call('PATCH', '/api/v1/users/n-ann', { description: 'x' })).statusCode).toBe(403);
    expect(
      (await call('POST', '/api/v1/users', { code: 'n-new', type: 'INDIVIDUAL', givenName: 'N', chars: { region: 'north' } })).statusCode,
    ).toBe(403);
    expect((await call('DELETE', '/api/v1/users/n-bob')).statusCode).toBe(403);
    expect((await call('PUT', '/api/v1/users/n-ann/password', { password: 'a-long-enough-password' })).statusCode).toBe(403);
    expect((await call('POST', '/api/v1/user-groups/search', filtering)).statusCode).toBe(403);
    expect((await call('GET', '/api/v1/user-types')).statusCode).toBe(403);
    expect((await call('GET', `/api/v1/users/${ids['n-ann'] ?? ''}/groups`)).statusCode).toBe(403);
    expect((await call('GET', '/api/v1/jobs')).statusCode).toBe(403);
  });

  it('a READ_WRITE rule writes covered records only, before and after the change', async () => {
    const call = await as(['RW_NORTH']);
    expect((await call('PATCH', '/api/v1/users/n-ann', { description: 'seen' })).statusCode).toBe(200);
    expect((await call('PATCH', '/api/v1/users/n-ann', { chars: { region: 'south' } })).statusCode).toBe(403);
    // An uncovered record is as absent for a write as for a read: 404 before anything else is judged.
    expect((await call('PATCH', '/api/v1/users/s-cid', { description: 'x' })).statusCode).toBe(404);
    expect((await call('PATCH', '/api/v1/users/s-cid', { description: 'x' }, { 'if-match': '"99"' })).statusCode).toBe(404);
    expect((await call('DELETE', '/api/v1/users/s-dan')).statusCode).toBe(404);
    const created = await call('POST', '/api/v1/users', { code: 'n-new', type: 'INDIVIDUAL', givenName: 'N', chars: { region: 'north' } });
    expect(created.statusCode, created.body).toBe(201);
    expect(
      (await call('POST', '/api/v1/users', { code: 's-new', type: 'INDIVIDUAL', givenName: 'S', chars: { region: 'south' } })).statusCode,
    ).toBe(403);
    // Another user's password is an admin's to set; roles too.
    expect((await call('PUT', '/api/v1/users/n-new/password', { password: 'a-long-enough-password' })).statusCode).toBe(403);
    expect((await call('PATCH', '/api/v1/users/n-new', { roles: ['admin'] })).statusCode).toBe(403);
    // A reference to a record the caller may not read is as missing as one that does not exist.
    const hidden = await call('POST', '/api/v1/users', {
      code: 'n-sub',
      type: 'INDIVIDUAL',
      givenName: 'N',
      chars: { region: 'north' },
      supervisorId: ids['s-cid'],
    });
    expect(hidden.statusCode).toBe(422);
    expect(
      (
        await call('POST', '/api/v1/users', {
          code: 'n-sub',
          type: 'INDIVIDUAL',
          givenName: 'N',
          chars: { region: 'north' },
          supervisorId: ids['n-bob'],
        })
      ).statusCode,
    ).toBe(201);
    expect((await call('DELETE', '/api/v1/users/n-sub')).statusCode).toBe(204);
    expect((await call('DELETE', '/api/v1/users/n-new')).statusCode).toBe(204);
    // Unchanged by the refusals.
    expect((await t.call({ method: 'GET', url: '/api/v1/users/n-ann' })).json()).toMatchObject({
      chars: { region: 'north' },
      description: 'seen',
    });
  });

  it('honours validity at request time, adds rules up, and leaves built-in roles unnarrowed', async () => {
    expect((await (await as(['EXPIRED']))('GET', '/api/v1/users')).statusCode).toBe(403);
    expect((await (await as(['LATER']))('GET', '/api/v1/users')).statusCode).toBe(403);
    expect((await (await as(['UNKNOWN_ROLE']))('GET', '/api/v1/users')).statusCode).toBe(403);
    const both = await as(['R_NORTH', 'ALL_GROUPS']);
    expect((await both('GET', '/api/v1/user-groups')).statusCode).toBe(200);
    expect(codes((await both('GET', '/api/v1/users')).json())).toEqual(['n-ann', 'n-bob']);
    const viewer = await as(['viewer', 'R_NORTH']);
    expect(codes((await viewer('GET', '/api/v1/users')).json())).toEqual(['n-ann', 'n-bob', 's-cid', 's-dan', 'x-eve']);
    // readonlyAccess follows the caller's rights.
    const groups = await as(['ALL_GROUPS']);
    expect((await groups('POST', '/api/v1/user-groups/by-codes', ['G1'])).json()).toMatchObject([{ code: 'G1', readonlyAccess: true }]);
    expect((await t.call({ method: 'POST', url: '/api/v1/user-groups/by-codes', payload: ['G1'] })).json()).toMatchObject([
      { code: 'G1', readonlyAccess: false },
    ]);
    // A rule changed takes effect at once: the rules are read from the log.
    await t.call({ method: 'PATCH', url: '/api/v1/access-rules/R_NORTH', payload: { validFor: { validTo: '2001-01-01T00:00:00Z' } } });
    expect((await (await as(['R_NORTH']))('GET', '/api/v1/users')).statusCode).toBe(403);
  });

  it('judges single records as search does (in the store), whatever their text', async () => {
    // Characters the in-memory and SQL evaluations of LIKE and ordering would read differently.
    for (const [code, name] of [
      ['k-kelvin', '\u212Aate'],
      ['k-nul', 'a\u0000secret'],
      ['k-private', '\uE000private'],
    ]) {
      await t.call({ method: 'POST', url: '/api/v1/users', payload: { code, type: 'INDIVIDUAL', name, chars: {} } });
    }
    for (const [ruleCode, expression] of [
      ['LIKE_KAT', [{ column: 'name', operator: 'LIKE', value: 'kat%' }]],
      [
        'NOT_SECRET',
        [
          { column: 'name', operator: 'NOT_LIKE', value: '%secret%' },
          { column: 'code', operator: 'LIKE', value: 'k-%' },
        ],
      ],
      [
        'BELOW_EMOJI',
        [
          { column: 'name', operator: 'LT', value: '\u{1F600}' },
          { column: 'code', operator: 'LIKE', value: 'k-%' },
        ],
      ],
    ] as const) {
      const saved = await rule(ruleCode, { entityName: 'users', accessRule: 'READ_WRITE', expression: JSON.stringify(expression) });
      const call = await as([ruleCode]);
      const found = codes(
        (await call('POST', `/api/v1/users/search?minPosition=${String(saved.headers['x-event-position'])}`, filtering)).json(),
      );
      for (const code of ['k-kelvin', 'k-nul', 'k-private']) {
        const got = (await call('GET', `/api/v1/users/${code}`)).statusCode;
        expect([ruleCode, code, got], 'a GET agrees with the search').toEqual([ruleCode, code, found.includes(code) ? 200 : 404]);
      }
    }
  });

  it('lets a narrowed writer name registry kinds it cannot read, but not hidden records; 404s name what was asked', async () => {
    await rule('RW_GROUPS', { entityName: 'user-groups', accessRule: 'READ_WRITE', fullAccess: true });
    const writer = await as(['RW_GROUPS']);
    expect((await writer('POST', '/api/v1/user-groups', { code: 'G-NEW', name: 'n', type: 'TEAM', chars: {} })).statusCode).toBe(201);
    const reader = await as(['RW_NORTH']);
    const hiddenUser = await reader('GET', `/api/v1/users/${ids['s-cid'] ?? ''}`);
    expect(hiddenUser.statusCode).toBe(404);
    expect(hiddenUser.body).not.toContain('s-cid');
    const byCode = await reader('GET', '/api/v1/users/s-cid');
    expect(byCode.json<{ message: string }>().message).toBe('USER "s-cid" not found');
    await rule('R_REGIONS', { entityName: 'user-group-regions', fullAccess: true });
    const regions = await as(['R_REGIONS']);
    expect((await regions('GET', '/api/v1/user-groups/G1/regions')).statusCode).toBe(404);
    expect((await regions('GET', '/api/v1/user-groups/by-code/NOPE/regions')).statusCode).toBe(404);
  });

  it('shows a groups-only caller no users, nor what they belong to; embeds only what the caller may read', async () => {
    const groups = await as(['ALL_GROUPS']);
    expect((await groups('GET', `/api/v1/users/${ids['s-cid'] ?? ''}/groups`)).statusCode).toBe(404);
    const byUsers = (await groups('POST', '/api/v1/user-groups/by-users', { userIds: [ids['s-cid']] })).json<Record<string, unknown[]>>();
    expect(byUsers[ids['s-cid'] ?? '']).toEqual([]);
    const expanded = (await groups('POST', '/api/v1/user-groups/by-codes', ['G1'])).json<Record<string, unknown>[]>();
    expect(expanded[0]).not.toHaveProperty('userGroupType');
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/user-groups/by-codes', payload: ['G1'] })).json<Record<string, unknown>[]>()[0],
    ).toHaveProperty('userGroupType');
  });

  it('a user who logs in gets exactly what its roles grant', async () => {
    await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code: 'auditor', type: 'INDIVIDUAL', givenName: 'A', chars: {}, roles: ['RW_NORTH'] },
    });
    const token = await givePassword(t, 'auditor', 'auditor-password-123');
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/users/search',
      payload: filtering,
      headers: { authorization: `Bearer ${token}` },
      as: null,
    });
    expect(codes(res.json())).toEqual(['n-ann', 'n-bob']);
  });
});
