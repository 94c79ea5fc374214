// Read-model administration over HTTP: list, refresh, a blue/green recreate as a job, and a
// delete whose rebuild is resumed by the scheduler after a restart.

import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EVENT_LOG_FILE, READ_MODELS_FILE } from '../../infra/embedded.ts';
import { openSqliteEventStore } from '../../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../../infra/sqlite/readStore.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

const apps: TestApp[] = [];
afterEach(async () => {
  for (const a of apps.splice(0)) await a.close();
});

type Job = { id: string; status: string; data: Record<string, unknown> };
type ReadModel = { name: string; documents: number; state: string; generation: number | null };

async function seed(t: TestApp, n: number): Promise<string> {
  let at = '';
  for (let i = 0; i < n; i++) {
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/user-group-types',
      payload: { code: `T${String(i)}`, name: `Type ${String(i)}`, registry: {} },
    });
    at = String(res.headers['x-event-position']);
  }
  return at;
}

const model = async (t: TestApp, name: string) =>
  (await t.call({ method: 'GET', url: '/api/v1/indexes' })).json<ReadModel[]>().find((m) => m.name === name);

describe('read-model administration', () => {
  it('lists every read model and refreshes them all, admin only', async () => {
    const t = await startTestApp();
    apps.push(t);
    await seed(t, 3);
    const refreshed = await t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });
    expect(refreshed.statusCode).toBe(200);
    expect(refreshed.json()).toContainEqual({
      task: 'user_group_types',
      indexed: 3,
      failed: 0,
      failures: [],
      deleted: 0,
      took: expect.stringMatching(/ ms$/) as unknown,
    });
    expect(await model(t, 'user_group_types')).toMatchObject({
      documents: 3,
      state: 'live',
      generation: 0,
      position: expect.any(String),
      lag: 0,
    });
    expect((await t.call({ method: 'GET', url: '/api/v1/indexes' })).json<ReadModel[]>().map((m) => m.name)).toEqual(
      expect.arrayContaining(['jobs', 'job_steps', 'log_types']),
    );
    for (const as of ['editor', 'viewer'] as const) {
      expect((await t.call({ as, method: 'GET', url: '/api/v1/indexes' })).statusCode).toBe(403);
      expect((await t.call({ as, method: 'POST', url: '/api/v1/indexes/refresh' })).statusCode).toBe(403);
      expect((await t.call({ as, method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' })).statusCode).toBe(403);
      expect((await t.call({ as, method: 'DELETE', url: '/api/v1/indexes/user_group_types' })).statusCode).toBe(403);
    }
    expect((await t.call({ method: 'POST', url: '/api/v1/indexes/nope/recreate' })).statusCode).toBe(404);
  });

  it('recreates into a new generation while the old one serves, then swaps and drops the old one', async () => {
    const t = await startTestApp();
    apps.push(t);
    const at = await seed(t, 40);
    const search = () =>
      t.call({ method: 'POST', url: `/api/v1/user-group-types/search?minPosition=${at}`, payload: { sort: [{ column: 'code' }] } });
    const before = (await search()).json<unknown[]>();
    expect(before).toHaveLength(40);
    const ack = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
    expect(ack.statusCode).toBe(202);
    const { jobId } = ack.json<{ acknowledge: boolean; jobId: string }>();
    // Searches answer in full throughout.
    const during: number[] = [];
    const running = t.service.readModelJobs.idle();
    for (let i = 0; i < 20; i++) during.push((await search()).json<unknown[]>().length);
    await running;
    expect(new Set(during)).toEqual(new Set([40]));
    const job = (await t.call({ method: 'GET', url: `/api/v1/jobs/${jobId}` })).json<Job>();
    expect(job).toMatchObject({
      status: 'COMPLETED',
      jobType: 'READ_MODEL_RECREATE',
      data: { result: { generation: 1, documents: 40, poison: [] } },
    });
    expect(await model(t, 'user_group_types')).toMatchObject({ generation: 1, state: 'live', documents: 40 });
    // The new generation equals the old fold, and keeps following the log.
    expect((await search()).json()).toEqual(before);
    const next = await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'LATE', name: 'Late', registry: {} } });
    const count = await t.call({
      method: 'POST',
      url: `/api/v1/user-group-types/count?minPosition=${String(next.headers['x-event-position'])}`,
      payload: {},
    });
    expect(count.json()).toBe(41);
    expect(t.service.readModels.statuses().find((s) => s.name === 'user_group_types')?.generation).toBe(1);
  });

  it('drops a read model: 503 until its rebuild has caught up, and a restart resumes the rebuild job', async () => {
    // An API-only process creates the job but runs none, as if its runner had died at once.
    const api = await startTestApp({ role: 'api' });
    await seed(api, 5);
    const dropped = await api.call({ method: 'DELETE', url: '/api/v1/indexes/user_group_types' });
    expect(dropped.statusCode).toBe(204);
    const refused = await api.call({ method: 'POST', url: '/api/v1/user-group-types/search', payload: {} });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({ status: 'SERVICE_UNAVAILABLE', message: expect.stringContaining('rebuilding') as unknown });
    await api.close({ keepData: true });

    const t = await startTestApp({ dataDir: api.dataDir });
    apps.push(t);
    expect((await t.call({ method: 'POST', url: '/api/v1/user-group-types/search', payload: {} })).statusCode).toBe(503);
    // The scheduler finds the job IN_PROGRESS with no runner once the jobs read model has it.
    const refreshed = await t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });
    expect(refreshed.json()).toContainEqual(expect.objectContaining({ task: 'jobs', failed: 0 }));
    for (let i = 0; i < 50 && (await t.service.scheduler.tick()) === 0; i++) await new Promise((r) => setTimeout(r, 20));
    await t.service.readModelJobs.idle();
    const ok = await t.call({ method: 'POST', url: '/api/v1/user-group-types/search', payload: {} });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toHaveLength(5);
    const statuses = await t.call({ method: 'GET', url: '/api/v1/indexes' });
    const jobId = statuses.json<ReadModel[]>().find((m) => m.name === 'user_group_types');
    expect(jobId).toMatchObject({ generation: 1, state: 'live', documents: 5 });
    const jobs = await t.call({
      method: 'POST',
      url: '/api/v1/jobs/search',
      payload: { filter: [{ column: 'jobType', value: 'READ_MODEL_RECREATE' }] },
    });
    const found = await t.call({ method: 'GET', url: `/api/v1/jobs/${jobs.json<Job[]>()[0]?.id ?? ''}` });
    expect(found.json()).toMatchObject({
      status: 'COMPLETED',
      data: { resumed: [{ reason: expect.stringContaining('no process was running it') as unknown }] },
    });
  });

  it('refreshes the documents a Filtering selects from their streams, repairing drift, as a job', async () => {
    const t = await startTestApp();
    apps.push(t);
    const at = await seed(t, 3);
    await t.call({ method: 'POST', url: `/api/v1/user-group-types/count?minPosition=${at}`, payload: {} });
    const one = (await t.call({ method: 'GET', url: '/api/v1/user-group-types/T1' })).json<{
      id: string;
      auditInfo: { version: number };
    }>();
    // Drift: the stored document no longer says what the log says (written behind the service's back).
    const reads = openSqliteReadStore({ path: join(t.dataDir, READ_MODELS_FILE) });
    await reads.applyBatch(
      'user_group_types',
      [{ kind: 'upsert', id: one.id, version: 0, doc: { ...one, name: 'corrupted' }, repair: true }],
      0n,
      'drift',
    );
    await reads.close();
    const search = async () =>
      (
        await t.call({ method: 'POST', url: '/api/v1/user-group-types/search', payload: { filter: [{ column: 'code', value: 'T1' }] } })
      ).json<{ name: string }[]>();
    expect((await search())[0]?.name).toBe('corrupted');
    const bad = await t.call({
      method: 'POST',
      url: '/api/v1/indexes/user_group_types/refresh',
      payload: { filter: [{ column: 'nope', value: 'x' }] },
    });
    expect(bad.statusCode).toBe(400);
    const ack = await t.call({
      method: 'POST',
      url: '/api/v1/indexes/user_group_types/refresh',
      payload: { filter: [{ column: 'code', operator: 'IN', values: ['T1', 'T2'] }] },
    });
    expect(ack.statusCode).toBe(202);
    await t.service.readModelJobs.idle();
    const job = (await t.call({ method: 'GET', url: `/api/v1/jobs/${ack.json<{ jobId: string }>().jobId}` })).json<Job>();
    expect(job).toMatchObject({
      status: 'COMPLETED',
      jobType: 'READ_MODEL_REFRESH',
      data: { result: { matched: 2, repaired: 1, unchanged: 1, failed: 0 } },
    });
    expect((await search())[0]?.name).toBe('Type 1');
    // The repaired document keeps following the log.
    const patched = await t.call({ method: 'PATCH', url: '/api/v1/user-group-types/T1', payload: { name: 'Renamed' } });
    await t.call({
      method: 'POST',
      url: `/api/v1/user-group-types/count?minPosition=${String(patched.headers['x-event-position'])}`,
      payload: {},
    });
    expect((await search())[0]?.name).toBe('Renamed');
    expect((await t.call({ as: 'editor', method: 'POST', url: '/api/v1/indexes/user_group_types/refresh', payload: {} })).statusCode).toBe(
      403,
    );
  });

  it('records a poison event on the recreate job and skips it', async () => {
    const t = await startTestApp();
    apps.push(t);
    await seed(t, 2);
    // An event no code can read: a schema version older than any upcaster knows.
    const log = openSqliteEventStore(join(t.dataDir, EVENT_LOG_FILE));
    const id = '7c0f6f43-6a0e-4b8e-9d53-2f4a1f1f0b11';
    await log.append({
      stream: `userGroupType-${id}`,
      expected: 'no_stream',
      events: [
        {
          id: '0d7d3a84-5f2e-4f0a-a1b0-9a3c2f7e5d21',
          type: 'UserGroupTypeCreated',
          schemaVersion: 0,
          data: { id, code: 'POISON', name: 'p', registry: {} },
          metadata: { actor: 't', at: '2026-01-01T00:00:00.000Z' },
        },
      ],
    });
    await log.close();
    const ack = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
    await t.service.readModelJobs.idle();
    const job = (await t.call({ method: 'GET', url: `/api/v1/jobs/${ack.json<{ jobId: string }>().jobId}` })).json<Job>();
    expect(job).toMatchObject({
      status: 'COMPLETED',
      data: {
        result: {
          documents: 2,
          poison: [
            {
              stream: `userGroupType-${id}`,
              type: 'UserGroupTypeCreated',
              error: expect.stringContaining('no upcaster from schema version 0') as unknown,
            },
          ],
        },
      },
    });
    expect((await t.call({ method: 'POST', url: '/api/v1/user-group-types/count', payload: {} })).json()).toBe(2);
  });
});
