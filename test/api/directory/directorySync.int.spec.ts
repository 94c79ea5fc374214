// POST /api/v1/directory/sync against a real OpenLDAP: a job with steps and progress that creates,
// updates and disables users (and their directory-backed groups) as the actor `directory-sync`,
// one at a time (409), admin only, appending nothing when the directory has not changed, refusing
// an answer over the size limit, and run by itself every LDAP_SYNC_INTERVAL_MS.

import { randomUUID } from 'node:crypto';
import { Attribute, Change, Client } from 'ldapts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ldapDirectory, type LdapSettings } from '../../../infra/ldap/ldapDirectory.ts';
import type { Directory } from '../../../domain/ports.ts';
import { manualClock, stageServiceJob, startTestApp, type TestApp } from '../../support/testApp.ts';
import { ADMIN_DN, ADMIN_PASSWORD, BASE_DN, ldapUrl, openLdapSettings, titled } from '../../support/openldap.ts';

type JobState = {
  status: string;
  progress?: Record<string, unknown>;
  result?: Record<string, unknown>;
  error?: { code: string; message: string; errors: string[] };
};
type Ack = { acknowledge: boolean; jobId: string };
type HistoryPage = { content?: { actor: string; type: string }[] } | { actor: string; type: string }[];

/** A subtree of the directory of this test's own: people and groups it adds and removes. */
async function subtree(): Promise<{
  base: string;
  admin: Client;
  person: (uid: string, sn: string) => Promise<void>;
  group: (cn: string, uids: string[]) => Promise<void>;
}> {
  const admin = new Client({ url: ldapUrl() ?? '' });
  await admin.bind(ADMIN_DN, ADMIN_PASSWORD);
  const base = `ou=sync-${randomUUID().slice(0, 8)},${BASE_DN}`;
  await admin.add(base, { objectClass: 'organizationalUnit', ou: base.slice(3, base.indexOf(',')) });
  return {
    base,
    admin,
    person: (uid, sn) =>
      admin.add(`uid=${uid},${base}`, {
        objectClass: 'inetOrgPerson',
        uid,
        cn: `${uid} ${sn}`,
        sn,
        givenName: uid.toUpperCase(),
        mail: `${uid}@example.org`,
        userPassword: `${uid}-secret`,
      }),
    group: (cn, uids) => admin.add(`cn=${cn},${base}`, { objectClass: 'groupOfNames', cn, member: uids.map((u) => `uid=${u},${base}`) }),
  };
}

async function stateOf(t: TestApp, jobId: string): Promise<JobState> {
  for (let i = 0; i < 400; i++) {
    const state = (await t.call({ method: 'GET', url: `/api/v1/jobs/${jobId}/state` })).json<JobState>();
    if (state.status === 'COMPLETED' || state.status === 'FAILED') return state;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`job ${jobId} did not end`);
}

async function sync(t: TestApp): Promise<JobState & { jobId: string }> {
  const res = await t.call({ method: 'POST', url: '/api/v1/directory/sync' });
  expect(res.statusCode, res.body).toBe(202);
  const { jobId } = res.json<Ack>();
  expect(res.headers.location).toBe(`/api/v1/jobs/${jobId}/state`);
  return { jobId, ...(await stateOf(t, jobId)) };
}

const historyOf = async (t: TestApp, code: string): Promise<{ actor: string; type: string }[]> => {
  const page = (await t.call({ method: 'GET', url: `/api/v1/users/${encodeURIComponent(code)}/history` })).json<HistoryPage>();
  return Array.isArray(page) ? page : (page.content ?? []);
};

async function seededApp(settings: LdapSettings, extra: Parameters<typeof startTestApp>[0] = {}): Promise<TestApp> {
  const t = await startTestApp({ ...extra, extra: { ...extra.extra, directory: ldapDirectory(settings) } });
  await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } });
  return t;
}

describe.skipIf(ldapUrl() === undefined)(titled('directory sync on OpenLDAP'), () => {
  let t: TestApp;
  let dir: Awaited<ReturnType<typeof subtree>>;
  const RULE = '9b2e6c1a-1111-4a2b-8c3d-4e5f6a7b8c01';
  beforeAll(async () => {
    dir = await subtree();
    await dir.person('ann', 'Adams');
    await dir.person('ben', 'Brown');
    await dir.person('eve', 'Evans');
    await dir.group('ops', ['ann']);
    t = await seededApp(openLdapSettings({ userBase: dir.base }));
    const post = async (url: string, payload: unknown) => {
      const res = await t.call({ method: 'POST', url, payload });
      if (res.statusCode !== 201) throw new Error(`${url}: ${res.body}`);
    };
    await post('/api/v1/access-rules', { id: RULE, code: 'OPERATOR', name: 'Operators', entityName: 'users', fullAccess: true });
    await post('/api/v1/user-groups', {
      code: 'OPS',
      name: 'Ops',
      type: 'TEAM',
      chars: {},
      ldapMemberOf: `cn=ops,${dir.base}`,
      associatedUserRoleId: RULE,
    });
    await post('/api/v1/user-groups', { code: 'LOCAL', name: 'Local', type: 'TEAM', chars: {} });
    await post('/api/v1/users', { code: 'old', type: 'INDIVIDUAL', givenName: 'Old', chars: {}, authentication: 'LDAP' });
    await post('/api/v1/users', { code: 'eve', type: 'INDIVIDUAL', givenName: 'Local Eve', chars: {}, authentication: 'PASSWORD' });
  });
  afterAll(async () => {
    await t.close();
    await dir.admin.unbind();
  });

  it("creates the directory's people with their groups, disables who left, as a job with steps and progress", async () => {
    const state = await sync(t);
    expect(state.status, JSON.stringify(state)).toBe('COMPLETED');
    expect(state.result).toMatchObject({ people: 3, created: 2, updated: 0, disabled: 1, unchanged: 0, skipped: 1, failed: 0 });
    expect(state.progress).toMatchObject({ created: 2, disabled: 1 });
    const ann = (await t.call({ method: 'GET', url: '/api/v1/users/ann' })).json<Record<string, unknown>>();
    expect(ann).toMatchObject({
      code: 'ann',
      type: 'INDIVIDUAL',
      givenName: 'ANN',
      familyName: 'Adams',
      email: 'ann@example.org',
      authentication: 'LDAP',
      status: 'ENABLE',
      groups: ['OPS'],
    });
    expect((await t.call({ method: 'GET', url: '/api/v1/users/old' })).json<{ status: string }>().status).toBe('DISABLE');
    // A local account with a directory person's code is never taken over.
    expect((await t.call({ method: 'GET', url: '/api/v1/users/eve' })).json<{ authentication: string; givenName: string }>()).toMatchObject(
      { authentication: 'PASSWORD', givenName: 'Local Eve' },
    );
    const job = (await t.call({ method: 'GET', url: `/api/v1/jobs/${state.jobId}?expand=JOB_STEPS` })).json<{
      jobType: string;
      jobSteps: { name: string; status: string }[];
    }>();
    expect(job.jobType).toBe('DIRECTORY_SYNC');
    expect(job.jobSteps.map((s) => [s.name, s.status])).toEqual([
      ['read the directory', 'COMPLETED'],
      ['create users', 'COMPLETED'],
      ['update users', 'COMPLETED'],
      ['disable users', 'COMPLETED'],
    ]);
    // Every write to the users is the sync's.
    for (const code of ['ann', 'ben']) expect((await historyOf(t, code)).map((h) => h.actor)).toEqual(['directory-sync']);
    expect((await historyOf(t, 'old')).map((h) => h.actor)).toEqual(['alice-admin', 'directory-sync']);
    // The synced user logs in with the directory's password and its group's role.
    const token = await t.call({
      method: 'POST',
      url: '/api/v1/auth/token',
      payload: { username: 'ann', password: 'ann-secret' },
      as: null,
    });
    expect(token.json<{ roles: string[] }>().roles).toEqual(['OPERATOR']);
  });

  it('appends nothing to the users when the directory has not changed', async () => {
    const before = await Promise.all(['ann', 'ben', 'old', 'eve'].map((c) => historyOf(t, c)));
    const state = await sync(t);
    expect(state.result).toMatchObject({ people: 3, created: 0, updated: 0, disabled: 0, unchanged: 2, failed: 0 });
    expect(await Promise.all(['ann', 'ben', 'old', 'eve'].map((c) => historyOf(t, c)))).toEqual(before);
  });

  it('updates the mapped fields and directory-backed groups, keeps the others, and disables a person removed', async () => {
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/ann', payload: { groups: ['OPS', 'LOCAL'] } })).statusCode).toBe(200);
    await dir.admin.modify(
      `uid=ann,${dir.base}`,
      new Change({ operation: 'replace', modification: new Attribute({ type: 'sn', values: ['Archer'] }) }),
    );
    await dir.admin.modify(
      `cn=ops,${dir.base}`,
      new Change({ operation: 'replace', modification: new Attribute({ type: 'member', values: [`uid=ben,${dir.base}`] }) }),
    );
    await dir.admin.del(`uid=eve,${dir.base}`);
    const state = await sync(t);
    expect(state.result).toMatchObject({ people: 2, created: 0, updated: 2, disabled: 0, skipped: 0, failed: 0 });
    expect((await t.call({ method: 'GET', url: '/api/v1/users/ann' })).json<Record<string, unknown>>()).toMatchObject({
      familyName: 'Archer',
      groups: ['LOCAL'],
    });
    expect((await t.call({ method: 'GET', url: '/api/v1/users/ben' })).json<Record<string, unknown>>()).toMatchObject({ groups: ['OPS'] });
    await dir.admin.del(`uid=ben,${dir.base}`);
    expect((await sync(t)).result).toMatchObject({ people: 1, disabled: 1 });
    expect((await t.call({ method: 'GET', url: '/api/v1/users/ben' })).json<{ status: string }>().status).toBe('DISABLE');
    expect((await historyOf(t, 'ben')).map((h) => h.actor)).toEqual(['directory-sync', 'directory-sync', 'directory-sync']);
  });

  it('runs one sync at a time: a second while one runs is 409', async () => {
    const [a, b] = await Promise.all([
      t.call({ method: 'POST', url: '/api/v1/directory/sync' }),
      t.call({ method: 'POST', url: '/api/v1/directory/sync' }),
    ]);
    expect([a.statusCode, b.statusCode].toSorted()).toEqual([202, 409]);
    const refused = a.statusCode === 409 ? a : b;
    expect(refused.json<{ code: string }>().code).toBe('DIRECTORY.SYNC_RUNNING');
    await stateOf(t, (a.statusCode === 202 ? a : b).json<Ack>().jobId);
    // Another instance's sync holds the same lease.
    expect(await t.service.readStore.tryLease('directory-sync', 'another-instance', 60_000)).toBe(true);
    expect((await t.call({ method: 'POST', url: '/api/v1/directory/sync' })).statusCode).toBe(409);
    await t.service.readStore.releaseLease('directory-sync', 'another-instance');
  });

  it("is an admin's to start", async () => {
    expect((await t.call({ method: 'POST', url: '/api/v1/directory/sync', as: 'editor' })).statusCode).toBe(403);
    expect((await t.call({ method: 'POST', url: '/api/v1/directory/sync', as: null })).statusCode).toBe(401);
  });

  it('fails the job, changing nothing, when the directory answers more people than LDAP_SIZE_LIMIT', async () => {
    const small = await seededApp(openLdapSettings({ sizeLimit: 1 }));
    try {
      const state = await sync(small);
      expect(state.status).toBe('FAILED');
      expect(state.error?.message).toContain('The directory answered more people than the limit (LDAP_SIZE_LIMIT 1)');
      expect((await small.call({ method: 'GET', url: '/api/v1/users/alice' })).statusCode).toBe(404);
    } finally {
      await small.close();
    }
  });

  it('runs by itself every LDAP_SYNC_INTERVAL_MS', async () => {
    const clock = manualClock();
    const timed = await seededApp(openLdapSettings(), {
      clock,
      extra: { manualScheduler: true, settings: { directory: { syncIntervalMs: 60_000 } } },
    });
    try {
      await timed.service.scheduler.tick();
      expect((await timed.call({ method: 'GET', url: '/api/v1/users/alice' })).statusCode).toBe(404);
      clock.advance(60_000);
      await timed.service.scheduler.tick();
      const jobs = (await timed.call({ method: 'GET', url: '/api/v1/jobs' })).json<
        { id: string; jobType: string; data: { requestedBy: string } }[]
      >();
      const started = jobs.filter((j) => j.jobType === 'DIRECTORY_SYNC');
      expect(started.map((j) => j.data.requestedBy)).toEqual(['directory-sync']);
      expect((await stateOf(timed, started[0]?.id ?? '')).result).toMatchObject({ people: 4, created: 4 });
    } finally {
      await timed.close();
    }
  });
});

/** A real directory the test can make unreachable (another real adapter, on a closed port) or
 * hold before it answers the people: what an outage or a slow directory looks like to the sync. */
function switchable(settings: LdapSettings): Directory & { down: boolean; hold: () => () => void } {
  const up = ldapDirectory(settings);
  const unreachable = ldapDirectory({ ...settings, url: 'ldap://127.0.0.1:1', timeoutMs: 1000 });
  let gate: Promise<void> | undefined;
  const directory = {
    down: false,
    hold: () => {
      let open = (): void => undefined;
      gate = new Promise<void>((resolve) => (open = resolve));
      return () => {
        gate = undefined;
        open();
      };
    },
    authenticate: (username: string, password: string) => (directory.down ? unreachable : up).authenticate(username, password),
    people: async () => {
      await gate;
      return (directory.down ? unreachable : up).people();
    },
    close: () => Promise.resolve(),
  };
  return directory;
}

describe.skipIf(ldapUrl() === undefined)(titled('directory sync jobs: retry, cancel, a process that ended'), () => {
  let t: TestApp;
  let directory: ReturnType<typeof switchable>;
  beforeAll(async () => {
    directory = switchable(openLdapSettings());
    t = await startTestApp({ extra: { directory } });
    await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  });
  afterAll(() => t.close());

  it('runs a failed sync again on retry, as a new attempt with steps of its own', async () => {
    directory.down = true;
    const failed = await sync(t);
    expect(failed.status).toBe('FAILED');
    expect(failed.error?.message).toContain('The directory is unavailable');
    directory.down = false;
    const retry = await t.call({ method: 'POST', url: `/api/v1/jobs/${failed.jobId}/retry` });
    expect(retry.statusCode, retry.body).toBe(202);
    const state = await stateOf(t, failed.jobId);
    expect(state.status, JSON.stringify(state)).toBe('COMPLETED');
    expect(state.result).toMatchObject({ people: 4, created: 4 });
    const job = (await t.call({ method: 'GET', url: `/api/v1/jobs/${failed.jobId}?expand=JOB_STEPS` })).json<{
      data: { retries: unknown[] };
      jobSteps: { name: string; status: string }[];
    }>();
    expect(job.data.retries).toHaveLength(1);
    expect(job.jobSteps.filter((s) => s.name.endsWith('(attempt 2)')).map((s) => s.status)).toEqual([
      'COMPLETED',
      'COMPLETED',
      'COMPLETED',
      'COMPLETED',
    ]);
    expect(job.jobSteps.find((s) => s.name === 'read the directory')?.status).toBe('FAILED');
    // A client, even an admin, does not write the job for its runner.
    const faked = await t.call({ method: 'PATCH', url: `/api/v1/jobs/${failed.jobId}`, payload: { status: 'FAILED' } });
    expect(faked.json<{ code: string }>().code).toBe('JOB.SERVICE_JOB');
    const posted = await t.call({
      method: 'POST',
      url: '/api/v1/jobs',
      payload: { startDate: new Date().toISOString(), status: 'IN_PROGRESS', jobType: 'DIRECTORY_SYNC' },
    });
    expect(posted.json<{ code: string }>().code).toBe('JOB.SERVICE_JOB');
  });

  it('stops at the next step when cancelled while it runs, and writes nothing after', async () => {
    // A service of its own, where the sync would create every person.
    const held = switchable(openLdapSettings());
    const fresh = await startTestApp({ extra: { directory: held } });
    try {
      await fresh.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
      const open = held.hold();
      const { jobId } = (await fresh.call({ method: 'POST', url: '/api/v1/directory/sync' })).json<Ack>();
      const cancel = await fresh.call({ method: 'POST', url: `/api/v1/jobs/${jobId}/cancel` });
      expect(cancel.statusCode, cancel.body).toBe(202);
      // Asked of its runner: the job runs until the runner stops.
      expect((await fresh.call({ method: 'GET', url: `/api/v1/jobs/${jobId}` })).json<{ status: string }>().status).toBe('IN_PROGRESS');
      open();
      const state = await stateOf(fresh, jobId);
      expect(state.status, JSON.stringify(state)).toBe('FAILED');
      expect(state.error?.message).toContain('cancelled');
      expect((await fresh.call({ method: 'GET', url: '/api/v1/users/alice' })).statusCode).toBe(404);
    } finally {
      await fresh.close();
    }
  });

  it('ends FAILED a sync job its process left IN_PROGRESS, when the next sync takes the lease', async () => {
    const { id: orphan } = await stageServiceJob(t, { jobType: 'DIRECTORY_SYNC', data: { requestedBy: 'admin' } });
    const next = await sync(t);
    expect(next.status, JSON.stringify(next)).toBe('COMPLETED');
    const state = await stateOf(t, orphan);
    expect(state.status).toBe('FAILED');
    expect(state.error?.message).toContain('the process running this sync ended before it finished');
  });
});

describe('directory sync without a directory', () => {
  it('answers 503 DIRECTORY.NOT_CONFIGURED', async () => {
    const t = await startTestApp();
    try {
      const res = await t.call({ method: 'POST', url: '/api/v1/directory/sync' });
      expect(res.statusCode).toBe(503);
      expect(res.json<{ code: string }>().code).toBe('DIRECTORY.NOT_CONFIGURED');
    } finally {
      await t.close();
    }
  });
});
