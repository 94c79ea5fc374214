// Every collection read answers one bounded page (api/paging.ts): at most `limit` rows in its order,
// and `Link: <…>; rel="next"` while rows follow. Followed to the end, the pages hold every row
// exactly once, in order; rows written or deleted between pages make no other row repeat or go
// missing. Over real HTTP on the embedded stores, and with the read models on each MongoDB peer.

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eachMongoDatabase } from '../support/mongoPeers.ts';
import { intercept } from '../support/intercept.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { signHs256 } from '../../api/auth.ts';
import { manualClock, startTestApp, TEST_SECRET, type CallOptions, type TestApp, type TestResponse } from '../support/testApp.ts';

type Row = { id: string; code?: string; startDate?: string; auditInfo: { whenInserted: string } };
const N = 23;
const LIMIT = 5;

describe('over real HTTP on the embedded stores', () => {
  pagingSuite(undefined);
});

eachMongoDatabase('over real HTTP, read models on', 'paging', (_peer, url) => {
  pagingSuite(url);
});

/** The next page's URL from a Link header, or undefined on the last page. */
function nextOf(res: TestResponse): string | undefined {
  const link = res.headers.link;
  if (link === undefined) return undefined;
  const match = /^<([^>]+)>; rel="next"$/.exec(String(link));
  if (match?.[1] === undefined) throw new Error(`not a next link: ${String(link)}`);
  return match[1];
}

function pagingSuite(mongodbUrl: (() => string) | undefined): void {
  let t: TestApp;
  let at = '0';
  // The clock stands still: rows ordered by their insertion time tie on it, and id decides.
  const clock = manualClock(new Date('2026-11-23T10:00:00.000Z'));
  const made: Record<string, Row[]> = {};

  const call = async (options: CallOptions): Promise<TestResponse> => {
    const res = await t.call(options);
    if (res.headers['x-event-position'] !== undefined) at = String(res.headers['x-event-position']);
    return res;
  };
  const create = async (url: string, payload: unknown): Promise<Row> => {
    const res = await call({ method: 'POST', url, payload });
    expect(res.statusCode, res.body).toBe(201);
    return res.json<Row>();
  };

  /** N records, the i-th made from bodyOf(i), one after the other. */
  const createN = async (url: string, bodyOf: (i: number) => unknown): Promise<Row[]> => {
    const rows: Row[] = [];
    for (let i = 0; i < N; i++) rows.push(await create(url, bodyOf(i)));
    return rows;
  };

  /** Every page from the first, following Link: the rows of each page. */
  async function pages(method: 'GET' | 'POST', first: string, payload?: unknown): Promise<Row[][]> {
    const all: Row[][] = [];
    for (let url: string | undefined = first; url !== undefined;) {
      const res: TestResponse = await t.call({ method, url, ...(payload === undefined ? {} : { payload }) });
      expect(res.statusCode, res.body).toBe(200);
      all.push(res.json<Row[]>());
      url = nextOf(res);
      if (all.length > 100) throw new Error('the pages do not end');
    }
    return all;
  }

  const byKey =
    (key: (r: Row) => string) =>
    (a: Row, b: Row): number => {
      const [ka, kb] = [key(a), key(b)];
      return ka < kb ? -1 : ka > kb ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
    };
  const codeOrder = byKey((r) => r.code ?? '');
  const idOrder = byKey(() => '');
  const insertedOrder = byKey((r) => r.auditInfo.whenInserted);
  const startOrder = byKey((r) => r.startDate ?? '');

  beforeAll(async () => {
    t = await startTestApp({ clock, ...(mongodbUrl === undefined ? {} : { readModelsOn: mongodbUrl() }) });
    await t.listen();
    await create('/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' });
    await create('/api/v1/user-group-types', { code: 'TEAM', name: 'Team', registry: {} });
    const codes = Array.from({ length: N }, (_, i) => `P${String((i * 7919) % 1000).padStart(4, '0')}`);
    made.worklogTypes = [];
    for (const code of codes) made.worklogTypes.push(await create('/api/v1/worklog-types', { code, name: code }));
    made.groups = [];
    for (const code of codes.slice(0, 12))
      made.groups.push(await create('/api/v1/user-groups', { code: `G-${code}`, name: code, type: 'TEAM', chars: { tier: 'gold' } }));
    const group = made.groups[0] as Row & { code: string };
    made.users = [];
    for (const [i, code] of codes.entries()) {
      // Every third user is disabled: the valid users of the group leave it out.
      const status = i % 3 === 0 ? 'DISABLE' : 'ENABLE';
      made.users.push(
        await create('/api/v1/users', {
          code: code.toLowerCase(),
          givenName: code,
          familyName: 'Paged',
          type: 'INDIVIDUAL',
          chars: {},
          status,
          groups: [group.code],
        }),
      );
    }
    made.member = [
      await create('/api/v1/users', {
        code: 'in-all',
        givenName: 'All',
        familyName: 'Groups',
        type: 'INDIVIDUAL',
        chars: {},
        groups: made.groups.map((g) => g.code),
      }),
    ];
    made.regions = await createN('/api/v1/user-group-regions', () => ({ userGroupId: group.id, regionId: randomUUID() }));
    made.jobs = await createN('/api/v1/jobs', () => ({ startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'PAGE' }));
    await create('/api/v1/log-types', { code: 'HTTP_OUT', name: 'HTTP out' });
    // Pairs of logs share a start: id orders them.
    const startOf = (i: number) => new Date(Date.parse('2026-11-20T00:00:00Z') + Math.floor(i / 2) * 60_000).toISOString();
    const log = { ownerType: 'TICKET', ownerId: 'T-PAGE', logTypeCode: 'HTTP_OUT', request: 'GET /', response: '200 OK' };
    made.logs = await createN('/api/v1/logs', (i) => ({ ...log, correlationId: randomUUID(), startDate: startOf(i), endDate: startOf(i) }));
    const sharing = { ownerType: 'USER_GROUP', ownerId: 'g-page', refType: 'DOCUMENT', sharingTypeCode: 'READ' };
    made.sharings = await createN('/api/v1/sharings', (i) => ({ ...sharing, refId: `d-${String(i % 4)}` }));
    await create('/api/v1/notification-templates', {
      code: 'PAGED',
      name: 'PAGED',
      configTypeId: randomUUID(),
      subject: 'Paged',
      content: 'paged',
      status: 'ACTIVE',
    });
    const note = {
      ownerType: 'TICKET',
      ownerId: 'T-PAGE',
      templateCode: 'PAGED',
      notificationTo: [{ email: 'ada@example.com' }],
      data: {},
    };
    made.notifications = await createN('/api/v1/notifications', () => note);
  });
  afterAll(async () => {
    await t.close();
  });

  const group = () => made.groups?.[0] as Row & { code: string };
  const disabledAt = (u: Row) => (made.users ?? []).indexOf(u) % 3 === 0;
  const collections: [string, () => { method: 'GET' | 'POST'; url: string; payload?: unknown; expected: Row[] }][] = [
    [
      'list all, by code',
      () => ({ method: 'GET', url: '/api/v1/worklog-types', expected: [...(made.worklogTypes ?? [])].sort(codeOrder) }),
    ],
    ['list all, by id', () => ({ method: 'GET', url: '/api/v1/jobs', expected: [...(made.jobs ?? [])].sort(idOrder) })],
    [
      'list all notifications, by id',
      () => ({ method: 'GET', url: '/api/v1/notifications', expected: [...(made.notifications ?? [])].sort(idOrder) }),
    ],
    [
      'users by type',
      () => ({
        method: 'GET',
        url: '/api/v1/users/by-type/INDIVIDUAL',
        expected: [...(made.users ?? []), ...(made.member ?? [])].sort(codeOrder),
      }),
    ],
    [
      'users by groups',
      () => ({
        method: 'POST',
        url: '/api/v1/users/by-groups',
        payload: { ids: [group().id] },
        expected: [...(made.users ?? []), ...(made.member ?? [])].sort(codeOrder),
      }),
    ],
    [
      'users of a group',
      () => ({
        method: 'GET',
        url: `/api/v1/user-groups/${group().code}/users`,
        expected: [...(made.users ?? []), ...(made.member ?? [])].sort(codeOrder),
      }),
    ],
    [
      'valid users of a group',
      () => ({
        method: 'GET',
        url: `/api/v1/user-groups/${group().code}/users/valid`,
        expected: [...(made.users ?? []).filter((u) => !disabledAt(u)), ...(made.member ?? [])].sort(codeOrder),
      }),
    ],
    ['groups of a user', () => ({ method: 'GET', url: `/api/v1/users/in-all/groups`, expected: [...(made.groups ?? [])].sort(codeOrder) })],
    [
      'groups by a characteristic',
      () => ({
        method: 'GET',
        url: '/api/v1/user-groups/by-chars?path=tier&value=gold',
        expected: [...(made.groups ?? [])].sort(codeOrder),
      }),
    ],
    [
      'regions of a group',
      () => ({ method: 'GET', url: `/api/v1/user-groups/${group().id}/regions`, expected: [...(made.regions ?? [])].sort(insertedOrder) }),
    ],
    [
      'regions of a group by code',
      () => ({
        method: 'GET',
        url: `/api/v1/user-groups/by-code/${group().code}/regions`,
        expected: [...(made.regions ?? [])].sort(insertedOrder),
      }),
    ],
    ['all group regions', () => ({ method: 'GET', url: '/api/v1/user-group-regions', expected: [...(made.regions ?? [])].sort(idOrder) })],
    [
      'logs by owner',
      () => ({
        method: 'GET',
        url: '/api/v1/logs/by-owner?ownerType=TICKET&ownerId=T-PAGE',
        expected: [...(made.logs ?? [])].sort(startOrder),
      }),
    ],
    [
      'notifications by owner',
      () => ({
        method: 'GET',
        url: '/api/v1/notifications/by-owner?ownerType=TICKET&ownerId=T-PAGE',
        expected: [...(made.notifications ?? [])].sort(insertedOrder),
      }),
    ],
    [
      'sharings by owner',
      () => ({
        method: 'GET',
        url: '/api/v1/sharings/by-owner?ownerType=USER_GROUP&ownerId=g-page',
        expected: [...(made.sharings ?? [])].sort(insertedOrder),
      }),
    ],
    [
      'sharings by ref',
      () => ({
        method: 'GET',
        url: '/api/v1/sharings/by-ref?ownerType=USER_GROUP&refType=DOCUMENT&refId=d-1',
        expected: (made.sharings ?? []).filter((s) => (s as { refId?: string }).refId === 'd-1').sort(insertedOrder),
      }),
    ],
    [
      'sharings by refs',
      () => ({
        method: 'POST',
        url: '/api/v1/sharings/by-refs',
        payload: { ownerType: 'USER_GROUP', refIds: ['d-0', 'd-2', 'd-3'] },
        expected: (made.sharings ?? []).filter((s) => (s as { refId?: string }).refId !== 'd-1').sort(insertedOrder),
      }),
    ],
  ];

  describe.each(collections)('%s', (_name, collection) => {
    it('pages by limit and Link to the end: every row once, in order, the last page without Link', async () => {
      const { method, url, payload, expected } = collection();
      const limit = expected.length > 8 ? LIMIT : 2;
      const sep = url.includes('?') ? '&' : '?';
      const seen = await pages(method, `${url}${sep}minPosition=${at}&limit=${String(limit)}`, payload);
      expect(seen.map((p) => p.length)).toEqual(
        Array.from({ length: Math.ceil(expected.length / limit) }, (_, i) => Math.min(limit, expected.length - i * limit)),
      );
      expect(seen.flat().map((r) => r.id)).toEqual(expected.map((r) => r.id));
      // The default limit answers them all in one page, without Link.
      const whole = await t.call({ method, url, ...(payload === undefined ? {} : { payload }) });
      expect(whole.headers.link).toBeUndefined();
      expect(whole.json<Row[]>().map((r) => r.id)).toEqual(expected.map((r) => r.id));
    });
  });

  it('pages the groups of several users by (user, group) pairs, in the order of the users, each one once', async () => {
    const [member] = made.member ?? [];
    const [u0, u1] = made.users ?? [];
    const unknown = randomUUID();
    const userIds = [member?.id, unknown, u0?.id, u1?.id];
    const expected = [
      ...[...(made.groups ?? [])].sort(codeOrder).map((g) => `${member?.id ?? ''} ${g.id}`),
      `${u0?.id ?? ''} ${group().id}`,
      `${u1?.id ?? ''} ${group().id}`,
    ];
    const sizes: number[] = [];
    const seen: string[] = [];
    const merged: Record<string, string[]> = {};
    for (let url: string | undefined = `/api/v1/user-groups/by-users?minPosition=${at}&limit=5`; url !== undefined;) {
      const res: TestResponse = await t.call({ method: 'POST', url, payload: { userIds } });
      expect(res.statusCode, res.body).toBe(200);
      const page = Object.entries(res.json<Record<string, Row[]>>());
      sizes.push(page.reduce((n, [, groups]) => n + groups.length, 0));
      for (const [userId, groups] of page) {
        merged[userId] = [...(merged[userId] ?? []), ...groups.map((g) => g.id)];
        seen.push(...groups.map((g) => `${userId} ${g.id}`));
      }
      url = nextOf(res);
    }
    expect(sizes).toEqual([5, 5, 4]);
    expect(seen).toEqual(expected);
    expect(Object.keys(merged)).toEqual(userIds);
    expect(merged[unknown]).toEqual([]);
    const whole = await t.call({ method: 'POST', url: '/api/v1/user-groups/by-users', payload: { userIds } });
    expect(whole.headers.link).toBeUndefined();
    expect(Object.values(whole.json<Record<string, Row[]>>()).flat()).toHaveLength(expected.length);
    const stranger = Buffer.from(JSON.stringify(['G', randomUUID()])).toString('base64url');
    const refused = await t.call({ method: 'POST', url: `/api/v1/user-groups/by-users?cursor=${stranger}`, payload: { userIds } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: 'REQUEST.INVALID_CURSOR' });
  });

  it("narrows every page to what the caller's access rules cover", async () => {
    const expression = JSON.stringify([{ column: 'code', operator: 'LT', value: 'P0500' }]);
    await create('/api/v1/access-rules', {
      code: 'PAGED_LOW',
      name: 'low',
      entityName: 'worklog-types',
      fullAccess: false,
      accessRule: 'READ',
      expression,
    });
    const token = await signHs256(TEST_SECRET, { sub: 'paged-low', roles: ['PAGED_LOW'] });
    const covered = (made.worklogTypes ?? []).filter((r) => (r.code ?? '') < 'P0500').sort(codeOrder);
    expect(covered.length).toBeGreaterThan(3);
    const seen: Row[][] = [];
    for (let url: string | undefined = `/api/v1/worklog-types?minPosition=${at}&limit=3`; url !== undefined;) {
      const res: TestResponse = await t.call({ method: 'GET', url, headers: { authorization: `Bearer ${token}` }, as: null });
      expect(res.statusCode, res.body).toBe(200);
      seen.push(res.json<Row[]>());
      url = nextOf(res);
    }
    expect(seen.slice(0, -1).every((p) => p.length === 3)).toBe(true);
    expect(seen.flat().map((r) => r.id)).toEqual(covered.map((r) => r.id));
  });

  it('names the next page by the query as the client sent it, with only its cursor replaced', async () => {
    // An escape the query parser keeps as it is (`%FF` is no UTF-8) names the owner `%FF`: decoded
    // and encoded again, the next page would name another owner.
    const log = { ownerType: 'TICKET', ownerId: '%FF', logTypeCode: 'HTTP_OUT', request: 'GET /', response: '200 OK' };
    const dayLog = (day: string) => ({
      ...log,
      correlationId: randomUUID(),
      startDate: `2026-01-0${day}T00:00:00Z`,
      endDate: `2026-01-0${day}T00:00:00Z`,
    });
    const rows = [await create('/api/v1/logs', dayLog('1'))];
    rows.push(await create('/api/v1/logs', dayLog('2')));
    const first = await call({ method: 'GET', url: `/api/v1/logs/by-owner?ownerType=TICKET&ownerId=%FF&limit=1&minPosition=${at}` });
    expect(first.json<Row[]>().map((r) => r.id)).toEqual([rows[0]?.id]);
    const next = nextOf(first) ?? '';
    expect(next).toMatch(
      new RegExp(`^/api/v1/logs/by-owner\\?ownerType=TICKET&ownerId=%FF&limit=1&minPosition=${at}&cursor=[A-Za-z0-9_-]+$`),
    );
    const second = await call({ method: 'GET', url: next });
    expect(second.json<Row[]>().map((r) => r.id)).toEqual([rows[1]?.id]);
  });

  it('refuses a limit over the maximum, under 1 or not a number, and a cursor it did not give out, with the error body', async () => {
    for (const limit of ['10001', '0', 'ten']) {
      const res = await t.call({ method: 'GET', url: `/api/v1/worklog-types?limit=${limit}` });
      expect(res.statusCode, limit).toBe(400);
      expect(res.json()).toMatchObject({ code: 'REQUEST.VALIDATION_FAILED', status: 'BAD_REQUEST' });
    }
    expect((await t.call({ method: 'GET', url: '/api/v1/worklog-types?limit=10000' })).statusCode).toBe(200);
    const forged = [
      'AAAA', // not JSON
      Buffer.from('{"a":1}').toString('base64url'), // not a pair
      Buffer.from('[1,"x"]').toString('base64url'), // a number where the order is by code
      Buffer.from('["x",""]').toString('base64url'), // no id
    ];
    for (const cursor of forged) {
      const res = await t.call({ method: 'GET', url: `/api/v1/worklog-types?cursor=${cursor}` });
      expect(res.statusCode, cursor).toBe(400);
      expect(res.json()).toMatchObject({
        code: 'REQUEST.INVALID_CURSOR',
        status: 'BAD_REQUEST',
        errors: [expect.stringMatching(/^cursor: /)],
      });
    }
    const malformed = await t.call({ method: 'GET', url: '/api/v1/users/by-type/INDIVIDUAL?cursor=not%20base64' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json()).toMatchObject({ code: 'REQUEST.VALIDATION_FAILED' });
  });

  it('a row written or deleted between pages makes no other row repeat or go missing', async () => {
    const base = '/api/v1/user-group-types';
    const rows: Row[] = [];
    for (const code of ['C01', 'C03', 'C05', 'C07', 'C09', 'C11', 'C13', 'C15'])
      rows.push(await create(base, { code, name: code, registry: {} }));
    const first = await t.call({ method: 'GET', url: `${base}?minPosition=${at}&limit=3` });
    expect(first.json<Row[]>().map((r) => r.code)).toEqual(['C01', 'C03', 'C05']);
    // Before the cursor (an offset would then repeat C05), after it, and one not yet sent deleted.
    await create(base, { code: 'C00', name: 'C00', registry: {} });
    await create(base, { code: 'C08', name: 'C08', registry: {} });
    const gone = rows.find((r) => r.code === 'C11');
    expect((await call({ method: 'DELETE', url: `${base}/${gone?.id ?? ''}` })).statusCode).toBe(204);
    const next = nextOf(first);
    expect(next).toBeDefined();
    // The later writes are waited for (the Link keeps the first page's parameters, this one too).
    const rest = await pages('GET', (next ?? '').replace(/minPosition=\d+/, `minPosition=${at}`));
    // TEAM, made first, sorts after every C.
    expect(rest.flat().map((r) => r.code)).toEqual(['C07', 'C08', 'C09', 'C13', 'C15', 'TEAM']);
  });

  // A thousand writes: on the embedded stores only (the paging itself is the same on every peer).
  it.skipIf(mongodbUrl !== undefined)('list all answers the first 1000 records by default and says that more follow', async () => {
    const base = '/api/v1/log-types';
    for (let i = 0; i < 1001; i++) {
      const code = `Z${String(i).padStart(4, '0')}`;
      await create(base, { code, name: code });
    }
    const first = await t.call({ method: 'GET', url: `${base}?minPosition=${at}` });
    const codes = first.json<Row[]>().map((r) => r.code);
    // HTTP_OUT, made first, sorts before every Z.
    expect(codes).toHaveLength(1000);
    expect(codes.slice(0, 2)).toEqual(['HTTP_OUT', 'Z0000']);
    const next = nextOf(first);
    expect(next).toMatch(/^\/api\/v1\/log-types\?minPosition=\d+&cursor=[A-Za-z0-9_-]+$/);
    const last = await t.call({ method: 'GET', url: next ?? '' });
    expect(last.json<Row[]>().map((r) => r.code)).toEqual(['Z0999', 'Z1000']);
    expect(last.headers.link).toBeUndefined();
  });
}

describe('a row that moves while its page is read', () => {
  it('makes no row that no one touched go missing or repeat', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'paging-race-'));
    const stores = openEmbeddedStores(dataDir);
    let move: (() => Promise<void>) | undefined;
    const readStore = intercept(stores.readStore, 'getMany', async (collection, ids) => {
      // Once, between the read of a page's ids and that of its last row: the row is renamed.
      const now = move;
      move = undefined;
      if (now !== undefined) await now();
      return stores.readStore.getMany(collection, ids);
    });
    const t = await startTestApp({ dataDir, stores: { ...stores, readStore } });
    try {
      const ids: Record<string, string> = {};
      for (const code of ['K1', 'K2', 'K3', 'K4', 'K5']) {
        const res = await t.call({ method: 'POST', url: '/api/v1/worklog-types', payload: { code, name: code } });
        ids[code] = res.json<Row>().id;
      }
      let at = '';
      move = async () => {
        const res = await t.call({
          method: 'PATCH',
          url: `/api/v1/worklog-types/${ids.K2 ?? ''}?immediatelyRefresh=true`,
          payload: { code: 'K9' },
        });
        at = String(res.headers['x-event-position']);
      };
      const first = await t.call({ method: 'GET', url: '/api/v1/worklog-types?limit=2' });
      const seen = first.json<Row[]>().map((r) => String(r.code));
      for (let next = nextOf(first); next !== undefined;) {
        const page = await t.call({ method: 'GET', url: next.includes('minPosition=') ? next : `${next}&minPosition=${at}` });
        expect(page.statusCode, page.body).toBe(200);
        seen.push(...page.json<Row[]>().map((r) => String(r.code)));
        next = nextOf(page);
      }
      // K2 became K9 during the first page: it is sent as one or the other, the others once each.
      const untouched = seen.filter((c) => c !== 'K2' && c !== 'K9');
      expect(untouched).toEqual(['K1', 'K3', 'K4', 'K5']);
    } finally {
      await t.close();
    }
  });
});
