// Jobs and job steps on the shared operation set, admin only, with what jobs do differently
// declared for it: a job's create makes the steps it is given too, and its get adds its steps from
// the jobs read model (expand=JOB_STEPS). Beside it, a step by chunk; the actions (retry, cancel,
// state) are in actions.ts.

import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { job, jobCreateInput, jobStep } from '../domain/jobs.ts';
import { decide, initialState, keyScope, keyValue, streamOf, type ResourceRecord } from '../../../domain/resource/decider.ts';
import type { ResourceService } from '../../../application/resourceService.ts';
import { keyedRecordId, type WriteResult } from '../../../domain/resource/service.ts';
import type { CommandContext } from '../../../domain/shared/commandHandler.ts';
import { DomainError, alreadyExists, keyTaken, validationFailed } from '../../../domain/shared/errors.ts';
import { uuid } from '../../../domain/shared/fields.ts';
import { isUuidV4 } from '../../../domain/shared/ids.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { zodRoutes, type AppDeps, type ResourceRouteOptions } from '../../../api/module.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { catchUpTo, position } from '../../../api/readModelWait.ts';
import { sendRecord } from '../../../api/replies.ts';
import { expandQuery, notModifiedSchema, parseExpand } from '../../../api/schemas.ts';

type InlineStep = JsonObject & { id?: string; jobId?: string };

/** The context of the i-th step given with a job: under a key derived from the request's
 * Idempotency-Key (client keys hold no space, so no client key is ever one of these), so a retry
 * finds each step the first request made. */
const stepContext = (ctx: CommandContext, i: number): CommandContext =>
  ctx.idempotencyKey === undefined ? ctx : { ...ctx, idempotencyKey: `${ctx.idempotencyKey} jobSteps[${String(i)}]` };

/** An error of the i-th step, naming it. */
function atStep(error: unknown, i: number): unknown {
  if (!(error instanceof DomainError)) return error;
  const at = `jobSteps[${String(i)}]`;
  return new DomainError(
    error.code,
    `${at}: ${error.message}`,
    error.errors.map((l) => (l.startsWith('(body)') ? `${at}${l.slice(6)}` : `${at}.${l}`)),
  );
}

/** What the checks of a request's steps have seen so far: the ids and pairs of earlier steps. */
type Seen = { ids: Map<string, number>; pairs: Map<string, number> };

/** The stream of the step an earlier try of this request (same Idempotency-Key) made as its i-th. */
const ownStream = (step: InlineStep, i: number, ctx: CommandContext): string | undefined =>
  ctx.idempotencyKey === undefined
    ? undefined
    : streamOf(jobStep, step.id?.toLowerCase() ?? keyedRecordId(jobStep, ctx.actor, stepContext(ctx, i).idempotencyKey ?? ''));

/** A client-chosen step id: a UUIDv4, not another step's of the request, not an existing record's. */
async function checkStepId(steps: ResourceService, step: InlineStep, i: number, seen: Seen, own: string | undefined): Promise<void> {
  if (step.id === undefined) return;
  const at = `jobSteps[${String(i)}]`;
  const id = step.id.toLowerCase();
  if (!isUuidV4(id))
    throw validationFailed('A client-chosen id must be a random UUID (version 4)', [
      `${at}.id: ${JSON.stringify(step.id)} is not a UUIDv4`,
    ]);
  const twin = seen.ids.get(id);
  if (twin !== undefined) throw validationFailed('Two steps have one id', [`${at}.id: also the id of jobSteps[${String(twin)}]`]);
  seen.ids.set(id, i);
  if (own !== streamOf(jobStep, id) && (await steps.live(id)) !== undefined) throw atStep(alreadyExists(jobStep.errorPrefix, id), i);
}

/** A step's (chunkId, name): not another step's of the request, not held in the log. */
async function checkStepPair(deps: AppDeps, step: InlineStep, i: number, seen: Seen, own: string | undefined): Promise<void> {
  const [pair] = jobStep.unique;
  const value = pair === undefined ? undefined : keyValue(pair, step);
  if (pair === undefined || value === undefined) return;
  const taken = keyTaken(jobStep.errorPrefix, pair.name, Object.fromEntries(pair.fields.map((f) => [f, step[f]])));
  const twin = seen.pairs.get(value);
  if (twin !== undefined) {
    throw atStep(
      new DomainError(
        taken.code,
        `Two steps have one (${pair.fields.join(', ')})`,
        pair.fields.map((f) => `${f}: also that of jobSteps[${String(twin)}]`),
      ),
      i,
    );
  }
  seen.pairs.set(value, i);
  const holder = await deps.eventStore.findCode({ scope: keyScope(jobStep, pair), code: value });
  if (holder !== undefined && holder !== own) throw atStep(taken, i);
}

/** Every step checked as its own create would check it, before anything is written: its jobId, its
 * id, its fields, and its (chunkId, name) pair, unique within the request and in the log. An id or
 * a pair held by the very step an earlier try of this request made is its own. */
async function checkSteps(
  deps: AppDeps,
  steps: ResourceService,
  body: JsonObject,
  given: readonly InlineStep[],
  ctx: CommandContext,
): Promise<void> {
  const jobId = typeof body.id === 'string' ? body.id.toLowerCase() : undefined;
  const seen: Seen = { ids: new Map(), pairs: new Map() };
  for (const [i, step] of given.entries()) {
    if (step.jobId !== undefined && step.jobId.toLowerCase() !== jobId) {
      throw validationFailed('A step given with its job belongs to that job', [
        `jobSteps[${String(i)}].jobId: must be the job's id (the body's id) or absent`,
      ]);
    }
    const own = ownStream(step, i, ctx);
    await checkStepId(steps, step, i, seen, own);
    // Decided as its own create would be: 400 for a step that starts ended, 413 for one too large.
    try {
      decide(
        jobStep,
        initialState(),
        { type: 'Create', id: step.id ?? ctx.newId(), input: { ...step, jobId: jobId ?? ctx.newId() } },
        { now: ctx.now, actor: ctx.actor, refs: new Map() },
      );
    } catch (error) {
      throw atStep(error, i);
    }
    await checkStepPair(deps, step, i, seen, own);
  }
}

/** The steps made so far and the job removed again: a step that could not be written after all
 * (a pair taken meanwhile, a store failing) leaves no half-made job. Best effort: a store that
 * fails here too leaves what it could not remove (see docs/api.md, Jobs). */
async function undo(
  jobs: ResourceService,
  steps: ResourceService,
  jobId: string,
  made: readonly string[],
  ctx: CommandContext,
): Promise<void> {
  const { idempotencyKey: _key, requestHash: _hash, ...plain } = ctx;
  for (const id of [...made].reverse()) await steps.remove(id, plain).catch(() => undefined);
  await jobs.remove(jobId, plain).catch(() => undefined);
}

/** POST /api/v1/jobs: the job, then each step given with it as its own record (one event on its
 * own stream, as POST /api/v1/job-steps makes it). Both logs append one stream at a time, so
 * everything is checked first and a failure after the job was written undoes it. */
async function createJobWithSteps(deps: AppDeps, input: unknown, ctx: CommandContext): Promise<WriteResult> {
  const jobs = deps.runtime.service(job);
  const steps = deps.runtime.service(jobStep);
  const body = input as JsonObject;
  const given = (body.jobSteps as InlineStep[] | undefined) ?? [];
  if (given.length > 0) await checkSteps(deps, steps, body, given, ctx);
  // The whole body, steps included, is what an Idempotency-Key's retry must repeat.
  const made = await jobs.create(body, ctx);
  const record = made.record;
  if (record === undefined) throw new Error('create of Job left no record');
  if (made.written === false && given.length > 0 && (await jobs.live(record.id)) === undefined) {
    throw new DomainError(
      'JOB.UNDONE',
      'The request under this Idempotency-Key failed and its job was undone: send it again under a new key',
    );
  }
  const created: ResourceRecord[] = [];
  let position = made.position;
  for (const [i, step] of given.entries()) {
    try {
      const result = await steps.create({ ...step, jobId: record.id }, stepContext(ctx, i));
      if (result.record === undefined) throw new Error('create of JobStep left no record');
      created.push(result.record);
      position = result.position ?? position;
    } catch (error) {
      if (made.written !== false)
        await undo(
          jobs,
          steps,
          record.id,
          created.map((c) => c.id),
          ctx,
        );
      throw atStep(error, i);
    }
  }
  return { ...made, record: { ...record, jobSteps: created }, position };
}

const admin = { permissions: { read: 'admin', write: 'admin' } } as const;

/** How jobs are served by the shared operation set: admin only, a create that makes the steps it
 * is given, and a get that adds the steps from the jobs read model when asked. */
export const jobOperations: ResourceRouteOptions = {
  ...admin,
  create: { body: jobCreateInput, run: createJobWithSteps },
  get: {
    query: { expand: expandQuery(['JOB_STEPS']), minPosition: position.optional() },
    response: job.record,
    expand: (query) => {
      const expand = parseExpand(query.expand as string | string[] | undefined, ['JOB_STEPS'] as const);
      if (!expand.includes('JOB_STEPS')) return undefined;
      return async (deps, _request, found) => {
        await catchUpTo(deps, job.collection, query.minPosition as string | undefined);
        const doc = (await deps.readStore.getMany(deps.readModels.collectionOf(job.collection), [found.id])).get(found.id)?.doc;
        return { ...found, jobSteps: doc?.jobSteps ?? [] };
      };
    },
  },
  docs: {
    get: {
      summary: 'Get a Job, with its steps when expand=JOB_STEPS',
      description:
        'The job itself reflects every acknowledged write (its stream is folded); `asOf` answers it as it was at that time. Its steps come from the jobs read model: ' +
        "pass the `X-Event-Position` of a step's write as `minPosition` to see that step (waits at most 5 s, then 503). " +
        '`expand` may be repeated or comma-separated; without JOB_STEPS `jobSteps` is empty.',
      errors: [403, 503],
    },
  },
};

export const jobStepOperations: ResourceRouteOptions = admin;

/** GET /api/v1/job-steps/by-chunk. */
export function jobStepByChunkRoute(app: FastifyInstance, deps: AppDeps): void {
  const steps = deps.runtime.service(jobStep);
  zodRoutes(app).get(
    '/api/v1/job-steps/by-chunk',
    {
      config: { permission: 'admin' },
      schema: {
        tags: [jobStep.path],
        summary: 'The JobStep of a chunk with a name ((chunkId, name) is unique)',
        description: "Read from the log's reservation of the pair, so it reflects every acknowledged write.",
        querystring: z.strictObject({ chunkId: uuid(), name: z.string().min(1).max(255) }),
        response: { 200: jobStep.record, 304: notModifiedSchema, ...errors(400, 403, 404) },
      },
    },
    async (request, reply) => {
      const key = jobStep.unique[0];
      if (key === undefined) throw new Error('JobStep has no (chunkId, name) key');
      return sendRecord(reply, await steps.getByKey(key, { chunkId: request.query.chunkId, name: request.query.name }));
    },
  );
}
