// The read-model jobs under the races and failures an adversarial review tried (issue 13):
// concurrent recreates and deletes, dead runners and held leases, retried keys, ROLE=worker,
// other instances around a swap, late generation reads, and the job and job-step routes' edges.
// On the embedded stores, and with the read models (generations, leases, checkpoints) and blobs on
// each MongoDB peer (test/support/mongoPeers.ts: FerretDB in every run), the log embedded.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { afterAll, afterEach, describe, expect } from 'vitest';
import type { BlobStore, EventStore, ReadStore } from '../../domain/ports.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { openStores } from '../../infra/stores.ts';
import { eachMongoPeer, withDatabase } from '../support/mongoPeers.ts';
import { limitedIt, type PeerLimits } from '../support/peerLimits.ts';
import { GENERATIONS } from '../../workers/readModels.ts';
import { manualClock, startTestApp, type TestApp } from '../support/testApp.ts';

const apps: TestApp[] = [];
afterEach(async () => {
  for (const a of apps.splice(0).reverse()) await a.close().catch(() => undefined);
});

type Job = { id: string; status: string; data: Record<string, unknown> };
type ReadModel = {
  name: string;
  documents: number;
  state: string;
  generation: number | null;
  building: number | null;
  jobId: string | null;
};

type Stores = { eventStore: EventStore; readStore: ReadStore; blobStore: BlobStore };

describe('on the embedded stores', () => {
  readModelJobsSuite((dataDir) => Promise.resolve(openEmbeddedStores(dataDir)));
});

eachMongoPeer('read-model jobs, the read models and blobs', (peer, url) => {
  // One database per data folder: an instance restarted on its folder finds its read models again.
  const databases = new Map<string, string>();
  afterAll(async () => {
    const client = new MongoClient(url());
    try {
      for (const dbName of databases.values()) await client.db(dbName).dropDatabase();
    } finally {
      await client.close();
    }
  });
  const storesAt = async (dataDir: string): Promise<Stores> => {
    const dbName = databases.get(dataDir) ?? `jobs_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    databases.set(dataDir, dbName);
    const { eventStore, readStore, blobStore } = await openStores({
      DATA_DIR: dataDir,
      EVENTSTORE_URL: undefined,
      MONGODB_URL: withDatabase(url(), dbName),
    });
    return { eventStore, readStore, blobStore };
  };
  readModelJobsSuite(storesAt, peer.limits);
});

/** Every test below, on the stores `storesAt` opens in a data folder. */
function readModelJobsSuite(storesAt: (dataDir: string) => Promise<Stores>, limits?: PeerLimits): void {
  const it = limitedIt(limits);
  const start = async (options: Parameters<typeof startTestApp>[0] = {}): Promise<TestApp> => {
    const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'admin-test-'));
    const t = await startTestApp({ ...options, dataDir, stores: options.stores ?? (await storesAt(dataDir)) });
    apps.push(t);
    return t;
  };

  async function seed(t: TestApp, n: number, prefix = 'T'): Promise<string> {
    let at = '';
    for (let i = 0; i < n; i++) {
      const res = await t.call({
        method: 'POST',
        url: '/api/v1/user-group-types',
        payload: { code: `${prefix}${String(i)}`, name: `Type ${String(i)}`, registry: {} },
      });
      expect(res.statusCode, res.body).toBe(201);
      at = String(res.headers['x-event-position']);
    }
    return at;
  }

  const model = async (t: TestApp, name: string) =>
    (await t.call({ method: 'GET', url: '/api/v1/indexes' })).json<ReadModel[]>().find((m) => m.name === name);
  const getJob = async (t: TestApp, id: string) => (await t.call({ method: 'GET', url: `/api/v1/jobs/${id}` })).json<Job>();
  const refreshAll = (t: TestApp) => t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });

  describe('review: concurrent rebuilds of one read model', () => {
    it('two concurrent recreates of one read model: one 202, one 409 (never a second job)', async () => {
      const t = await start();
      await seed(t, 5);
      const answers = await Promise.all([
        t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' }),
        t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' }),
      ]);
      await t.service.readModelJobs.idle();
      expect(answers.map((a) => a.statusCode).sort()).toEqual([202, 409]);
    });

    it('two concurrent DELETEs of one read model: 204 and 409, never a 500', async () => {
      const t = await start();
      await seed(t, 5);
      const answers = await Promise.all([
        t.call({ method: 'DELETE', url: '/api/v1/indexes/user_group_types' }),
        t.call({ method: 'DELETE', url: '/api/v1/indexes/user_group_types' }),
      ]);
      await t.service.readModelJobs.idle();
      expect(answers.map((a) => a.statusCode).sort(), answers.map((a) => a.body).join('\n')).toEqual([204, 409]);
    });

    it('DELETE then an immediate recreate: the recreate is 409 while the rebuild runs (fine)', async () => {
      const t = await start();
      await seed(t, 5);
      expect((await t.call({ method: 'DELETE', url: '/api/v1/indexes/user_group_types' })).statusCode).toBe(204);
      const again = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
      await t.service.readModelJobs.idle();
      expect(again.statusCode).toBe(409);
      expect(await model(t, 'user_group_types')).toMatchObject({ state: 'live', documents: 5 });
    });
  });

  describe('review: rebuild jobs and the scheduler', () => {
    it('a DELETE of the jobs read model whose runner died is resumed after a restart (the scheduler reads its due items from that very model)', async () => {
      const api = await start({ role: 'api' });
      await seed(api, 3);
      expect((await api.call({ method: 'DELETE', url: '/api/v1/indexes/jobs' })).statusCode).toBe(204);
      await api.close({ keepData: true });

      const t = await start({ dataDir: api.dataDir });
      await refreshAll(t);
      for (let i = 0; i < 5; i++) await t.service.scheduler.tick();
      await t.service.readModelJobs.idle();
      const jobs = await model(t, 'jobs');
      expect(jobs?.generation, JSON.stringify(jobs)).not.toBeNull();
      expect((await t.call({ method: 'POST', url: '/api/v1/jobs/search', payload: {} })).statusCode).toBe(200);
    });

    it('a job whose lease is still held by a dead runner is resumed once the lease lapses (not remembered as run)', async () => {
      const api = await start({ role: 'api' });
      await seed(api, 3);
      const ack = await api.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
      const { jobId } = ack.json<{ jobId: string }>();
      await api.close({ keepData: true });

      const stores = await storesAt(api.dataDir);
      // The runner that died still holds the job's lease for a while (another instance, MongoDB).
      expect(await stores.readStore.tryLease(`job:${jobId}`, 'dead-instance', 60_000)).toBe(true);
      const t = await start({ dataDir: api.dataDir, stores });
      await refreshAll(t);
      await t.service.scheduler.tick();
      // The lease lapses.
      await stores.readStore.releaseLease(`job:${jobId}`, 'dead-instance');
      for (let i = 0; i < 3; i++) await t.service.scheduler.tick();
      await t.service.readModelJobs.idle();
      expect((await getJob(t, jobId)).status).toBe('COMPLETED');
    });

    it('a client cannot end a service job (409), so a pending DELETE-rebuild is not stranded: a restart finishes it', async () => {
      const api = await start({ role: 'api' });
      await seed(api, 3);
      expect((await api.call({ method: 'DELETE', url: '/api/v1/indexes/user_group_types' })).statusCode).toBe(204);
      const jobId = (await model(api, 'user_group_types'))?.jobId ?? '';
      const failed = await api.call({ method: 'PATCH', url: `/api/v1/jobs/${jobId}`, payload: { status: 'FAILED' } });
      expect(failed.statusCode).toBe(409);
      expect(failed.json()).toMatchObject({ code: 'JOB.SERVICE_JOB' });
      await api.close({ keepData: true });

      const t = await start({ dataDir: api.dataDir });
      await refreshAll(t);
      for (let i = 0; i < 3; i++) await t.service.scheduler.tick();
      await t.service.readModelJobs.idle();
      expect((await t.call({ method: 'POST', url: '/api/v1/user-group-types/search', payload: {} })).statusCode).toBe(200);
      // And once it has ended, a recreate is taken again.
      const again = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
      await t.service.readModelJobs.idle();
      expect(again.statusCode, again.body).toBe(202);
    });

    it('a recreate retried with the same Idempotency-Key answers the same job and rebuilds nothing twice', async () => {
      const t = await start({ clock: manualClock() });
      await seed(t, 3);
      const headers = { 'idempotency-key': 'recreate-once' };
      const first = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate', headers });
      expect(first.statusCode).toBe(202);
      await t.service.readModelJobs.idle();
      expect((await model(t, 'user_group_types'))?.generation).toBe(1);
      const retry = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate', headers });
      await t.service.readModelJobs.idle();
      expect(retry.statusCode).toBe(202);
      expect(retry.json()).toEqual(first.json());
      expect((await model(t, 'user_group_types'))?.generation).toBe(1);
    });

    it('in ROLE=worker (folding left to ROLE=projector) a recreate finishes', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'review-worker-'));
      const stores = await storesAt(dataDir);
      const w = await start({ dataDir, stores, role: 'worker' });
      const jobId = await w.service.readModelJobs.recreate(
        'user_group_types',
        { actor: 'review', now: new Date(), newId: randomUUID },
        { dropLive: false },
      );
      // No time limit of its own (a loaded machine takes what it takes): a catch-up projector that
      // only follows never ends the job, and the test meets its timeout.
      await w.service.readModelJobs.idle();
      expect(
        w.service.readModels.statuses().find((m) => m.name === 'user_group_types'),
        `job ${jobId}`,
      ).toMatchObject({ generation: 1, building: null });
    });
  });

  describe('review: searches while a generation is swapped', () => {
    it('another instance never answers empty after a swap dropped the generation it still serves', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'review-two-'));
      const stores = await storesAt(dataDir);
      const a = await start({ dataDir, stores });
      const b = await start({ dataDir, stores, role: 'api' });
      const at = await seed(a, 20);
      const search = (t: TestApp) => t.call({ method: 'POST', url: `/api/v1/user-group-types/search?minPosition=${at}`, payload: {} });
      expect((await search(b)).json<unknown[]>()).toHaveLength(20);
      await a.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
      await a.service.readModelJobs.idle();
      expect((await model(a, 'user_group_types'))?.generation).toBe(1);
      // Instance b learns of the swap on its next poll (up to 1 s later); meanwhile it answers from generation 0.
      expect((await search(b)).json<unknown[]>()).toHaveLength(20);
    });

    it('one instance answers every search in full while a recreate swaps generations', async () => {
      const t = await start();
      const at = await seed(t, 260);
      const search = () => t.call({ method: 'POST', url: `/api/v1/user-group-types/search?size=1000&minPosition=${at}`, payload: {} });
      const answers: (number | string)[] = [];
      await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
      const state = { done: false };
      const running = t.service.readModelJobs.idle().then(() => {
        state.done = true;
      });
      while (!state.done)
        answers.push(
          ...(await Promise.all([search(), search(), search()])).map((r) => (r.statusCode === 200 ? r.json<unknown[]>().length : r.body)),
        );
      await running;
      expect(new Set(answers)).toEqual(new Set([260]));
    });
  });

  describe('review: job and job-step routes (expected to pass)', () => {
    const newJob = async (t: TestApp, extra: Record<string, unknown> = {}) => {
      const res = await t.call({
        method: 'POST',
        url: '/api/v1/jobs',
        payload: { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT', ...extra },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json<Job>();
    };

    it('answers 400, never 500, to malformed ids, expand, minPosition, by-chunk params, read-only patches and a PUT without status', async () => {
      const t = await start();
      const job = await newJob(t);
      const step = (
        await t.call({
          method: 'POST',
          url: '/api/v1/job-steps',
          payload: { name: 's', status: 'NEW', jobId: job.id, chunkId: randomUUID() },
        })
      ).json<Job>();
      const urls = [
        `/api/v1/jobs/${job.id}?expand=JOB_STEPS&minPosition=abc`,
        `/api/v1/jobs/${job.id}?expand=JOB_STEPS&minPosition=99999999999`,
        `/api/v1/jobs/${job.id}?expand=JOB_STEPS,NOPE`,
        `/api/v1/jobs/${job.id}?expand=${'x'.repeat(300)}`,
        `/api/v1/jobs/${job.id}?other=1`,
        '/api/v1/jobs/%00',
        `/api/v1/jobs/${'a'.repeat(300)}`,
        '/api/v1/job-steps/not-a-uuid',
        '/api/v1/job-steps/by-chunk',
        '/api/v1/job-steps/by-chunk?chunkId=x&name=a',
        `/api/v1/job-steps/by-chunk?chunkId=${randomUUID()}`,
        `/api/v1/job-steps/by-chunk?chunkId=${randomUUID()}&name=`,
      ];
      for (const url of urls) {
        const res = await t.call({ method: 'GET', url });
        expect([400, 404], `${url}: ${res.body}`).toContain(res.statusCode);
      }
      expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${job.id}?expand=` })).statusCode).toBe(200);
      for (const payload of [{ jobSteps: [] }, { auditInfo: {} }, { id: randomUUID() }]) {
        expect((await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload })).statusCode, JSON.stringify(payload)).toBe(400);
      }
      expect((await t.call({ method: 'PATCH', url: `/api/v1/job-steps/${step.id}`, payload: { jobId: null } })).statusCode).toBe(400);
      expect((await t.call({ method: 'PUT', url: `/api/v1/job-steps/${step.id}`, payload: { name: 's', jobId: job.id } })).statusCode).toBe(
        400,
      );
      expect(
        (await t.call({ method: 'PUT', url: `/api/v1/jobs/${job.id}`, payload: { startDate: '2026-11-23T10:00:00Z', jobType: 'IMPORT' } }))
          .statusCode,
      ).toBe(400);
      // A step whose job is missing, or malformed: 422 / 400.
      expect(
        (await t.call({ method: 'POST', url: '/api/v1/job-steps', payload: { name: 's', status: 'NEW', jobId: randomUUID() } })).statusCode,
      ).toBe(422);
      expect(
        (await t.call({ method: 'POST', url: '/api/v1/job-steps', payload: { name: 's', status: 'NEW', jobId: 'nope' } })).statusCode,
      ).toBe(400);
    });

    it('keyed creates of jobs and steps: a retry answers the same record, another body 409, concurrent retries one record', async () => {
      const t = await start();
      const headers = { 'idempotency-key': 'job-1' };
      const body = { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT' };
      const [a, b] = await Promise.all([
        t.call({ method: 'POST', url: '/api/v1/jobs', payload: body, headers }),
        t.call({ method: 'POST', url: '/api/v1/jobs', payload: body, headers }),
      ]);
      expect([a.statusCode, b.statusCode]).toEqual([201, 201]);
      expect(a.json<Job>().id).toBe(b.json<Job>().id);
      expect((await t.call({ method: 'POST', url: '/api/v1/jobs', payload: { ...body, jobType: 'OTHER' }, headers })).statusCode).toBe(409);
      const stepBody = { name: 's', status: 'NEW', jobId: a.json<Job>().id, chunkId: randomUUID() };
      const sh = { 'idempotency-key': 'step-1' };
      const steps = await Promise.all(
        Array.from({ length: 4 }, () => t.call({ method: 'POST', url: '/api/v1/job-steps', payload: stepBody, headers: sh })),
      );
      expect(steps.map((s) => s.statusCode)).toEqual([201, 201, 201, 201]);
      expect(new Set(steps.map((s) => s.json<Job>().id)).size).toBe(1);
    });

    it('every job, job-step and index route is 403 for editor, viewer and a caller without roles', async () => {
      const t = await start();
      const job = await newJob(t);
      const id = job.id;
      const routes: [method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string][] = [
        ['GET', '/api/v1/indexes'],
        ['POST', '/api/v1/indexes/refresh'],
        ['POST', '/api/v1/indexes/jobs/recreate'],
        ['DELETE', '/api/v1/indexes/jobs'],
        ['POST', '/api/v1/indexes/jobs/refresh'],
        ['POST', '/api/v1/indexes/nope/recreate'],
      ];
      for (const base of ['jobs', 'job-steps']) {
        routes.push(
          ['GET', `/api/v1/${base}`],
          ['POST', `/api/v1/${base}`],
          ['GET', `/api/v1/${base}/${id}`],
          ['PUT', `/api/v1/${base}/${id}`],
          ['PATCH', `/api/v1/${base}/${id}`],
          ['DELETE', `/api/v1/${base}/${id}`],
          ['GET', `/api/v1/${base}/${id}/history`],
          ['GET', `/api/v1/${base}/${id}/versions/0`],
          ['POST', `/api/v1/${base}/by-ids`],
          ['POST', `/api/v1/${base}/search`],
          ['POST', `/api/v1/${base}/search/page`],
          ['POST', `/api/v1/${base}/count`],
          ['GET', `/api/v1/${base}/autocomplete`],
          ['GET', `/api/v1/${base}/by-code/x`],
        );
      }
      routes.push(['GET', `/api/v1/job-steps/by-chunk?chunkId=${randomUUID()}&name=x`]);
      const open: string[] = [];
      for (const as of ['editor', 'viewer', 'nobody'] as const) {
        for (const [method, url] of routes) {
          const res = await t.call({ as, method, url, ...(method === 'GET' || method === 'DELETE' ? {} : { payload: {} }) });
          // 404 and 405 (jobs and steps have no DELETE) open nothing either.
          if (![403, 404, 405].includes(res.statusCode)) open.push(`${as} ${method} ${url}: ${String(res.statusCode)}`);
        }
      }
      expect(open).toEqual([]);
    });

    it('recreates the jobs and job_steps models themselves; the rebuild job shows COMPLETED in the rebuilt jobs model', async () => {
      const t = await start();
      const job = await newJob(t);
      await t.call({ method: 'POST', url: '/api/v1/job-steps', payload: { name: 's', status: 'NEW', jobId: job.id } });
      for (const name of ['jobs', 'job_steps']) {
        const ack = await t.call({ method: 'POST', url: `/api/v1/indexes/${name}/recreate` });
        expect(ack.statusCode).toBe(202);
        await t.service.readModelJobs.idle();
        const rebuilt = await getJob(t, ack.json<{ jobId: string }>().jobId);
        expect(rebuilt.status, JSON.stringify(rebuilt.data)).toBe('COMPLETED');
        await refreshAll(t);
        expect(await model(t, name)).toMatchObject({ generation: 1, state: 'live' });
      }
      const found = await t.call({
        method: 'POST',
        url: '/api/v1/jobs/search',
        payload: { filter: [{ column: 'jobType', value: 'READ_MODEL_RECREATE' }] },
      });
      expect(found.json<Job[]>().map((j) => j.status)).toEqual(['COMPLETED', 'COMPLETED']);
      const expanded = await t.call({ method: 'GET', url: `/api/v1/jobs/${job.id}?expand=JOB_STEPS` });
      expect(expanded.json<{ jobSteps: unknown[] }>().jobSteps).toHaveLength(1);
    });

    it('while a model is dropped: GET /indexes shows it rebuilding, its searches and expand=JOB_STEPS answer 503', async () => {
      const api = await start({ role: 'api' });
      const job = await newJob(api);
      expect((await api.call({ method: 'DELETE', url: '/api/v1/indexes/jobs' })).statusCode).toBe(204);
      expect(await model(api, 'jobs')).toMatchObject({ state: 'rebuilding', generation: null, documents: 0 });
      expect((await api.call({ method: 'GET', url: `/api/v1/jobs/${job.id}?expand=JOB_STEPS` })).statusCode).toBe(503);
      expect((await api.call({ method: 'GET', url: `/api/v1/jobs/${job.id}` })).statusCode).toBe(200);
      expect((await api.call({ method: 'POST', url: '/api/v1/jobs/count', payload: {} })).statusCode).toBe(503);
    });
  });

  describe('review: generation records and status dates', () => {
    it('a generations poll that read before a rebuild reserved its generation does not undo the reservation (the swap then fails)', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'review-poll-'));
      const stores = await storesAt(dataDir);
      const real = stores.readStore;
      let holdPoll = false;
      let release: (() => void) | undefined;
      let seen: () => void = () => undefined;
      const pollHeld = new Promise<void>((r) => (seen = r));
      let releaseAfterWrite = false;
      let wrote = false;
      // A store whose answers arrive a little late (MongoDB): the poller's read of the generations is
      // answered after the rebuild's own write and read-back.
      const readStore = new Proxy(real, {
        get(target, prop) {
          if (prop === 'getMany') {
            return async (collection: string, ids: readonly string[]) => {
              const result = await target.getMany(collection, ids);
              if (collection === GENERATIONS && holdPoll) {
                holdPoll = false;
                seen();
                await new Promise<void>((r) => (release = r));
              } else if (collection === GENERATIONS && releaseAfterWrite && wrote) {
                releaseAfterWrite = false;
                setImmediate(() => release?.());
              }
              return result;
            };
          }
          if (prop === 'applyBatch') {
            return async (...args: Parameters<ReadStore['applyBatch']>) => {
              await target.applyBatch(...args);
              if (args[0] === GENERATIONS && releaseAfterWrite) wrote = true;
            };
          }
          const value = Reflect.get(target, prop, target) as unknown;
          return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
        },
      });
      const t = await start({ dataDir, stores: { eventStore: stores.eventStore, readStore, blobStore: stores.blobStore } });
      await seed(t, 3);
      await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
      await t.service.readModelJobs.idle();
      holdPoll = true;
      await pollHeld; // the next poll (at most 1 s away) has read generation record version 1
      releaseAfterWrite = true;
      const ack = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
      await t.service.readModelJobs.idle();
      const job = await getJob(t, ack.json<{ jobId: string }>().jobId);
      expect(job.status, JSON.stringify(job.data)).toBe('COMPLETED');
      expect((await model(t, 'user_group_types'))?.generation).toBe(2);
    });

    it('a PUT of an ended step that omits endDate keeps the endDate it ended with', async () => {
      const t = await start();
      const job = (
        await t.call({
          method: 'POST',
          url: '/api/v1/jobs',
          payload: { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT' },
        })
      ).json<Job>();
      const body = { name: 's', status: 'COMPLETED', jobId: job.id, startDate: '2026-01-01T00:00:00Z' };
      const step = (await t.call({ method: 'POST', url: '/api/v1/job-steps', payload: { ...body, status: 'IN_PROGRESS' } })).json<Job>();
      const ended = await t.call({
        method: 'PUT',
        url: `/api/v1/job-steps/${step.id}`,
        payload: { ...body, endDate: '2026-01-02T00:00:00Z' },
      });
      expect(ended.json()).toMatchObject({ endDate: '2026-01-02T00:00:00.000Z' });
      const again = await t.call({ method: 'PUT', url: `/api/v1/job-steps/${step.id}`, payload: { ...body, log: 'note' } });
      expect(again.json()).toMatchObject({ log: 'note', endDate: '2026-01-02T00:00:00.000Z' });
    });
  });
}
