// The job and job-step deciders as given / when / then: status moves, dates, the service's own
// job commands, and who may write READ_MODEL_* jobs.

import { describe, expect, it } from 'vitest';
import { job, jobStep, READ_MODEL_JOB_ACTOR } from '../../../modules/jobs/domain/jobs.ts';
import type { DecideContext, ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import {
  decide,
  evolve,
  initialState,
  toRecord,
  type DecidedEvent,
  type RecordState,
  type ResourceCommand,
} from '../../../domain/resource/decider.ts';
import { deciderSpec } from '../../support/deciderSpec.ts';

const ID = '3f0c9a2e-5b1d-4c7e-8a9f-1d2e3f4a5b6c';
const JOB = '9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d';
const NOW = new Date('2026-11-23T12:00:00.000Z');
const client: DecideContext = { now: NOW, actor: 'alice', refs: new Map() };
const service: DecideContext = { ...client, actor: READ_MODEL_JOB_ACTOR };

const spec = (def: ResourceDefinition, ctx: DecideContext = client) =>
  deciderSpec<RecordState, ResourceCommand, DecidedEvent>({
    initial: initialState,
    evolve: (s, e, i) => evolve(def, s, { ...e, revision: i, metadata: { actor: 'x', at: '2026-11-23T10:00:00.000Z' } }),
    decide: (s, c) => decide(def, s, c, ctx),
  });

const created = (fields: Record<string, unknown>): DecidedEvent => ({
  type: 'JobCreated',
  data: { id: ID, startDate: '2026-11-23T10:00:00.000Z', jobType: 'IMPORT', status: 'NEW', ...fields },
});

describe('job decider', () => {
  const { given } = spec(job);

  it('moves NEW → IN_PROGRESS → COMPLETED, setting endDate when it ends', () => {
    given([created({})])
      .when({ type: 'Patch', patch: { status: 'IN_PROGRESS' } })
      .then([{ type: 'JobPatched', data: { patch: { status: 'IN_PROGRESS' } } }]);
    given([created({ status: 'IN_PROGRESS' })])
      .when({ type: 'Patch', patch: { status: 'COMPLETED' } })
      .then([{ type: 'JobPatched', data: { patch: { status: 'COMPLETED', endDate: NOW.toISOString() } } }]);
  });

  it('refuses a move the status does not allow with 409 naming the allowed ones, and an ended start', () => {
    given([created({})])
      .when({ type: 'Patch', patch: { status: 'FAILED' } })
      .thenThrows({
        status: 'CONFLICT',
        code: 'JOB.INVALID_TRANSITION',
        errors: ['status: NEW -> FAILED is not allowed; allowed: IN_PROGRESS'],
      });
    given([created({ status: 'COMPLETED' })])
      .when({ type: 'Patch', patch: { status: 'IN_PROGRESS' } })
      .thenThrows({ status: 'CONFLICT', errors: ['status: COMPLETED -> IN_PROGRESS is not allowed; allowed: none'] });
    given([])
      .when({ type: 'Create', id: ID, input: { startDate: '2026-11-23T10:00:00Z', status: 'COMPLETED', jobType: 'X' } })
      .thenThrows({ status: 'BAD_REQUEST' });
  });

  it('lets only the service write its READ_MODEL_* jobs', () => {
    const input = { startDate: '2026-11-23T10:00:00Z', status: 'IN_PROGRESS', jobType: 'READ_MODEL_RECREATE' };
    given([]).when({ type: 'Create', id: ID, input }).thenThrows({ status: 'CONFLICT', code: 'JOB.SERVICE_JOB' });
    spec(job, service)
      .given([])
      .when({ type: 'Create', id: ID, input })
      .then([{ type: 'JobCreated' }]);
  });

  it("lets only the service write its DIFF_APPLY and DIRECTORY_SYNC jobs: a client request is refused, an admin's too", () => {
    for (const jobType of ['DIFF_APPLY', 'DIRECTORY_SYNC']) {
      const input = { startDate: '2026-11-23T10:00:00Z', status: 'IN_PROGRESS', jobType };
      for (const privileged of [true, false]) {
        const request = spec(job, { ...client, privileged });
        request.given([]).when({ type: 'Create', id: ID, input }).thenThrows({ status: 'CONFLICT', code: 'JOB.SERVICE_JOB' });
        request
          .given([created({ jobType, status: 'IN_PROGRESS' })])
          .when({ type: 'Patch', patch: { status: 'COMPLETED' } })
          .thenThrows({ status: 'CONFLICT', code: 'JOB.SERVICE_JOB' });
      }
      // The service's own writes carry no `privileged`.
      spec(job)
        .given([])
        .when({ type: 'Create', id: ID, input })
        .then([{ type: 'JobCreated' }]);
    }
  });

  it("records progress, completion, failure and resumes of the service's runs as own events", () => {
    const running = [created({ status: 'IN_PROGRESS', data: { indexName: 'x' } })];
    given(running)
      .when({ type: 'Own', command: { type: 'Progress', progress: { folded: 10 } } })
      .then([{ type: 'JobProgressed', data: { progress: { folded: 10 } } }]);
    given(running)
      .when({ type: 'Own', command: { type: 'Complete', result: { documents: 3 } } })
      .then([{ type: 'JobCompleted', data: { endDate: NOW.toISOString(), result: { documents: 3 } } }]);
    given(running)
      .when({ type: 'Own', command: { type: 'Fail', reason: 'disk full' } })
      .then([{ type: 'JobFailed', data: { endDate: NOW.toISOString(), reason: 'disk full' } }]);
    given([...running, { type: 'JobCompleted', data: { endDate: NOW.toISOString(), result: {} } }])
      .when({ type: 'Own', command: { type: 'Complete', result: {} } })
      .thenNothing();
    given([created({})])
      .when({ type: 'Own', command: { type: 'Complete', result: {} } })
      .thenThrows({ status: 'CONFLICT', code: 'JOB.INVALID_TRANSITION' });
    const state = [...running, { type: 'JobFailed', data: { endDate: NOW.toISOString(), reason: 'disk full' } }].reduce<RecordState>(
      (s, e, i) => evolve(job, s, { ...e, revision: i, metadata: { actor: 'x', at: NOW.toISOString() } }),
      initialState(),
    );
    if (state.status === 'absent') throw new Error('absent');
    expect(toRecord(state)).toMatchObject({ status: 'FAILED', endDate: NOW.toISOString(), data: { indexName: 'x', failure: 'disk full' } });
  });
});

describe('job actions: retry and cancel', () => {
  const { given } = spec(job);
  const own = (command: Record<string, unknown>): ResourceCommand => ({ type: 'Own', command: command as { type: string } });
  const failed = (fields: Record<string, unknown>) => [
    created({ status: 'IN_PROGRESS', ...fields }),
    { type: 'JobFailed', data: { endDate: NOW.toISOString(), reason: 'disk full' } },
  ];
  const stateOf = (events: DecidedEvent[]) => {
    const state = events.reduce<RecordState>(
      (s, e, i) => evolve(job, s, { ...e, revision: i, metadata: { actor: 'x', at: NOW.toISOString() } }),
      initialState(),
    );
    if (state.status === 'absent') throw new Error('absent');
    return toRecord(state);
  };

  it("cancels a client's job at once, and asks a running service job to stop (its runner confirms at a step boundary)", () => {
    given([created({})])
      .when(own({ type: 'Cancel' }))
      .then([{ type: 'JobCancelled', data: { endDate: NOW.toISOString(), by: 'alice' } }]);
    given([created({ status: 'IN_PROGRESS' })])
      .when(own({ type: 'Cancel' }))
      .then([{ type: 'JobCancelled' }]);
    const running = [created({ status: 'IN_PROGRESS', jobType: 'DIFF_APPLY' })];
    given(running)
      .when(own({ type: 'Cancel' }))
      .then([{ type: 'JobCancelRequested', data: { at: NOW.toISOString(), by: 'alice' } }]);
    const asked = [...running, { type: 'JobCancelRequested', data: { at: NOW.toISOString(), by: 'alice' } }];
    given(asked)
      .when(own({ type: 'Cancel' }))
      .thenNothing();
    given(asked)
      .when(own({ type: 'ConfirmCancel' }))
      .then([{ type: 'JobCancelled', data: { endDate: NOW.toISOString(), by: 'alice' } }]);
    const ended = stateOf([...asked, { type: 'JobCancelled', data: { endDate: NOW.toISOString(), by: 'alice' } }]);
    expect(ended).toMatchObject({
      status: 'FAILED',
      endDate: NOW.toISOString(),
      data: { failure: 'cancelled', cancelled: { at: NOW.toISOString(), by: 'alice' } },
    });
    expect(ended.data).not.toHaveProperty('cancelRequested');
    given(failed({}))
      .when(own({ type: 'Cancel' }))
      .thenThrows({ status: 'CONFLICT', code: 'JOB.INVALID_TRANSITION', errors: ['status: FAILED; cancelled needs NEW or IN_PROGRESS'] });
    given(failed({}))
      .when(own({ type: 'ConfirmCancel' }))
      .thenNothing();
  });

  it("retries only a FAILED job: a service job resumes IN_PROGRESS, a client's goes back to NEW; the failure moves to data.retries", () => {
    given(failed({}))
      .when(own({ type: 'Retry' }))
      .then([{ type: 'JobRetried', data: { at: NOW.toISOString(), by: 'alice', status: 'NEW' } }]);
    given(failed({ jobType: 'READ_MODEL_RECREATE' }))
      .when(own({ type: 'Retry' }))
      .then([{ type: 'JobRetried', data: { at: NOW.toISOString(), by: 'alice', status: 'IN_PROGRESS' } }]);
    given(failed({ jobType: 'DIFF_APPLY' }))
      .when(own({ type: 'Retry', unavailable: 'its entries are gone' }))
      .thenThrows({ status: 'CONFLICT', code: 'JOB.NOT_RESUMABLE' });
    given([created({ status: 'IN_PROGRESS' })])
      .when(own({ type: 'Retry', unavailable: 'x' }))
      .thenThrows({ code: 'JOB.INVALID_TRANSITION', errors: ['status: IN_PROGRESS; retried needs FAILED'] });
    const events = [
      ...failed({ jobType: 'DIFF_APPLY', data: { progress: { done: 16 }, resumed: [{ at: 'a', reason: 'r' }] } }),
      { type: 'JobRetried', data: { at: NOW.toISOString(), by: 'alice', status: 'IN_PROGRESS' } },
    ];
    const record = stateOf(events);
    expect(record).toMatchObject({
      status: 'IN_PROGRESS',
      data: {
        progress: { done: 16 },
        retries: [{ at: NOW.toISOString(), by: 'alice', failure: 'disk full', resumed: [{ at: 'a', reason: 'r' }] }],
      },
    });
    expect(record).not.toHaveProperty('endDate');
    expect(record.data).not.toHaveProperty('failure');
    expect(record.data).not.toHaveProperty('resumed');
  });

  it('lets only an admin act on a job another caller started; the starter of a read-model job is who asked for it', () => {
    const caller = (actor: string): DecideContext => ({ ...client, actor, privileged: false });
    const by = (ctx: DecideContext) => spec(job, ctx).given(failed({}));
    by(caller('bob'))
      .when(own({ type: 'Retry' }))
      .thenThrows({ status: 'FORBIDDEN' });
    by(caller('bob'))
      .when(own({ type: 'Cancel' }))
      .thenThrows({ status: 'FORBIDDEN' });
    by(caller('x'))
      .when(own({ type: 'Retry' }))
      .then([{ type: 'JobRetried' }]);
    by({ ...client, actor: 'bob', privileged: true })
      .when(own({ type: 'Retry' }))
      .then([{ type: 'JobRetried' }]);
    const rebuild = created({ status: 'IN_PROGRESS', jobType: 'READ_MODEL_RECREATE', data: { requestedBy: 'carol' } });
    const asService = (ctx: DecideContext) =>
      deciderSpec<RecordState, ResourceCommand, DecidedEvent>({
        initial: initialState,
        evolve: (s, e, i) => evolve(job, s, { ...e, revision: i, metadata: { actor: READ_MODEL_JOB_ACTOR, at: NOW.toISOString() } }),
        decide: (s, c) => decide(job, s, c, ctx),
      }).given([rebuild]);
    asService(caller('carol'))
      .when(own({ type: 'Cancel' }))
      .then([{ type: 'JobCancelRequested' }]);
    asService(caller('bob'))
      .when(own({ type: 'Cancel' }))
      .thenThrows({ status: 'FORBIDDEN' });
  });
});

describe('job step decider', () => {
  const { given } = spec(jobStep);
  const step = (fields: Record<string, unknown>): DecidedEvent => ({
    type: 'JobStepCreated',
    data: { id: ID, name: 'load', status: 'NEW', jobId: JOB, chunkId: ID, ...fields },
  });

  it('claims its (chunkId, name) pair on create, and none without a chunk', () => {
    given([])
      .when({ type: 'Create', id: ID, input: { name: 'load', status: 'NEW', jobId: JOB, chunkId: ID } })
      .then([{ type: 'JobStepCreated' }], { claim: [{ scope: 'jobStep.chunkIdName', code: JSON.stringify([ID, 'load']) }] });
    given([])
      .when({ type: 'Create', id: ID, input: { name: 'load', status: 'NEW', jobId: JOB } })
      .then([{ type: 'JobStepCreated' }], { claim: [] });
  });

  it('carries its jobId on every event, keeps it, and sets startDate when it starts', () => {
    given([step({})])
      .when({ type: 'Patch', patch: { status: 'IN_PROGRESS' } })
      .then([{ type: 'JobStepPatched', data: { patch: { status: 'IN_PROGRESS', startDate: NOW.toISOString() }, jobId: JOB } }]);
    given([step({})])
      .when({ type: 'Patch', patch: { jobId: ID } })
      .thenThrows({ status: 'BAD_REQUEST', errors: ['jobId: cannot change once set'] });
  });

  it('retries a FAILED step back to NEW without the dates of its attempt; only a FAILED one, only its creator or an admin', () => {
    const ended = step({ status: 'FAILED', startDate: '2026-11-23T10:00:00.000Z', endDate: '2026-11-23T11:00:00.000Z', log: 'row 7' });
    given([ended])
      .when({ type: 'Own', command: { type: 'Retry' } })
      .then([{ type: 'JobStepRetried', data: { at: NOW.toISOString(), by: 'alice', jobId: JOB } }]);
    const state = [ended, { type: 'JobStepRetried', data: { at: NOW.toISOString(), by: 'alice', jobId: JOB } }].reduce<RecordState>(
      (s, e, i) => evolve(jobStep, s, { ...e, revision: i, metadata: { actor: 'x', at: NOW.toISOString() } }),
      initialState(),
    );
    if (state.status === 'absent') throw new Error('absent');
    expect(toRecord(state)).toMatchObject({ status: 'NEW', log: 'row 7', jobId: JOB });
    expect(toRecord(state)).not.toHaveProperty('startDate');
    expect(toRecord(state)).not.toHaveProperty('endDate');
    given([step({})])
      .when({ type: 'Own', command: { type: 'Retry' } })
      .thenThrows({ status: 'CONFLICT', code: 'JOB_STEP.INVALID_TRANSITION' });
    spec(jobStep, { ...client, actor: 'bob', privileged: false })
      .given([ended])
      .when({ type: 'Own', command: { type: 'Retry' } })
      .thenThrows({ status: 'FORBIDDEN' });
  });

  it('keeps the dates it ended with when a replace leaves them out', () => {
    const ended = step({ status: 'COMPLETED', startDate: '2026-11-23T10:00:00.000Z', endDate: '2026-11-23T11:00:00.000Z' });
    given([ended])
      .when({ type: 'Replace', input: { name: 'load', status: 'COMPLETED', jobId: JOB, chunkId: ID, log: 'done' } })
      .then([
        {
          type: 'JobStepReplaced',
          data: {
            name: 'load',
            status: 'COMPLETED',
            jobId: JOB,
            chunkId: ID,
            log: 'done',
            startDate: '2026-11-23T10:00:00.000Z',
            endDate: '2026-11-23T11:00:00.000Z',
          },
        },
      ]);
  });
});
