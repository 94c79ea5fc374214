// The actions on a job and a step (SPEC.md "other asynchronous actions" → job acknowledgement, and
// "job state or error response"): retry, cancel, a step's retry, and a job's state with the error
// body of a FAILED one. Each action is a command of the job's (or step's) own decider; a retried
// job the service runs is resumed by its runner where it stopped.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { CANCELLED, JobStatuses, cancelRequestOf, job, jobStep, startedBy } from '../domain/jobs.ts';
import type { LiveRecord } from '../../../domain/resource/defineResource.ts';
import type { WriteResult } from '../../../domain/resource/service.ts';
import type { CommandContext } from '../../../domain/shared/commandHandler.ts';
import { DomainError, forbidden, isDomainError, notFound } from '../../../domain/shared/errors.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { JOB_TYPES } from '../../../workers/readModelJobs.ts';
import { allows } from '../../../api/auth.ts';
import { DIFF_APPLY_JOB, retryApply } from '../../../api/diffApply.ts';
import { ErrorBodySchema, errorBody } from '../../../api/errorHandler.ts';
import { zodRoutes, type AppDeps } from '../../../api/module.ts';
import { eventPosition, location, notModified, uuidParam as uuidOf, versionTag } from '../../../api/replies.ts';
import { commandContext } from '../../../api/requestContext.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { idOnly, JobAckSchema, notModifiedSchema } from '../../../api/schemas.ts';

/** Failed steps listed in a failed job's error body. */
const FAILED_STEPS_SHOWN = 20;

const at = z.object({ at: z.string(), by: z.string() });

const JobStateSchema = z
  .object({
    jobId: z.uuid(),
    jobType: z.string(),
    status: z.enum(JobStatuses),
    version: z.int().meta({ description: "the job's auditInfo.version (also its ETag)" }),
    startDate: z.string(),
    endDate: z.string().optional().meta({ description: 'when it ended (COMPLETED or FAILED)' }),
    progress: z.record(z.string(), z.unknown()).optional().meta({ description: 'data.progress: how far its runner got' }),
    result: z.record(z.string(), z.unknown()).optional().meta({ description: 'data.result of a COMPLETED job the service ran' }),
    cancelRequested: at
      .optional()
      .meta({ description: 'a cancel asked of a job the service runs, which its runner has not reached a step boundary to act on yet' }),
    retries: z.int().meta({ description: 'how often it was retried (data.retries lists each with the failure it ended)' }),
    error: ErrorBodySchema.optional().meta({
      description:
        'Only when FAILED: the error body of API.md. code JOB.CANCELLED (status CONFLICT) for a cancelled job, else JOB.FAILED (status ' +
        'INTERNAL_SERVER_ERROR) with its reason (data.failure) and its FAILED steps as the jobs read model has them; timestamp is when it ended, ' +
        "traceId this request's.",
    }),
  })
  .meta({
    id: 'JobState',
    description: 'The state of a job; when FAILED, with the error body saying why.',
    examples: [
      {
        jobId: '5d1f6a2e-8b3c-4d7e-9f0a-1b2c3d4e5f60',
        jobType: 'READ_MODEL_RECREATE',
        status: 'IN_PROGRESS',
        version: 3,
        startDate: '2026-11-23T10:00:00.000Z',
        progress: { phase: 'catch-up', generation: 2, folded: 120000, position: '120410', head: '120455' },
        cancelRequested: { at: '2026-11-23T10:00:09.000Z', by: 'alice-admin' },
        retries: 0,
      },
      {
        jobId: '5d1f6a2e-8b3c-4d7e-9f0a-1b2c3d4e5f60',
        jobType: 'READ_MODEL_RECREATE',
        status: 'FAILED',
        version: 5,
        startDate: '2026-11-23T10:00:00.000Z',
        endDate: '2026-11-23T10:00:10.000Z',
        progress: { phase: 'catch-up', generation: 2, folded: 120000, position: '120455', head: '120455' },
        retries: 0,
        error: {
          status: 'CONFLICT',
          timestamp: '2026-11-23T10:00:10.000Z',
          message: 'Job 5d1f6a2e-8b3c-4d7e-9f0a-1b2c3d4e5f60 was cancelled by alice-admin',
          traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
          errors: ['status: FAILED (cancelled at 2026-11-23T10:00:10.000Z by alice-admin)'],
          code: 'JOB.CANCELLED',
        },
      },
      {
        jobId: '7a0e2c4b-6d8f-4a1b-8c3d-5e7f9a1b3c5d',
        jobType: 'IMPORT',
        status: 'FAILED',
        version: 4,
        startDate: '2026-11-23T09:00:00.000Z',
        endDate: '2026-11-23T09:12:00.000Z',
        retries: 1,
        error: {
          status: 'INTERNAL_SERVER_ERROR',
          timestamp: '2026-11-23T09:12:00.000Z',
          message: 'Job 7a0e2c4b-6d8f-4a1b-8c3d-5e7f9a1b3c5d failed: disk full',
          traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
          errors: ['failure: disk full', 'jobSteps[load]: FAILED: row 7 unreadable'],
          code: 'JOB.FAILED',
        },
      },
    ],
  });
type JobState = z.infer<typeof JobStateSchema>;

const idParams = z.strictObject({ id: idOnly() });

/** A path's id: a UUID, else the contract's 400. */
const uuidParam = (id: string): string => uuidOf(id).toLowerCase();

/** Who runs a retried job: the service's runners resume their own types where they stopped; the
 * job of a client goes back to NEW for it. */
function retryOf(deps: AppDeps, jobType: unknown): (id: string, ctx: CommandContext) => Promise<WriteResult> {
  if (JOB_TYPES.includes(String(jobType))) return (id, ctx) => deps.readModelJobs.retry(id, ctx);
  if (jobType === DIFF_APPLY_JOB) return (id, ctx) => retryApply(deps, id, ctx);
  const retry = deps.modules.flatMap((m) => m.jobRetries?.[String(jobType)] ?? [])[0];
  if (retry !== undefined) return (id, ctx) => retry(deps, id, ctx);
  return (id, ctx) => deps.runtime.service(job).execute(id, { type: 'Retry' }, ctx);
}

/** 202 with the job acknowledgement; the job's state is where its outcome shows. */
function acknowledge(reply: FastifyReply, jobId: string, result: WriteResult): FastifyReply {
  return location(eventPosition(reply, result.position).code(202), `/api/v1/jobs/${jobId}/state`).send({ acknowledge: true, jobId });
}

/** The failed steps of a job, as its read model has them (none while it is rebuilt). */
async function failedSteps(deps: AppDeps, id: string): Promise<JsonObject[]> {
  let collection: string;
  try {
    collection = deps.readModels.collectionOf(job.collection);
  } catch (error) {
    if (isDomainError(error) && error.status === 'SERVICE_UNAVAILABLE') return [];
    throw error;
  }
  const steps = ((await deps.readStore.getMany(collection, [id])).get(id)?.doc?.jobSteps as JsonObject[] | undefined) ?? [];
  return steps.filter((s) => s.status === 'FAILED');
}

/** Why a FAILED job failed, as the error body of API.md. */
async function failureOf(deps: AppDeps, live: LiveRecord, traceId: string): Promise<z.infer<typeof ErrorBodySchema>> {
  const data = (live.fields.data as JsonObject | undefined) ?? {};
  const ended = new Date(typeof live.fields.endDate === 'string' ? live.fields.endDate : deps.clock.now());
  const cancelled = data.cancelled as { at?: string; by?: string } | undefined;
  if (data.failure === CANCELLED && cancelled !== undefined) {
    const by = cancelled.by ?? 'unknown';
    return errorBody(
      new DomainError('JOB.CANCELLED', `Job ${live.id} was cancelled by ${by}`, [
        `status: FAILED (cancelled at ${String(cancelled.at)} by ${by})`,
      ]),
      traceId,
      ended,
    );
  }
  const reason = typeof data.failure === 'string' ? data.failure : undefined;
  const steps = (await failedSteps(deps, live.id)).slice(0, FAILED_STEPS_SHOWN);
  const lines = [
    ...(reason === undefined ? [] : [`failure: ${reason}`]),
    ...steps.map(
      (s) => `jobSteps[${String(s.name)}]: FAILED${typeof s.log === 'string' && s.log !== '' ? `: ${s.log.slice(0, 200)}` : ''}`,
    ),
  ];
  return errorBody(
    new DomainError('JOB.FAILED', reason === undefined ? `Job ${live.id} failed` : `Job ${live.id} failed: ${reason}`, lines),
    traceId,
    ended,
  );
}

async function stateOf(deps: AppDeps, live: LiveRecord, traceId: string): Promise<JobState> {
  const f = live.fields;
  const data = (f.data as JsonObject | undefined) ?? {};
  const asked = cancelRequestOf(f);
  const state: JobState = {
    jobId: live.id,
    jobType: String(f.jobType),
    status: f.status as JobState['status'],
    version: live.version,
    startDate: String(f.startDate),
    retries: Array.isArray(data.retries) ? data.retries.length : 0,
  };
  if (typeof f.endDate === 'string') state.endDate = f.endDate;
  if (typeof data.progress === 'object' && data.progress !== null) state.progress = data.progress as JsonObject;
  if (f.status === 'COMPLETED' && typeof data.result === 'object' && data.result !== null) state.result = data.result as JsonObject;
  if (asked !== undefined) state.cancelRequested = asked;
  if (f.status === 'FAILED') state.error = await failureOf(deps, live, traceId);
  return state;
}

/** A job's state is its starter's or an admin's to read. */
function assertMayRead(request: FastifyRequest, live: LiveRecord): void {
  const caller = request.caller;
  if (caller !== undefined && (allows(caller, 'admin') || caller.sub === startedBy(live))) return;
  throw forbidden('Only an admin, or the caller that started it, may read the state of a job');
}

const ACTIONS =
  'Answers 202 with the job acknowledgement and `Location: /api/v1/jobs/{id}/state`, where the outcome shows. Needs the write role; ' +
  "only an admin may act on a job another caller started (403). A move the job's status does not allow is 409 JOB.INVALID_TRANSITION.";

/** The live job a path names: 400 for a malformed id, 404 for none. */
async function liveJob(deps: AppDeps, id: string): Promise<LiveRecord> {
  const found = await deps.runtime.service(job).live(uuidParam(id));
  if (found === undefined) throw notFound(job.errorPrefix, id);
  return found;
}

/** An action on a job (or a step), answered with the job acknowledgement: `act` runs it on the
 * record the path names and says which job it concerns. */
type Action = {
  path: string;
  tag: string;
  summary: string;
  description: string;
  act: (id: string, ctx: CommandContext) => Promise<{ jobId: string; result: WriteResult }>;
};

function actionRoute(app: FastifyInstance, deps: AppDeps, { path, tag, summary, description, act }: Action): void {
  zodRoutes(app).post(
    path,
    {
      config: { permission: 'write' },
      schema: { tags: [tag], summary, description, params: idParams, response: { 202: JobAckSchema, ...errors(400, 403, 404, 409) } },
    },
    async (request, reply) => {
      const { jobId, result } = await act(request.params.id, commandContext(request, deps.clock, deps.newId));
      return acknowledge(reply, jobId, result);
    },
  );
}

/** Retry and cancel of a job, retry of a step; the state of a job. */
export function jobActionRoutes(app: FastifyInstance, deps: AppDeps): void {
  const jobs = deps.runtime.service(job);
  const steps = deps.runtime.service(jobStep);
  actionRoute(app, deps, {
    path: '/api/v1/jobs/:id/retry',
    tag: job.path,
    summary: 'Retry a FAILED job',
    description:
      'A job the service runs goes IN_PROGRESS again and its runner resumes it where it stopped: a READ_MODEL_RECREATE with the generation it had ' +
      'loaded (caught up with the log, then swapped in), a READ_MODEL_REFRESH after the last page it recorded, a DIFF_APPLY after the entries it had ' +
      'done, as the caller that asked for the apply (only the process that accepted the apply holds its entries: elsewhere, or after a restart, ' +
      '409 JOB.NOT_RESUMABLE: apply the diff again), a DIRECTORY_SYNC as a whole new sync with steps of its own (409 DIRECTORY.SYNC_RUNNING while another runs). A job of any other type goes back to NEW for the client that runs it. ' +
      `Its failure moves to \`data.retries\`. ${ACTIONS}`,
    act: async (id, ctx) => {
      const found = await liveJob(deps, id);
      return { jobId: found.id, result: await retryOf(deps, found.fields.jobType)(found.id, ctx) };
    },
  });
  actionRoute(app, deps, {
    path: '/api/v1/jobs/:id/cancel',
    tag: job.path,
    summary: 'Cancel a NEW or IN_PROGRESS job',
    description:
      'A job the service runs (READ_MODEL_*, DIFF_APPLY, DIRECTORY_SYNC) that is IN_PROGRESS is asked to stop (`cancelRequested` in its state): its runner stops ' +
      'at its next step boundary (a batch of the fold, the load, a round of the catch-up, the swap; a page of a refresh; a window of 8 entries ' +
      'of an apply; a phase of a sync or 100 of its writes) and ends it FAILED with `data.failure` `cancelled`; a rebuild stopped so is never swapped in, and what it loaded is kept ' +
      "for a retry. A runner that reached its end first completes it. Any other job ends FAILED `cancelled` at once (its client's next status " +
      `move is then 409). A second cancel while one is asked changes nothing. ${ACTIONS}`,
    act: async (id, ctx) => {
      const found = await liveJob(deps, id);
      return { jobId: found.id, result: await jobs.execute(found.id, { type: 'Cancel' }, ctx) };
    },
  });
  actionRoute(app, deps, {
    path: '/api/v1/job-steps/:id/retry',
    tag: jobStep.path,
    summary: 'Retry a FAILED job step',
    description:
      'The step goes back to NEW for the client that runs it, without the startDate and endDate of its last attempt (its log and data stay); ' +
      "its job is not changed. The acknowledgement names the step's job. Only an admin may retry a step another caller created (403); " +
      'a step that is not FAILED is 409 JOB_STEP.INVALID_TRANSITION.',
    act: async (id, ctx) => {
      const result = await steps.execute(uuidParam(id), { type: 'Retry' }, ctx);
      return { jobId: String(result.record?.jobId), result };
    },
  });
  jobStateRoute(app, deps);
}

function jobStateRoute(app: FastifyInstance, deps: AppDeps): void {
  zodRoutes(app).get(
    '/api/v1/jobs/:id/state',
    {
      config: { permission: 'read' },
      schema: {
        tags: [job.path],
        summary: 'The state of a job; when FAILED, the error body saying why',
        description:
          "Folded from the job's stream, so it reflects every acknowledged write. Readable by an admin and by the caller that started the job " +
          '(an editor following its own large diff apply); anyone else 403.',
        params: idParams,
        response: { 200: JobStateSchema, 304: notModifiedSchema, ...errors(400, 403, 404) },
      },
    },
    async (request, reply) => {
      const found = await liveJob(deps, request.params.id);
      assertMayRead(request, found);
      versionTag(reply, found.version);
      return notModified(reply) ? reply.code(304).send() : reply.send(await stateOf(deps, found, request.traceId));
    },
  );
}
