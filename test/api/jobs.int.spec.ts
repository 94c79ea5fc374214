// Jobs and job steps over HTTP on the embedded stores: status moves, references, the unique
// (chunkId, name) pair under concurrency, a job with its steps, and admin-only access.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

type Rec = Record<string, unknown> & { id: string; status: string; auditInfo: { version: number } };

const newJob = async (extra: Record<string, unknown> = {}) => {
  const res = await t.call({ method: 'POST', url: '/api/v1/jobs', payload: { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT', ...extra } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<Rec>();
};
const newStep = (jobId: string, extra: Record<string, unknown> = {}) =>
  t.call({ method: 'POST', url: '/api/v1/job-steps', payload: { name: 'load', status: 'NEW', jobId, ...extra } });

describe('jobs', () => {
  it('creates a job and reads it back with empty steps', async () => {
    const job = await newJob({ data: { file: 'a.csv' } });
    expect(job).toMatchObject({ status: 'NEW', jobType: 'IMPORT', data: { file: 'a.csv' }, jobSteps: [] });
    const got = await t.call({ method: 'GET', url: `/api/v1/jobs/${job.id}` });
    expect(got.statusCode).toBe(200);
    expect(got.json()).toMatchObject({ id: job.id, jobSteps: [] });
    expect(got.headers.etag).toBe('"0"');
  });

  it('moves NEW → IN_PROGRESS → COMPLETED, setting endDate, and refuses other moves with 409 naming the allowed ones', async () => {
    const job = await newJob();
    const skip = await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'COMPLETED' } });
    expect(skip.statusCode).toBe(409);
    expect(skip.json()).toMatchObject({ status: 'CONFLICT', errors: ['status: NEW -> COMPLETED is not allowed; allowed: IN_PROGRESS'] });
    expect((await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'IN_PROGRESS' } })).statusCode).toBe(200);
    const done = await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'COMPLETED' } });
    expect(done.statusCode).toBe(200);
    expect(done.json<Rec>().endDate).toEqual(expect.any(String));
    const back = await t.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'IN_PROGRESS' } });
    expect(back.statusCode).toBe(409);
    expect(back.json<{ message: string }>().message).toContain('allowed from COMPLETED: none');
  });

  it('refuses a job that starts ended, a malformed id and an unknown expand', async () => {
    expect((await t.call({ method: 'POST', url: '/api/v1/jobs', payload: { startDate: '2026-11-23T10:00:00Z', status: 'FAILED', jobType: 'X' } })).statusCode).toBe(400);
    const bad = await t.call({ method: 'GET', url: '/api/v1/jobs/not-a-uuid' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json<{ message: string }>().message).toContain('Wrong UUID format');
    const job = await newJob();
    expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${job.id}?expand=EVERYTHING` })).statusCode).toBe(400);
    expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${randomUUID()}` })).statusCode).toBe(404);
  });

  it('is admin only: editors and viewers get 403 on every job and step route', async () => {
    const job = await newJob();
    for (const as of ['editor', 'viewer'] as const) {
      expect((await t.call({ as, method: 'GET', url: `/api/v1/jobs/${job.id}` })).statusCode).toBe(403);
      expect((await t.call({ as, method: 'POST', url: '/api/v1/jobs', payload: {} })).statusCode).toBe(403);
      expect((await t.call({ as, method: 'POST', url: '/api/v1/job-steps', payload: {} })).statusCode).toBe(403);
      expect((await t.call({ as, method: 'GET', url: `/api/v1/job-steps/by-chunk?chunkId=${randomUUID()}&name=x` })).statusCode).toBe(403);
    }
  });
});

describe('job steps', () => {
  it('needs an existing job: 422 naming jobId', async () => {
    const res = await newStep(randomUUID());
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({ status: 'UNPROCESSABLE_ENTITY', errors: [expect.stringMatching(/^jobId: no Job /)] });
  });

  it('keeps (chunkId, name) unique: of 16 concurrent creators one gets 201, the others 409 naming the pair', async () => {
    const job = await newJob();
    const chunkId = randomUUID();
    const answers = await Promise.all(Array.from({ length: 16 }, () => newStep(job.id, { chunkId, name: 'transform' })));
    const codes = answers.map((a) => a.statusCode).sort();
    expect(codes.filter((c) => c === 201)).toHaveLength(1);
    expect(codes.filter((c) => c === 409)).toHaveLength(15);
    const conflict = answers.find((a) => a.statusCode === 409);
    expect(conflict?.json()).toMatchObject({ status: 'CONFLICT', errors: [expect.stringContaining('chunkId'), expect.stringContaining('name')] });
    // Another name in the same chunk, or the same name without a chunk, is fine.
    expect((await newStep(job.id, { chunkId, name: 'load' })).statusCode).toBe(201);
    expect((await newStep(job.id, { name: 'transform' })).statusCode).toBe(201);
    const byChunk = await t.call({ method: 'GET', url: `/api/v1/job-steps/by-chunk?chunkId=${chunkId}&name=transform` });
    expect(byChunk.statusCode).toBe(200);
    expect(byChunk.json()).toMatchObject({ chunkId, name: 'transform', jobId: job.id });
    expect((await t.call({ method: 'GET', url: `/api/v1/job-steps/by-chunk?chunkId=${chunkId}&name=nope` })).statusCode).toBe(404);
  });

  it('moves status like a job, sets startDate and endDate, and keeps jobId', async () => {
    const job = await newJob();
    const step = (await newStep(job.id)).json<Rec>();
    const started = await t.call({ method: 'PUT', url: `/api/v1/job-steps/${step.id}`, payload: { name: 'load', status: 'IN_PROGRESS', jobId: job.id } });
    expect(started.statusCode).toBe(200);
    expect(started.json<Rec>().startDate).toEqual(expect.any(String));
    expect((await t.call({ method: 'PATCH', url: `/api/v1/job-steps/${step.id}`, payload: { status: 'NEW' } })).statusCode).toBe(409);
    const other = await newJob();
    const moved = await t.call({ method: 'PATCH', url: `/api/v1/job-steps/${step.id}`, payload: { jobId: other.id } });
    expect(moved.statusCode).toBe(400);
    expect(moved.json()).toMatchObject({ errors: ['jobId: cannot change once set'] });
    const failed = await t.call({ method: 'PATCH', url: `/api/v1/job-steps/${step.id}`, payload: { status: 'FAILED', log: 'disk full' } });
    expect(failed.json()).toMatchObject({ status: 'FAILED', log: 'disk full', endDate: expect.any(String) });
  });

  it('shows a job with its steps once minPosition is reached (expand=JOB_STEPS)', async () => {
    const job = await newJob();
    const a = await newStep(job.id, { name: 'a' });
    const b = await newStep(job.id, { name: 'b', chunkId: randomUUID(), chunk: ['r1', 'r2'] });
    const patched = await t.call({ method: 'PATCH', url: `/api/v1/job-steps/${a.json<Rec>().id}`, payload: { status: 'IN_PROGRESS' } });
    const at = String(patched.headers['x-event-position']);
    const res = await t.call({ method: 'GET', url: `/api/v1/jobs/${job.id}?expand=JOB_STEPS&minPosition=${at}` });
    expect(res.statusCode).toBe(200);
    const steps = res.json<{ jobSteps: Rec[] }>().jobSteps;
    expect(steps.map((s) => [s.id, s.name, s.status, s.auditInfo.version])).toEqual([
      [a.json<Rec>().id, 'a', 'IN_PROGRESS', 1],
      [b.json<Rec>().id, 'b', 'NEW', 0],
    ]);
    // Searches of jobs answer the job with its steps too.
    const found = await t.call({ method: 'POST', url: `/api/v1/jobs/search?minPosition=${at}`, payload: { filter: [{ column: 'id', value: job.id }] } });
    expect(found.json<{ jobSteps: unknown[] }[]>()[0]?.jobSteps).toHaveLength(2);
  });
});
