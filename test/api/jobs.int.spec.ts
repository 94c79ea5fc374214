// Jobs and job steps over HTTP on the embedded stores: status moves, references, the unique
// (chunkId, name) pair under concurrency, a job with its steps, and admin-only access.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock, startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});

type Rec = Record<string, unknown> & { id: string; status: string; auditInfo: { version: number } };

const newJob = async (extra: Record<string, unknown> = {}) => {
  const res = await t.call({
    method: 'POST',
    url: '/api/v1/jobs',
    payload: { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT', ...extra },
  });
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
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/jobs',
          payload: { startDate: '2026-11-23T10:00:00Z', status: 'FAILED', jobType: 'X' },
        })
      ).statusCode,
    ).toBe(400);
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
    expect(conflict?.json()).toMatchObject({
      status: 'CONFLICT',
      errors: [expect.stringContaining('chunkId'), expect.stringContaining('name')],
    });
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
    const started = await t.call({
      method: 'PUT',
      url: `/api/v1/job-steps/${step.id}`,
      payload: { name: 'load', status: 'IN_PROGRESS', jobId: job.id },
    });
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
    const found = await t.call({
      method: 'POST',
      url: `/api/v1/jobs/search?minPosition=${at}`,
      payload: { filter: [{ column: 'id', value: job.id }] },
    });
    expect(found.json<{ jobSteps: unknown[] }[]>()[0]?.jobSteps).toHaveLength(2);
  });
});

describe('a job created with its steps (jobSteps in POST /jobs)', () => {
  const body = (extra: Record<string, unknown> = {}) => ({ startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT', ...extra });
  const createJob = (payload: unknown, headers: Record<string, string> = {}) =>
    t.call({ method: 'POST', url: '/api/v1/jobs', payload, headers });

  it('creates each step as its own record of the new job, shown by expand=JOB_STEPS', async () => {
    const chunkId = randomUUID();
    const res = await createJob(
      body({
        jobSteps: [
          { name: 'extract', status: 'NEW', chunkId },
          { name: 'load', status: 'IN_PROGRESS', chunkId, chunk: ['r1'] },
        ],
      }),
    );
    expect(res.statusCode, res.body).toBe(201);
    const job = res.json<Rec & { jobSteps: Rec[] }>();
    expect(job.jobSteps.map((s) => [s.name, s.status, s.jobId, s.chunkId])).toEqual([
      ['extract', 'NEW', job.id, chunkId],
      ['load', 'IN_PROGRESS', job.id, chunkId],
    ]);
    expect(job.jobSteps[1]?.startDate).toEqual(expect.any(String));
    const expanded = await t.call({
      method: 'GET',
      url: `/api/v1/jobs/${job.id}?expand=JOB_STEPS&minPosition=${String(res.headers['x-event-position'])}`,
    });
    expect(expanded.json<{ jobSteps: Rec[] }>().jobSteps.map((s) => s.id)).toEqual(job.jobSteps.map((s) => s.id));
    // Each step is a record of its own: one event on its own stream, found by its pair.
    for (const step of job.jobSteps) {
      const history = await t.call({ method: 'GET', url: `/api/v1/job-steps/${step.id}/history` });
      expect(history.json<{ type: string }[]>().map((h) => h.type)).toEqual(['JobStepCreated']);
    }
    const byChunk = await t.call({ method: 'GET', url: `/api/v1/job-steps/by-chunk?chunkId=${chunkId}&name=load` });
    expect(byChunk.json()).toMatchObject({ id: job.jobSteps[1]?.id, jobId: job.id });
    // Absent and empty steps still make a job alone.
    expect((await createJob(body({ jobSteps: [] }))).json()).toMatchObject({ jobSteps: [] });
    expect((await createJob(body())).json()).toMatchObject({ jobSteps: [] });
  });

  it('keeps (chunkId, name) unique within the request and against existing steps: 409, and no job is left', async () => {
    const chunkId = randomUUID();
    const twice = {
      id: randomUUID(),
      ...body({
        jobSteps: [
          { name: 'a', status: 'NEW', chunkId },
          { name: 'a', status: 'NEW', chunkId },
        ],
      }),
    };
    const dup = await createJob(twice);
    expect(dup.statusCode, dup.body).toBe(409);
    expect(dup.json()).toMatchObject({
      code: 'JOB_STEP.CHUNK_ID_NAME_TAKEN',
      errors: ['jobSteps[1].chunkId: also that of jobSteps[0]', 'jobSteps[1].name: also that of jobSteps[0]'],
    });
    expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${twice.id}` })).statusCode).toBe(404);

    const other = await newJob();
    expect((await newStep(other.id, { chunkId, name: 'held' })).statusCode).toBe(201);
    const taken = {
      id: randomUUID(),
      ...body({
        jobSteps: [
          { name: 'free', status: 'NEW', chunkId },
          { name: 'held', status: 'NEW', chunkId },
        ],
      }),
    };
    const refused = await createJob(taken);
    expect(refused.statusCode, refused.body).toBe(409);
    expect(refused.json()).toMatchObject({
      code: 'JOB_STEP.CHUNK_ID_NAME_TAKEN',
      errors: [expect.stringMatching(/^jobSteps\[1\]\.chunkId: .* is already taken$/), expect.stringMatching(/^jobSteps\[1\]\.name: /)],
    });
    expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${taken.id}` })).statusCode).toBe(404);
    // The pair of the step that was not made is still free.
    expect((await t.call({ method: 'GET', url: `/api/v1/job-steps/by-chunk?chunkId=${chunkId}&name=free` })).statusCode).toBe(404);
  });

  it('refuses a bad step with 400 naming it before anything is written', async () => {
    const id = randomUUID();
    const cases: [unknown, string][] = [
      [[{ name: 'a', status: 'FAILED' }], 'jobSteps[0].status'],
      [[{ name: 'a', status: 'NEW', jobId: randomUUID() }], 'jobSteps[0].jobId'],
      [[{ status: 'NEW' }], 'jobSteps[0].name'],
      [[{ name: 'a', status: 'NEW', nope: 1 }], 'jobSteps[0].nope'],
      [
        [
          { name: 'a', status: 'NEW' },
          { id: '6b2f1c54-7d3e-1a9b-8c4d-2e5f6a7b8c9d', name: 'b', status: 'NEW' },
        ],
        'jobSteps[1].id',
      ],
      ['steps', 'jobSteps'],
    ];
    for (const [jobSteps, field] of cases) {
      const res = await createJob({ id, ...body({ jobSteps }) });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json<{ errors: string[] }>().errors.join('\n'), JSON.stringify(jobSteps)).toContain(field);
    }
    expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${id}` })).statusCode).toBe(404);
    // A step may name its job when the body chooses the job's id.
    const named = await createJob({ id, ...body({ jobSteps: [{ name: 'a', status: 'NEW', jobId: id }] }) });
    expect(named.statusCode, named.body).toBe(201);
  });

  it('under an Idempotency-Key a retry answers the same job and steps; other steps are 409', async () => {
    const headers = { 'idempotency-key': `job-with-steps-${randomUUID()}` };
    const jobSteps = [
      { name: 'a', status: 'NEW', chunkId: randomUUID() },
      { name: 'b', status: 'NEW' },
    ];
    const payload = body({ jobSteps });
    const [first, second] = await Promise.all([createJob(payload, headers), createJob(payload, headers)]);
    expect([first.statusCode, second.statusCode], first.body + second.body).toEqual([201, 201]);
    const ids = (r: typeof first) => [r.json<Rec>().id, ...r.json<{ jobSteps: Rec[] }>().jobSteps.map((s) => s.id)];
    expect(ids(second)).toEqual(ids(first));
    const more = await createJob(body({ jobSteps: [...jobSteps, { name: 'c', status: 'NEW' }] }), headers);
    expect(more.statusCode).toBe(409);
    const expanded = await t.call({
      method: 'GET',
      url: `/api/v1/jobs/${first.json<Rec>().id}?expand=JOB_STEPS&minPosition=${String(first.headers['x-event-position'])}`,
    });
    expect(expanded.json<{ jobSteps: unknown[] }>().jobSteps).toHaveLength(2);
  });

  it('of concurrent jobs claiming one (chunkId, name), one is made with its step; each other job is not made at all', async () => {
    const chunkId = randomUUID();
    const ids = Array.from({ length: 6 }, () => randomUUID());
    const answers = await Promise.all(
      ids.map((id) =>
        createJob({
          id,
          ...body({
            jobSteps: [
              { name: 'own', status: 'NEW' },
              { name: 'shared', status: 'NEW', chunkId },
            ],
          }),
        }),
      ),
    );
    expect(answers.map((a) => a.statusCode).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    for (const [i, id] of ids.entries()) {
      const got = await t.call({ method: 'GET', url: `/api/v1/jobs/${id}` });
      expect(got.statusCode, `job ${String(i)}`).toBe(answers[i]?.statusCode === 201 ? 200 : 404);
    }
  });
});

// GET /jobs/{id} was a copy of the shared get without `asOf`; it is the shared get now, whose
// expansion adds the steps.
describe('a job as of a time (the shared get)', () => {
  const clock = manualClock();
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => {
    await app.close();
  });

  it('answers the job as it was then, 404 before it existed, and with its steps as now under expand=JOB_STEPS', async () => {
    const made = await app.call({
      method: 'POST',
      url: '/api/v1/jobs',
      payload: { startDate: '2026-11-23T10:00:00Z', status: 'NEW', jobType: 'IMPORT' },
    });
    expect(made.statusCode, made.body).toBe(201);
    const job = made.json<Rec>();
    const before = clock.now().toISOString();
    clock.advance(1000);
    expect((await app.call({ method: 'PATCH', url: `/api/v1/jobs/${job.id}`, payload: { status: 'IN_PROGRESS' } })).statusCode).toBe(200);
    const step = await app.call({ method: 'POST', url: '/api/v1/job-steps', payload: { name: 'load', status: 'NEW', jobId: job.id } });
    expect(step.statusCode, step.body).toBe(201);

    const then = await app.call({ method: 'GET', url: `/api/v1/jobs/${job.id}?asOf=${encodeURIComponent(before)}` });
    expect(then.statusCode, then.body).toBe(200);
    expect(then.json()).toMatchObject({ id: job.id, status: 'NEW', auditInfo: { version: 0 } });
    expect(then.headers.etag).toBe('"0"');
    const withSteps = await app.call({
      method: 'GET',
      url: `/api/v1/jobs/${job.id}?asOf=${encodeURIComponent(before)}&expand=JOB_STEPS&minPosition=${String(step.headers['x-event-position'])}`,
    });
    expect(withSteps.json()).toMatchObject({ status: 'NEW', jobSteps: [{ name: 'load' }] });
    const now = await app.call({ method: 'GET', url: `/api/v1/jobs/${job.id}` });
    expect(now.json()).toMatchObject({ status: 'IN_PROGRESS', auditInfo: { version: 1 } });
    expect((await app.call({ method: 'GET', url: `/api/v1/jobs/${job.id}?asOf=2000-01-01T00:00:00Z` })).statusCode).toBe(404);
  });
});
