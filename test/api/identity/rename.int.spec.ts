// A group renamed while 1,000 users belong to it: the groups of a user, the groups of several
// users and the group's region assignments show the new name once minPosition is reached; and a
// fresh rebuild of every identity read model equals the one built as the log grew.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readModelDocuments, startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
const USERS = 1000;
const userIds: string[] = [];
let groupId = '';
beforeAll(async () => {
  t = await startTestApp();
  await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } });
  groupId = (
    await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'BIG', name: 'Before', type: 'TEAM', chars: {} } })
  ).json<{ id: string }>().id;
  for (let i = 0; i < USERS; i += 50) {
    const made = await Promise.all(
      Array.from({ length: Math.min(50, USERS - i) }, (_, j) =>
        t.call({
          method: 'POST',
          url: '/api/v1/users',
          payload: { code: `member-${String(i + j)}`, type: 'INDIVIDUAL', givenName: 'M', chars: {}, groups: ['BIG'] },
        }),
      ),
    );
    for (const m of made) userIds.push(m.json<{ id: string }>().id);
  }
  await t.call({
    method: 'POST',
    url: '/api/v1/user-group-regions',
    payload: { userGroupId: groupId, regionId: '7a1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5' },
  });
}, 120_000);
afterAll(async () => {
  await t.close();
});

type Group = { code: string; name: string };

describe('a group renamed under 1,000 members', () => {
  it("shows the new name in each user's groups, in by-users and in its region assignments", async () => {
    expect(userIds).toHaveLength(USERS);
    const renamed = await t.call({ method: 'PATCH', url: `/api/v1/user-groups/${groupId}`, payload: { name: 'After' } });
    const at = String(renamed.headers['x-event-position']);
    for (const id of [userIds[0], userIds[USERS / 2], userIds[USERS - 1]]) {
      const groups = await t.call({ method: 'GET', url: `/api/v1/users/${id ?? ''}/groups?minPosition=${at}`, as: 'viewer' });
      expect(groups.json<Group[]>().map((g) => g.name)).toEqual(['After']);
    }
    const byUsers = await t.call({ method: 'POST', url: `/api/v1/user-groups/by-users?minPosition=${at}`, payload: { userIds } });
    const map = byUsers.json<Record<string, Group[]>>();
    expect(Object.keys(map)).toHaveLength(USERS);
    expect(Object.values(map).every((gs) => gs.length === 1 && gs[0]?.name === 'After')).toBe(true);
    const regions = await t.call({ method: 'GET', url: `/api/v1/user-groups/${groupId}/regions?minPosition=${at}` });
    expect(regions.json<{ userGroup: Group }[]>().map((r) => r.userGroup.name)).toEqual(['After']);
    const members = await t.call({ method: 'GET', url: `/api/v1/user-groups/BIG/users?minPosition=${at}` });
    expect(members.json<unknown[]>()).toHaveLength(USERS);
  });

  it('rebuilds every identity read model from the log into what the live fold made', async () => {
    await t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });
    for (const model of ['users', 'user_groups', 'user_group_regions', 'user_types', 'user_group_types']) {
      const before = await readModelDocuments(t, model);
      const ack = await t.call({ method: 'POST', url: `/api/v1/indexes/${model}/recreate` });
      expect(ack.statusCode, ack.body).toBe(202);
      await t.service.readModelJobs.idle();
      const job = await t.call({ method: 'GET', url: `/api/v1/jobs/${ack.json<{ jobId: string }>().jobId}` });
      expect(job.json()).toMatchObject({ status: 'COMPLETED' });
      expect(await readModelDocuments(t, model), model).toEqual(before);
    }
  }, 60_000);
});
