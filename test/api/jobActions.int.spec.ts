// The actions on jobs and steps (SPEC.md "other asynchronous actions" and "job state or error
// response"): retry, cancel, a step's retry and a job's state, on jobs clients run and on jobs the
// service runs while they run: a read-model rebuild and a diff apply, each held at a step boundary
// by a store that answers late (no sleeps), cancelled there, then retried to the end.

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { stageServiceJob, startTestApp, type TestApp } from '../support/testApp.ts';

const apps: TestApp[] = [];
afterEach(async () => {
  for (const a of apps.splice(0).reverse()) await a.close().catch(() => undefined);
});

type Rec = Record<string, unknown> & { id: string; status: string; data?: Record<string, unknown>; auditInfo: { version: number } };
type State = {
  jobId: string;
  jobType: string;
  status: string;
  version: number;
  progress?: Record<string, unknown>;
  result?: Record<string, unknown>;
  cancelRequested?: { by: string };
  retries: number;
  error?: Record<string, unknown>;
};

const start = async (options: Parameters<typeof startTestApp>[0] = {}): Promise<TestApp> => {
  const t = await startTestApp(options);
  apps.push(t);
  return t;
};

const newJob = async (t: TestApp, extra: Record<string, unknown> = {}) => {
  const res = await t.call({
    method: 'POST',
    url: '/api/v1/jobs',
    payload: { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT', ...extra },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<Rec>();
};
const action = (t: TestApp, path: string, as: 'admin' | 'editor' | 'viewer' = 'admin') =>
  t.call({ as, method: 'POST', url: `/api/v1/${path}` });
const state = async (t: TestApp, id: string, as: 'admin' | 'editor' | 'viewer' = 'admin') => {
  const res = await t.call({ as, method: 'GET', url: `/api/v1/jobs/${id}/state` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<State>();
};
const getJob = async (t: TestApp, id: string) => (await t.call({ method: 'GET', url: `/api/v1/jobs/${id}` })).json<Rec>();

/** A gate a store call waits at: `reached` once the call came, and the call goes on at `release()`. */
function gate() {
  let reached: () => void = () => undefined;
  let release: () => void = () => undefined;
  const at = new Promise<void>((r) => (reached = r));
  const open = new Promise<void>((r) => (release = r));
  return {
    reached: at,
    release,
    arrive: () => {
      reached();
    },
    open,
  };
}

/** The app on embedded stores one of whose ports holds the first call of a method that `holds`
 * picks at a gate, until the test releases it; `calls` counts the calls it picked. */
async function startHolding(
  port: 'eventStore' | 'readStore',
  method: string,
  holds: (args: unknown[]) => boolean,
  extra: NonNullable<Parameters<typeof startTestApp>[0]>['extra'] = {},
) {
  const dataDir = mkdtempSync(join(tmpdir(), 'job-actions-'));
  const stores = openEmbeddedStores(dataDir);
  const g = gate();
  const calls: unknown[][] = [];
  const held = new Proxy(stores[port], {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function') return value;
      const bound = (value as (...a: unknown[]) => unknown).bind(target);
      if (prop !== method) return bound;
      return async (...args: unknown[]) => {
        if (holds(args)) {
          calls.push(args);
          if (calls.length === 1) {
            g.arrive();
            await g.open;
          }
        }
        return bound(...args);
      };
    },
  });
  const t = await start({ dataDir, stores: { ...stores, [port]: held }, extra });
  return { t, g, calls };
}

describe('actions on jobs a client runs', () => {
  it('cancel ends a NEW or IN_PROGRESS job FAILED `cancelled` at once; its state carries the error body; a second cancel is 409', async () => {
    const t = await start();
    const job = await newJob(t);
    const ack = await action(t, `jobs/${job.id}/cancel`);
    expect(ack.statusCode, ack.body).toBe(202);
    expect(ack.json()).toEqual({ acknowledge: true, jobId: job.id });
    expect(ack.headers.location).toBe(`/api/v1/jobs/${job.id}/state`);
    expect(await getJob(t, job.id)).toMatchObject({
      status: 'FAILED',
      endDate: expect.any(String),
      data: { failure: 'cancelled', cancelled: { by: 'alice-admin' } },
    });
    const after = await state(t, job.id);
    expect(after).toMatchObject({ jobId: job.id, jobType: 'IMPORT', status: 'FAILED', retries: 0 });
    expect(after.error).toMatchObject({
      status: 'CONFLICT',
      code: 'JOB.CANCELLED',
      message: expect.stringContaining('cancelled'),
      traceId: expect.any(String),
      timestamp: expect.any(String),
      errors: expect.any(Array),
    });
    const again = await action(t, `jobs/${job.id}/cancel`);
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'JOB.INVALID_TRANSITION', errors: ['status: FAILED; cancelled needs NEW or IN_PROGRESS'] });

    // A job its client runs, IN_PROGRESS: FAILED at once, and the runner's next move is refused.
    const running = await newJob(t, { status: 'IN_PROGRESS' });
    expect((await action(t, `jobs/${running.id}/cancel`)).statusCode).toBe(202);
    expect((await t.call({ method: 'PATCH', url: `/api/v1/jobs/${running.id}`, payload: { status: 'COMPLETED' } })).statusCode).toBe(409);
    expect((await state(t, running.id)).status).toBe('FAILED');
  });

  it('retry moves a FAILED job back to NEW (its runner is the client); retry of a job that has not failed, or cancel of an ended one, is 409', async () => {
    const t = await start();
    const job = await newJob(t, { status: 'IN_PROGRESS' });
    for (const path of [`jobs/${job.id}/retry`]) expect((await action(t, path)).statusCode).toBe(409);
    await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'FAILED', data: { failure: 'disk full' } } });
    expect(await state(t, job.id)).toMatchObject({
      status: 'FAILED',
      error: { code: 'JOB.FAILED', status: 'INTERNAL_SERVER_ERROR', message: expect.stringContaining('disk full') },
    });
    const ack = await action(t, `jobs/${job.id}/retry`);
    expect(ack.statusCode, ack.body).toBe(202);
    const retried = await getJob(t, job.id);
    expect(retried).toMatchObject({ status: 'NEW', data: { retries: [{ by: 'alice-admin', failure: 'disk full' }] } });
    expect(retried.endDate).toBeUndefined();
    expect(retried.data?.failure).toBeUndefined();
    const now = await state(t, job.id);
    expect(now).toMatchObject({ status: 'NEW', retries: 1 });
    expect(now.error).toBeUndefined();
    expect((await action(t, `jobs/${job.id}/retry`)).json()).toMatchObject({
      code: 'JOB.INVALID_TRANSITION',
      errors: ['status: NEW; retried needs FAILED'],
    });
    // Its runner takes it again and ends it: an ended job is not cancelled.
    await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'IN_PROGRESS' } });
    await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'COMPLETED' } });
    expect((await action(t, `jobs/${job.id}/cancel`)).statusCode).toBe(409);
    expect((await action(t, `jobs/${job.id}/retry`)).statusCode).toBe(409);
    expect(await state(t, job.id)).toMatchObject({ status: 'COMPLETED' });
  });

  it('retry of a FAILED step moves it back to NEW without its dates; of another, 409; unknown ids 404, malformed 400', async () => {
    const t = await start();
    const job = await newJob(t);
    const step = (
      await t.call({ method: 'POST', url: '/api/v1/job-steps', payload: { name: 's', status: 'IN_PROGRESS', jobId: job.id } })
    ).json<Rec>();
    expect((await action(t, `job-steps/${step.id}/retry`)).statusCode).toBe(409);
    await t.call({ method: 'PATCH', url: `/api/v1/job-steps/${step.id}`, payload: { status: 'FAILED', log: 'row 7 unreadable' } });
    const ack = await action(t, `job-steps/${step.id}/retry`);
    expect(ack.statusCode, ack.body).toBe(202);
    expect(ack.json()).toEqual({ acknowledge: true, jobId: job.id });
    const back = (await t.call({ method: 'GET', url: `/api/v1/job-steps/${step.id}` })).json<Rec>();
    expect(back).toMatchObject({ status: 'NEW', log: 'row 7 unreadable' });
    expect([back.startDate, back.endDate]).toEqual([undefined, undefined]);
    const expanded = await t.call({
      method: 'GET',
      url: `/api/v1/jobs/${job.id}?expand=JOB_STEPS&minPosition=${String(ack.headers['x-event-position'])}`,
    });
    expect(expanded.json<{ jobSteps: Rec[] }>().jobSteps.map((s) => s.status)).toEqual(['NEW']);
    for (const path of [`jobs/${randomUUID()}/retry`, `jobs/${randomUUID()}/cancel`, `job-steps/${randomUUID()}/retry`])
      expect((await action(t, path)).statusCode, path).toBe(404);
    expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${randomUUID()}/state` })).statusCode).toBe(404);
    for (const path of ['jobs/nope/retry', 'jobs/nope/cancel', 'job-steps/nope/retry'])
      expect((await action(t, path)).statusCode, path).toBe(400);
    expect((await t.call({ method: 'GET', url: '/api/v1/jobs/nope/state' })).statusCode).toBe(400);
  });

  it('only an admin acts on a job it did not start: editors 403, viewers 403 (they may not write), and neither reads its state', async () => {
    const t = await start();
    const job = await newJob(t, { status: 'IN_PROGRESS' });
    const step = await t.call({ method: 'POST', url: '/api/v1/job-steps', payload: { name: 's', status: 'FAILED', jobId: job.id } });
    expect(step.statusCode).toBe(400); // a step starts NEW or IN_PROGRESS
    for (const as of ['editor', 'viewer'] as const) {
      for (const path of [`jobs/${job.id}/retry`, `jobs/${job.id}/cancel`]) {
        const res = await action(t, path, as);
        expect(res.statusCode, `${as} ${path}`).toBe(403);
      }
      expect((await t.call({ as, method: 'GET', url: `/api/v1/jobs/${job.id}/state` })).statusCode, as).toBe(403);
    }
    expect((await state(t, job.id)).status).toBe('IN_PROGRESS');
  });
});

describe('cancel and retry of a READ_MODEL_RECREATE job while it runs', () => {
  it('stops at its next step boundary FAILED `cancelled`, the old generation still serving; a retry resumes the loaded generation to COMPLETED', async () => {
    // The rebuild's bulk load of its new generation is held: the job is mid-way, its fold done.
    const { t, g, calls: loads } = await startHolding('readStore', 'bulkLoad', (args) => args[0] === 'user_group_types__g1');
    let at = '';
    for (let i = 0; i < 5; i++)
      at = String(
        (
          await t.call({
            method: 'POST',
            url: '/api/v1/user-group-types',
            payload: { code: `C${String(i)}`, name: `Type ${String(i)}`, registry: {} },
          })
        ).headers['x-event-position'],
      );
    const ack = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
    const { jobId } = ack.json<{ jobId: string }>();
    await g.reached;

    const cancel = await action(t, `jobs/${jobId}/cancel`);
    expect(cancel.statusCode, cancel.body).toBe(202);
    expect(await state(t, jobId)).toMatchObject({ status: 'IN_PROGRESS', cancelRequested: { by: 'alice-admin' } });
    g.release();
    await t.service.readModelJobs.idle();

    const cancelled = await state(t, jobId);
    expect(cancelled).toMatchObject({ status: 'FAILED', error: { code: 'JOB.CANCELLED' } });
    expect((await getJob(t, jobId)).data).toMatchObject({ failure: 'cancelled', progress: { phase: 'load' } });
    const models = (await t.call({ method: 'GET', url: '/api/v1/indexes' })).json<
      { name: string; generation: number | null; state: string }[]
    >();
    expect(models.find((m) => m.name === 'user_group_types')).toMatchObject({ generation: 0, state: 'live' });
    const search = async (minPosition: string) =>
      (await t.call({ method: 'POST', url: `/api/v1/user-group-types/search?minPosition=${minPosition}`, payload: {} })).json<unknown[]>();
    expect(await search(at)).toHaveLength(5);

    // Written after the cancel: the resumed generation catches up with it.
    at = String(
      (await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'LATE', name: 'Late', registry: {} } })).headers[
        'x-event-position'
      ],
    );
    const retry = await action(t, `jobs/${jobId}/retry`);
    expect(retry.statusCode, retry.body).toBe(202);
    await t.service.readModelJobs.idle();
    const done = await getJob(t, jobId);
    expect(done.status, JSON.stringify(done.data)).toBe('COMPLETED');
    // Resumed where it stopped: the generation it had loaded, caught up, not folded again.
    expect(done.data?.result).toMatchObject({ generation: 1, folded: 0, documents: 6 });
    expect(done.data?.result).not.toMatchObject({ resumedFrom: '0' });
    expect(loads).toHaveLength(1);
    expect(done.data?.retries).toMatchObject([{ by: 'alice-admin', failure: 'cancelled' }]);
    const after = (await t.call({ method: 'GET', url: '/api/v1/indexes' })).json<{ name: string; generation: number | null }[]>();
    expect(after.find((m) => m.name === 'user_group_types')?.generation).toBe(1);
    expect(await search(at)).toHaveLength(6);
    expect(await state(t, jobId)).toMatchObject({ status: 'COMPLETED', result: { generation: 1 } });
  });
});

describe('cancel and retry of a READ_MODEL_REFRESH job while it runs', () => {
  it('stops before its next page, and a retry goes on after the last page it recorded', async () => {
    const armed = { on: false };
    // The refresh's first page of repairs (written with checkpoint 0: the live checkpoint stays) is held.
    const { t, g } = await startHolding('readStore', 'applyBatch', (args) => armed.on && args[0] === 'user_group_types' && args[2] === 0n);
    let at = '';
    for (let i = 0; i < 230; i++)
      at = String(
        (
          await t.call({
            method: 'POST',
            url: '/api/v1/user-group-types',
            payload: { code: `R${String(i)}`, name: `Type ${String(i)}`, registry: {} },
          })
        ).headers['x-event-position'],
      );
    await t.call({ method: 'POST', url: `/api/v1/user-group-types/count?minPosition=${at}`, payload: {} });
    armed.on = true;
    const ack = await t.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/refresh', payload: { filter: [] } });
    const { jobId } = ack.json<{ jobId: string }>();
    await g.reached;
    expect((await action(t, `jobs/${jobId}/cancel`)).statusCode).toBe(202);
    g.release();
    await t.service.readModelJobs.idle();
    const stopped = await state(t, jobId);
    expect(stopped).toMatchObject({
      status: 'FAILED',
      error: { code: 'JOB.CANCELLED' },
      progress: { phase: 'refresh', offset: 200, matched: 200 },
    });

    expect((await action(t, `jobs/${jobId}/retry`)).statusCode).toBe(202);
    await t.service.readModelJobs.idle();
    // 230 in all: the 200 of the first page were not matched again.
    expect(await state(t, jobId)).toMatchObject({ status: 'COMPLETED', result: { matched: 230, unchanged: 230, repaired: 0, failed: 0 } });
  });
});

describe('a cancel asked of a service job no process runs', () => {
  it('a READ_MODEL_RECREATE whose runner died ends `cancelled` when the scheduler takes it up, without another resume', async () => {
    const api = await start({ role: 'api' });
    const ack = await api.call({ method: 'POST', url: '/api/v1/indexes/user_group_types/recreate' });
    const { jobId } = ack.json<{ jobId: string }>();
    expect((await action(api, `jobs/${jobId}/cancel`)).statusCode).toBe(202);
    await api.close({ keepData: true });
    const t = await start({ dataDir: api.dataDir });
    await t.call({ method: 'POST', url: '/api/v1/indexes/refresh' });
    for (let i = 0; i < 3; i++) await t.service.scheduler.tick();
    await t.service.readModelJobs.idle();
    const job = await getJob(t, jobId);
    expect(job).toMatchObject({ status: 'FAILED', data: { failure: 'cancelled' } });
    expect(job.data?.resumed).toBeUndefined();
    const models = (await t.call({ method: 'GET', url: '/api/v1/indexes' })).json<
      { name: string; generation: number | null; state: string }[]
    >();
    expect(models.find((m) => m.name === 'user_group_types')).toMatchObject({ generation: 0, state: 'live' });
  });

  it('a DIFF_APPLY whose process ended ends `cancelled`, not failed as orphaned', async () => {
    const t = await start({ extra: { manualScheduler: true } });
    const { id } = await stageServiceJob(t, { jobType: 'DIFF_APPLY' });
    const cancel = await action(t, `jobs/${id}/cancel`);
    expect(await state(t, id)).toMatchObject({ status: 'IN_PROGRESS', cancelRequested: { by: 'alice-admin' } });
    await t.call({ method: 'GET', url: `/api/v1/jobs?minPosition=${String(cancel.headers['x-event-position'])}` });
    await t.service.scheduler.tick();
    expect(await state(t, id)).toMatchObject({ status: 'FAILED', error: { code: 'JOB.CANCELLED' } });
  });
});

describe('cancel and retry of a DIFF_APPLY job while it runs', () => {
  it('its starter (an editor) cancels it at a window boundary and retries it; it resumes after the entries it had applied', async () => {
    const entries = Array.from({ length: 40 }, (_, i) => ({
      diffType: 'DIFF_TYPE_NEW',
      right: { id: randomUUID(), code: `WA_${String(i)}`, name: `Worklog ${String(i)}` },
    }));
    const held = `worklogType-${String(entries[8]?.right.id)}`;
    // The append of entry 8 (the first of the second window of 8) is held.
    const { t, g } = await startHolding('eventStore', 'append', (args) => (args[0] as { stream: string }).stream === held, {
      exchange: { applyJobThreshold: 10 },
    });
    const res = await t.call({ as: 'editor', method: 'POST', url: '/api/v1/worklog-types/diff/apply', payload: entries });
    expect(res.statusCode, res.body).toBe(202);
    const { jobId } = res.json<{ jobId: string }>();
    await g.reached;

    // Not the editor's to read through the admin routes, but its state is.
    expect((await state(t, jobId, 'editor')).status).toBe('IN_PROGRESS');
    expect((await action(t, `jobs/${jobId}/cancel`, 'viewer')).statusCode).toBe(403);
    expect((await action(t, `jobs/${jobId}/cancel`, 'editor')).statusCode).toBe(202);
    g.release();
    const stopped = await waitForStatus(t, jobId, 'FAILED');
    expect(stopped.error).toMatchObject({ code: 'JOB.CANCELLED' });
    // The window in flight was applied, nothing after it.
    expect(stopped.progress).toMatchObject({ done: 16, applied: 16, of: 40 });
    const exists = async (i: number) =>
      (await t.call({ method: 'GET', url: `/api/v1/worklog-types/${String(entries[i]?.right.id)}` })).statusCode;
    expect([await exists(15), await exists(16), await exists(39)]).toEqual([200, 404, 404]);

    const retried = await action(t, `jobs/${jobId}/retry`, 'editor');
    expect(retried.statusCode, retried.body).toBe(202);
    const done = await waitForStatus(t, jobId, 'COMPLETED');
    // Resumed after entry 15: none applied twice (then they would count as unchanged).
    expect(done.result).toMatchObject({ done: 40, applied: 40, unchanged: 0, failed: 0, of: 40 });
    expect([await exists(16), await exists(39)]).toEqual([200, 200]);
  });

  it('a FAILED DIFF_APPLY job whose entries are gone (its process ended) is not resumable: 409', async () => {
    const t = await start();
    const job = await stageServiceJob(t, { jobType: 'DIFF_APPLY' }, 'its process ended');
    const retry = await action(t, `jobs/${job.id}/retry`);
    expect(retry.statusCode).toBe(409);
    expect(retry.json()).toMatchObject({ code: 'JOB.NOT_RESUMABLE' });
    expect((await state(t, job.id)).status).toBe('FAILED');
  });
});

/** The job's state once it has moved to `status`: a diff apply runs in the background of the
 * process that took it, and its state is what a client waits on too. */
async function waitForStatus(t: TestApp, id: string, status: string): Promise<State> {
  for (const deadline = Date.now() + 30_000; Date.now() < deadline;) {
    const now = await state(t, id);
    if (now.status === status) return now;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`job ${id} did not become ${status} within 30 s`);
}
