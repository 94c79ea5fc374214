// Jobs and job steps (SPEC.md "Job and job step"): long actions and their parts, with a status
// that only moves forward. A job's steps are their own records (a step names its job); GET
// /jobs/{id}?expand=JOB_STEPS reads them from the read model that folds a job with its steps.

import { z } from 'zod';
import { DomainError, actionNotAllowed, forbidden, invalidTransition, validationFailed } from '../../../domain/shared/errors.ts';
import { dateTime, jsonMap, longText, text, uuid } from '../../../domain/shared/fields.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import {
  command,
  created,
  defineResource,
  deleted,
  exhaustive,
  ownEvent,
  patched,
  replaced,
  type Behaviour,
  type CommandOf,
  type DecideContext,
  type EventOf,
  type LiveRecord,
  type OwnEventOf,
  type ResourceDefinition,
} from '../../../domain/resource/defineResource.ts';

export const JobStatuses = ['NEW', 'IN_PROGRESS', 'COMPLETED', 'FAILED'] as const;
export type JobStatus = (typeof JobStatuses)[number];

/** The moves a status allows; COMPLETED and FAILED are final. */
export const STATUS_MOVES: Readonly<Record<JobStatus, readonly JobStatus[]>> = {
  NEW: ['IN_PROGRESS'],
  IN_PROGRESS: ['COMPLETED', 'FAILED'],
  COMPLETED: [],
  FAILED: [],
};
const STARTS: readonly JobStatus[] = ['NEW', 'IN_PROGRESS'];
export const isFinal = (status: unknown): boolean => status === 'COMPLETED' || status === 'FAILED';

/** The actor of the service's own read-model jobs: the only one that may write READ_MODEL_* jobs
 * (a client ending one would strand the read model it rebuilds). */
export const READ_MODEL_JOB_ACTOR = 'system:read-model-jobs';
const SERVICE_JOB = 'READ_MODEL_';

/** The job types the service runs itself. A cancel of one in progress asks its runner to stop at
 * its next step boundary (the runner then ends it FAILED, `cancelled`), and a retry resumes it
 * (IN_PROGRESS) where it stopped. Jobs of other types are run by clients through their status: a
 * cancel ends them at once, and a retry moves them back to NEW for their runner. */
export const ServiceJobTypes = {
  READ_MODEL_RECREATE: 'READ_MODEL_RECREATE',
  READ_MODEL_REFRESH: 'READ_MODEL_REFRESH',
  DIFF_APPLY: 'DIFF_APPLY',
  DIRECTORY_SYNC: 'DIRECTORY_SYNC',
} as const;
export const isServiceRun = (jobType: unknown): boolean => Object.values<unknown>(ServiceJobTypes).includes(jobType);

/** The reason (`data.failure`) of a cancelled job. */
export const CANCELLED = 'cancelled';

/** A cancel asked of a job the service runs, which its runner has not yet acted on. */
export const cancelRequestOf = (fields: JsonObject): { at: string; by: string } | undefined =>
  (fields.data as { cancelRequested?: { at: string; by: string } } | undefined)?.cancelRequested;

/** Who started a job: its first event's actor, or for the service's own read-model jobs the caller
 * that asked for it (kept in `data.requestedBy`). */
export function startedBy(record: Pick<LiveRecord, 'fields' | 'insertedBy'>): string {
  const requestedBy = (record.fields.data as JsonObject | undefined)?.requestedBy;
  return record.insertedBy === READ_MODEL_JOB_ACTOR && typeof requestedBy === 'string' ? requestedBy : record.insertedBy;
}

/** Only an admin may retry or cancel what another caller started (the service's own commands carry
 * no `privileged` and may). */
function assertMayAct(resource: string, action: string, starter: string, ctx: DecideContext): void {
  if (ctx.privileged === false && ctx.actor !== starter) throw forbidden(`Only an admin may ${action} a ${resource} it did not start`);
}

/** Only the service writes its own jobs: a client's create, replace or patch (its request context
 * says whether it is an admin; the service's own writes say nothing) of a job of a type the service
 * runs is refused, whatever its role, as it would strand or fake the work of that job's runner. */
function assertClientJob(before: JsonObject | undefined, after: JsonObject, ctx: DecideContext): void {
  const kind = [before?.jobType, after.jobType].find((t): t is string => typeof t === 'string' && isServiceRun(t));
  if (kind === undefined) return;
  const byService = kind.startsWith(SERVICE_JOB) ? ctx.actor === READ_MODEL_JOB_ACTOR : ctx.privileged === undefined;
  if (!byService) {
    throw new DomainError(
      'JOB.SERVICE_JOB',
      `${kind} jobs are run by the service: start them through ${kind.startsWith(SERVICE_JOB) ? '/api/v1/indexes' : kind === ServiceJobTypes.DIFF_APPLY ? 'diff/apply' : '/api/v1/directory/sync'}, and they end themselves (cancel and retry are their actions)`,
    );
  }
}

/** Dates set before stay when a change leaves them out; a record gets them when it starts or ends. */
function withDates(before: JsonObject | undefined, after: JsonObject, startField: 'startDate' | undefined, now: Date): JsonObject {
  const next: JsonObject = { ...after };
  if (startField !== undefined && after.status !== 'NEW' && next[startField] === undefined)
    next[startField] = before?.[startField] ?? now.toISOString();
  if (isFinal(after.status) && next.endDate === undefined)
    next.endDate = (isFinal(before?.status) ? before?.endDate : undefined) ?? now.toISOString();
  return next;
}

/** Status moves of jobs and steps alike: 409 naming the allowed moves; a record that starts gets
 * its startDate and one that ends its endDate (now) unless the change gives them. */
function statusMoves(resource: string, startField: 'startDate' | undefined): NonNullable<Behaviour['onChange']> {
  return (before, after, ctx: DecideContext) => {
    const to = after.status as JobStatus;
    assertClientJob(before, after, ctx);
    if (before === undefined && !STARTS.includes(to)) {
      throw validationFailed(`A ${resource} starts NEW or IN_PROGRESS`, [`status: ${to} is not a starting status; use NEW or IN_PROGRESS`]);
    }
    const from = before?.status as JobStatus | undefined;
    if (from !== undefined && from !== to && !STATUS_MOVES[from].includes(to)) {
      throw invalidTransition(resource, 'status', from, to, STATUS_MOVES[from]);
    }
    return withDates(before, after, startField, ctx.now);
  };
}

const status = () =>
  z
    .enum(JobStatuses)
    .meta({
      description:
        'NEW → IN_PROGRESS → COMPLETED | FAILED; any other move is 409 naming the allowed ones. A FAILED one moves again only through its retry action.',
    });

/** Who asked for a retry or a cancel, and when. */
const actedBy = { at: dateTime(), by: text().meta({ description: 'The actor.' }) };

const jobStepEvents = {
  JobStepCreated: created(),
  JobStepReplaced: replaced(),
  JobStepPatched: patched(),
  JobStepDeleted: deleted(),
  JobStepRetried: ownEvent({
    meaning: 'A FAILED step went back to NEW for its runner (its retry action), without the dates of its last attempt.',
    data: z.strictObject(actedBy),
    evolve: (r) => {
      const { startDate: _start, endDate: _end, ...fields } = r.fields;
      return { ...r, fields: { ...fields, status: 'NEW' } };
    },
  }),
};
export type JobStepEvent = EventOf<typeof jobStepEvents>;

const jobStepCommands = {
  Retry: command('Retry a FAILED step (POST /api/v1/job-steps/{id}/retry): an admin, or the caller that started it.', z.strictObject({})),
};
export type JobStepCommand = CommandOf<typeof jobStepCommands>;

export const jobStep: ResourceDefinition<typeof jobStepEvents, typeof jobStepCommands> = defineResource({
  name: 'JobStep',
  path: 'job-steps',
  description:
    'One part of a job. (chunkId, name) is unique: a second step with the same pair is 409 JOB_STEP.CHUNK_ID_NAME_TAKEN. ' +
    '`jobId` must name an existing job (422) and cannot change. `startDate` is set when the step leaves NEW and `endDate` when it ends, unless given.',
  fields: z.strictObject({
    name: text(),
    startDate: dateTime().optional(),
    status: status(),
    jobId: uuid(),
    chunkId: uuid().optional(),
    chunk: z.array(z.string().max(1000)).max(10_000).optional(),
    endDate: dateTime().optional(),
    stepData: jsonMap().optional(),
    processingInfo: jsonMap().optional(),
    log: longText(100_000).optional(),
  }),
  unique: [{ name: 'chunkIdName', fields: ['chunkId', 'name'] }],
  references: [{ field: 'jobId', resource: () => job }],
  immutable: ['jobId'],
  carried: ['jobId'],
  indexed: ['jobId', 'status'],
  defaultSort: ['auditInfo.whenInserted'],
  operations: ['create', 'get', 'versions', 'history', 'replace', 'patch', 'byIds', 'list', 'search', 'searchPage', 'count'],
  events: jobStepEvents,
  commands: jobStepCommands,
  behaviour: {
    onChange: statusMoves('JOB_STEP', 'startDate'),
    decide(command, record, ctx) {
      switch (command.type) {
        // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- the one command today; a second one meets the default
        case 'Retry': {
          assertMayAct('JOB_STEP', 'retry', record.insertedBy, ctx);
          const from = record.fields.status as JobStatus;
          if (from !== 'FAILED') throw actionNotAllowed('JOB_STEP', 'retried', from, ['FAILED']);
          return [{ type: 'JobStepRetried', data: { at: ctx.now.toISOString(), by: ctx.actor } }];
        }
        default:
          return exhaustive(command.type, 'job step command');
      }
    },
  },
});

/** A step given inline with its job (POST /api/v1/jobs): `jobId` is the new job's. */
export const jobStepInline = jobStep.input
  .extend({ jobId: uuid().optional().meta({ description: "The new job's id, or absent: a step given with its job belongs to it." }) })
  .meta({ id: 'JobStepInline', description: 'A step created with its job, as POST /api/v1/job-steps would create it.' });

/** Steps one create of a job may carry. */
export const MAX_INLINE_STEPS = 1000;

/** What the service's own job runners record on their jobs (index rebuilds and refreshes, diff
 * applies), and the actions of callers on a job: retry and cancel. */
const jobCommands = {
  Progress: command('A job the service runs records how far it got (`data.progress`).', z.strictObject({ progress: jsonMap() })),
  Complete: command('A job the service runs ends COMPLETED with its result.', z.strictObject({ result: jsonMap() })),
  Fail: command('A job ends FAILED, with the reason.', z.strictObject({ reason: z.string() })),
  Resume: command('The service takes a job up again after a restart, with the reason.', z.strictObject({ reason: z.string() })),
  Retry: command(
    'Retry a FAILED job (POST /api/v1/jobs/{id}/retry): an admin, or the caller that started it.',
    z.strictObject({
      unavailable: z
        .string()
        .optional()
        .meta({ description: "Why the job's runner cannot resume it (a diff apply whose entries are gone): 409." }),
    }),
  ),
  Cancel: command(
    'Cancel a job not yet ended: at once, or for a job the service runs that is IN_PROGRESS, asked of its runner.',
    z.strictObject({}),
  ),
  ConfirmCancel: command(
    'The runner of a job the service runs has stopped at a step boundary after a cancel was asked.',
    z.strictObject({}),
  ),
};
export type JobCommand = CommandOf<typeof jobCommands>;

const dataOf = (fields: JsonObject): JsonObject => (fields.data as JsonObject | undefined) ?? {};
const mergeData = (fields: JsonObject, extra: JsonObject): JsonObject => ({ ...fields, data: { ...dataOf(fields), ...extra } });

/** Back to work after a failure: the failure and the resumes of the attempt that failed move into
 * `data.retries`, progress stays (the runner resumes from it). */
function retried(fields: JsonObject, d: JsonObject): JsonObject {
  const { endDate: _end, ...rest } = fields;
  const { failure, cancelled: _cancelled, cancelRequested: _asked, resumed, ...data } = dataOf(fields);
  const retries = (data.retries as unknown[] | undefined) ?? [];
  const attempt = { at: d.at, by: d.by, ...(failure === undefined ? {} : { failure }), ...(resumed === undefined ? {} : { resumed }) };
  return { ...rest, status: d.status, data: { ...data, retries: [...retries, attempt] } };
}

type OwnJobEvent = OwnEventOf<typeof jobEvents>;

function decideCancel(record: LiveRecord, ctx: DecideContext): OwnJobEvent[] {
  assertMayAct('JOB', 'cancel', startedBy(record), ctx);
  const from = record.fields.status as JobStatus;
  if (isFinal(from)) throw actionNotAllowed('JOB', 'cancelled', from, ['NEW', 'IN_PROGRESS']);
  if (from === 'IN_PROGRESS' && isServiceRun(record.fields.jobType)) {
    return cancelRequestOf(record.fields) === undefined
      ? [{ type: 'JobCancelRequested', data: { at: ctx.now.toISOString(), by: ctx.actor } }]
      : [];
  }
  return [{ type: 'JobCancelled', data: { endDate: ctx.now.toISOString(), by: ctx.actor } }];
}

function decideRetry(record: LiveRecord, unavailable: string | undefined, ctx: DecideContext): OwnJobEvent[] {
  assertMayAct('JOB', 'retry', startedBy(record), ctx);
  const from = record.fields.status as JobStatus;
  if (from !== 'FAILED') throw actionNotAllowed('JOB', 'retried', from, ['FAILED']);
  if (unavailable !== undefined)
    throw new DomainError('JOB.NOT_RESUMABLE', `Job ${record.id} cannot be resumed: ${unavailable}`, [
      `jobType: ${String(record.fields.jobType)}`,
    ]);
  const status: JobStatus = isServiceRun(record.fields.jobType) ? 'IN_PROGRESS' : 'NEW';
  return [{ type: 'JobRetried', data: { at: ctx.now.toISOString(), by: ctx.actor, status } }];
}

const jobEvents = {
  JobCreated: created(),
  JobReplaced: replaced(),
  JobPatched: patched(),
  JobDeleted: deleted(),
  JobProgressed: ownEvent({
    meaning: 'A job the service runs recorded how far it got: `data.progress` of the job.',
    data: z.strictObject({ progress: jsonMap() }),
    evolve: (r, d) => ({ ...r, fields: mergeData(r.fields, { progress: d.progress }) }),
  }),
  JobCompleted: ownEvent({
    meaning: 'A job the service runs ended COMPLETED, with its result (`data.result`).',
    data: z.strictObject({ endDate: dateTime(), result: jsonMap() }),
    evolve: (r, d) => ({ ...r, fields: { ...mergeData(r.fields, { result: d.result }), status: 'COMPLETED', endDate: d.endDate } }),
  }),
  JobFailed: ownEvent({
    meaning: 'A job ended FAILED; `reason` becomes `data.failure`.',
    data: z.strictObject({ endDate: dateTime(), reason: z.string() }),
    evolve: (r, d) => ({ ...r, fields: { ...mergeData(r.fields, { failure: d.reason }), status: 'FAILED', endDate: d.endDate } }),
  }),
  JobResumed: ownEvent({
    meaning: 'The service took a job up again after a restart (appended to `data.resumed`).',
    data: z.strictObject({ at: dateTime(), reason: z.string() }),
    evolve: (r, d) => {
      const data = (r.fields.data as JsonObject | undefined) ?? {};
      return {
        ...r,
        fields: mergeData(r.fields, { resumed: [...((data.resumed as unknown[] | undefined) ?? []), { at: d.at, reason: d.reason }] }),
      };
    },
  }),
  JobCancelRequested: ownEvent({
    meaning:
      'A cancel of a job the service runs was asked while it is IN_PROGRESS: its runner stops at its next step boundary (`data.cancelRequested`).',
    data: z.strictObject(actedBy),
    evolve: (r, d) => ({ ...r, fields: mergeData(r.fields, { cancelRequested: { at: d.at, by: d.by } }) }),
  }),
  JobCancelled: ownEvent({
    meaning: 'A job was cancelled: it ends FAILED with `data.failure` "cancelled" and `data.cancelled` saying who and when.',
    data: z.strictObject({ endDate: dateTime(), by: text().meta({ description: 'Who asked for the cancel.' }) }),
    evolve: (r, d) => {
      const { cancelRequested: _asked, ...data } = dataOf(r.fields);
      return {
        ...r,
        fields: {
          ...r.fields,
          data: { ...data, failure: CANCELLED, cancelled: { at: d.endDate, by: d.by } },
          status: 'FAILED',
          endDate: d.endDate,
        },
      };
    },
  }),
  JobRetried: ownEvent({
    meaning:
      'A FAILED job was retried: back to `status` (NEW for its runner, IN_PROGRESS for one the service runs, which resumes), the failed attempt moved into `data.retries`.',
    data: z.strictObject({ ...actedBy, status: z.enum(JobStatuses) }),
    evolve: (r, d) => ({ ...r, fields: retried(r.fields, d) }),
  }),
};
export type JobEvent = EventOf<typeof jobEvents>;

export const job: ResourceDefinition<typeof jobEvents, typeof jobCommands> = defineResource({
  name: 'Job',
  path: 'jobs',
  description:
    'A long action and its progress. `jobSteps` is filled by GET /api/v1/jobs/{id}?expand=JOB_STEPS and in searches, empty otherwise; ' +
    "a create may give the job's first steps in it (each made a JobStep of the new job). " +
    'Jobs the service runs itself (READ_MODEL_RECREATE, READ_MODEL_REFRESH) record their progress in `data.progress`, ' +
    'and after a restart are resumed, or FAILED with `data.failure` saying why.',
  fields: z.strictObject({
    startDate: dateTime(),
    status: status(),
    jobType: text(),
    data: jsonMap().optional(),
    endDate: dateTime().optional(),
  }),
  readOnly: {
    jobSteps: { schema: z.array(jobStep.record).meta({ description: "Read-only: the job's steps, oldest first." }), initial: [] },
  },
  indexed: ['status', 'jobType', 'startDate'],
  defaultSort: ['startDate'],
  operations: ['create', 'get', 'versions', 'history', 'replace', 'patch', 'byIds', 'list', 'search', 'searchPage', 'count'],
  events: jobEvents,
  commands: jobCommands,
  behaviour: {
    onChange: statusMoves('JOB', undefined),
    decide(c, record, ctx) {
      const from = record.fields.status as JobStatus;
      const ending = (to: JobStatus) => {
        if (from !== 'IN_PROGRESS' && !(from === 'NEW' && to === 'FAILED'))
          throw invalidTransition('JOB', 'status', from, to, STATUS_MOVES[from]);
      };
      switch (c.type) {
        case 'Progress':
          if (isFinal(from)) return [];
          return [{ type: 'JobProgressed', data: { progress: c.progress } }];
        case 'Complete':
          if (from === 'COMPLETED') return [];
          ending('COMPLETED');
          return [{ type: 'JobCompleted', data: { endDate: ctx.now.toISOString(), result: c.result } }];
        case 'Fail':
          if (from === 'FAILED') return [];
          ending('FAILED');
          return [{ type: 'JobFailed', data: { endDate: ctx.now.toISOString(), reason: c.reason } }];
        case 'Resume':
          if (from !== 'IN_PROGRESS') return [];
          return [{ type: 'JobResumed', data: { at: ctx.now.toISOString(), reason: c.reason } }];
        case 'Retry':
          return decideRetry(record, c.unavailable, ctx);
        case 'Cancel':
          return decideCancel(record, ctx);
        case 'ConfirmCancel':
          if (isFinal(from)) return [];
          return [{ type: 'JobCancelled', data: { endDate: ctx.now.toISOString(), by: cancelRequestOf(record.fields)?.by ?? ctx.actor } }];
        default:
          return exhaustive(c, 'job command');
      }
    },
  },
});

/** What POST /api/v1/jobs takes: the job, and steps to create with it. */
export const jobCreateInput = job.input
  .extend({
    jobSteps: z
      .array(jobStepInline)
      .max(MAX_INLINE_STEPS)
      .optional()
      .meta({
        description:
          'Steps to create with the job, in order: each becomes a JobStep of the new job (its own record, as POST /api/v1/job-steps makes it). ' +
          '(chunkId, name) must be unique within the list and against existing steps (409 JOB_STEP.CHUNK_ID_NAME_TAKEN naming the step); ' +
          'every step is checked before anything is written, and a step that still cannot be written undoes the job and the steps before it.',
      }),
  })
  .meta({ id: 'JobCreate', description: 'A job to create, with its first steps.' });
