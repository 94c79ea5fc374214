// The runtime of a service: the one way to a resource service, and nothing shared between two
// runtimes of one process. Before it, a worker made its services over the log alone, and such a
// service deleted a record that others name without a word (its restrict-on-delete check had no
// referrers to ask about).

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userGroupType } from '../../modules/registries/domain/userGroupType.ts';
import { runtimeOver } from '../support/runtime.ts';
import { startIdentityApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startIdentityApp();
  expect(
    (await t.call({ method: 'POST', url: '/api/v1/user-groups', payload: { code: 'RT-NAMES-TEAM', name: 'g', type: 'TEAM', chars: {} } }))
      .statusCode,
  ).toBe(201);
});
afterAll(async () => {
  await t.close();
});

const asWorker = () => ({ actor: 'system:a-worker', now: new Date(), newId: randomUUID });

describe('a resource service got from the runtime', () => {
  it('refuses to delete a record others name, for a worker as for a route', async () => {
    // What a module's worker gets from its ModuleContext: the service's runtime.
    const types = t.service.runtime.service(userGroupType);
    await expect(types.remove('TEAM', asWorker())).rejects.toMatchObject({ code: 'USER_GROUP_TYPE.STILL_REFERENCED' });
    expect((await t.call({ method: 'GET', url: '/api/v1/user-group-types/TEAM' })).statusCode).toBe(200);
  });

  it('never deletes a record others name unchecked, even where no read model counts the references', async () => {
    const bare = runtimeOver(t.service.runtime.events).service(userGroupType);
    await expect(bare.remove('TEAM', asWorker())).rejects.toThrow(/read-model count/);
    expect((await t.call({ method: 'GET', url: '/api/v1/user-group-types/TEAM' })).statusCode).toBe(200);
  });
});

describe('two runtimes of one process', () => {
  it('share no service and no lock', async () => {
    const [one, two] = [runtimeOver(t.service.runtime.events), runtimeOver(t.service.runtime.events)];
    expect(one.service(userGroupType)).toBe(one.service(userGroupType));
    expect(one.service(userGroupType)).not.toBe(two.service(userGroupType));
    const held = await one.locks.acquire([{ name: 'shared?', exclusive: true }]);
    // Taken at once in the other runtime: the lock is the first runtime's alone.
    const other = await two.locks.acquire([{ name: 'shared?', exclusive: true }]);
    other();
    held();
  });
});
