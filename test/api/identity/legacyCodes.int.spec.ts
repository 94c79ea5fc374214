// Records stored before codes shaped like a UUID were refused: such a record stays patchable (the
// code is judged only when a write sets or changes it), and its code never stands in for a record
// with that id, when a group names its role by id or a user's roles are read.

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userGroup } from '../../../modules/identity/domain/userGroup.ts';
import type { EventStore } from '../../../domain/ports.ts';
import { accessRule } from '../../../domain/access/accessRule.ts';
import { EVENT_LOG_FILE, READ_MODELS_FILE } from '../../../infra/embedded.ts';
import { openSqliteEventStore } from '../../../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../../../infra/sqlite/readStore.ts';
import { storedBefore as storeBefore } from '../../support/storedBefore.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

let t: TestApp;
let events: EventStore;
type ErrorBody = { code: string; errors: string[] };

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'legacy-codes-'));
  events = openSqliteEventStore(join(dataDir, EVENT_LOG_FILE));
  t = await startTestApp({
    dataDir,
    stores: { eventStore: events, readStore: openSqliteReadStore({ path: join(dataDir, READ_MODELS_FILE) }) },
  });
  expect(
    (await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } })).statusCode,
  ).toBe(201);
});
afterAll(async () => {
  await t.close();
});

const created = async (url: string, payload: Record<string, unknown>): Promise<{ id: string; code: string }> => {
  const res = await t.call({ method: 'POST', url, payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
};

/** A record stored before the refusal (test/support/storedBefore.ts), once the read models have
 * it, as a record of long ago would be. */
async function storedBefore(category: string, like: { id: string }, changes: Record<string, unknown>): Promise<string> {
  const { id, position } = await storeBefore(events, category, like, changes);
  await t.call({ method: 'POST', url: `/api/v1/access-rules/count?minPosition=${position}`, payload: {} });
  await t.call({ method: 'POST', url: `/api/v1/user-groups/count?minPosition=${position}`, payload: {} });
  return id;
}

const rule = (code: string) => ({ code, name: code, entityName: 'users', accessRule: 'READ', fullAccess: true });

describe('an access rule whose code is shaped like a UUID, stored before such codes were refused', () => {
  it('stays patchable and replaceable while its code stays; setting such a code is still refused', async () => {
    const shaped = randomUUID();
    const id = await storedBefore(accessRule.category, await created('/api/v1/access-rules', rule('LIKE_OLD')), { code: shaped });
    const patched = await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${id}`, payload: { name: 'Renamed' } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json()).toMatchObject({ id, code: shaped, name: 'Renamed' });
    const replaced = await t.call({ method: 'PUT', url: `/api/v1/access-rules/${id}`, payload: { ...rule(shaped), name: 'Replaced' } });
    expect(replaced.statusCode, replaced.body).toBe(200);
    // Set or changed to such a code: refused, on this record as on any other.
    const other = randomUUID();
    const changed = await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${id}`, payload: { code: other } });
    expect([changed.statusCode, changed.json<ErrorBody>().errors]).toEqual([
      400,
      [`code: ${JSON.stringify(other)} never has the form of a UUID (a UUID in a path names a record by its id)`],
    ]);
    expect((await t.call({ method: 'POST', url: '/api/v1/access-rules', payload: rule(other) })).statusCode).toBe(400);
    // It may leave it for a plain code, and not come back.
    expect((await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${id}`, payload: { code: 'NOW_PLAIN' } })).statusCode).toBe(200);
    expect((await t.call({ method: 'PATCH', url: `/api/v1/access-rules/${id}`, payload: { code: shaped } })).statusCode).toBe(400);
  });

  it('is never the rule a group names by that id: a group cannot name it so, and a group stored naming it grants nothing', async () => {
    const shaped = randomUUID();
    await storedBefore(accessRule.category, await created('/api/v1/access-rules', rule('LIKE_OLD_2')), { code: shaped });
    // A reference by id is resolved by id: no rule has this one.
    const named = await t.call({
      method: 'POST',
      url: '/api/v1/user-groups',
      payload: { code: 'BY_SHAPED', name: 'g', type: 'TEAM', chars: {}, associatedUserRoleId: shaped },
    });
    expect([named.statusCode, named.json<ErrorBody>().code]).toEqual([422, 'USER_GROUP.REFERENCE_NOT_FOUND']);
    // A group stored naming it (as the old check let it) gives its members no role.
    const plain = await created('/api/v1/user-groups', { code: 'LIKE_OLD_GROUP', name: 'g', type: 'TEAM', chars: {} });
    await storedBefore(userGroup.category, plain, { code: 'OLD_GROUP', associatedUserRoleId: shaped });
    await created('/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' });
    const member = await created('/api/v1/users', {
      code: 'old-member',
      type: 'INDIVIDUAL',
      givenName: 'm',
      chars: {},
      groups: ['OLD_GROUP'],
    });
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${member.id}/roles` })).json()).toEqual([]);
    // A rule made later with that id is the one the id names.
    const later = await created('/api/v1/access-rules', { ...rule('LATER'), id: shaped });
    expect(later.id).toBe(shaped);
    expect((await t.call({ method: 'GET', url: `/api/v1/users/${member.id}/roles` })).json()).toEqual(['LATER']);
    await created('/api/v1/user-groups', { code: 'BY_LATER', name: 'g', type: 'TEAM', chars: {}, associatedUserRoleId: shaped });
  });
});
