// Jobs and job steps: both with the shared operation set (admin only), a read model folding each
// job with its steps, and the two routes of their own: a job with its steps, a step by chunk.

import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { job, jobStep } from '../../domain/jobs/jobs.ts';
import { malformedUuid } from '../../domain/shared/errors.ts';
import { uuid } from '../../domain/shared/fields.ts';
import { isUuid } from '../../domain/shared/ids.ts';
import { jobsWithSteps } from '../../projections/jobsWithSteps.ts';
import type { Module } from '../module.ts';
import { orphanedApplies } from '../diffApply.ts';
import { errors } from '../resourceRoutes.ts';
import { catchUpTo, position } from '../readModelWait.ts';
import { expandQuery, parseExpand } from '../schemas.ts';
import { serviceOf } from '../services.ts';

const admin = { permissions: { read: 'admin', write: 'admin' } } as const;

export const jobsModule: Module = {
  name: 'jobs',
  resources: [
    { definition: job, routes: { ...admin, except: ['get'] }, defaultReadModel: false },
    { definition: jobStep, routes: admin },
  ],
  projections: [jobsWithSteps],
  // Diff applies run as jobs in the process that accepted them: one whose process ended is FAILED.
  schedules: (ctx) => [orphanedApplies(ctx)],
  routes(app, deps) {
    const r = app.withTypeProvider<ZodTypeProvider>();
    const jobs = serviceOf(deps, job);
    const steps = serviceOf(deps, jobStep);

    r.get(
      '/api/v1/jobs/:id',
      {
        config: { permission: 'admin' },
        schema: {
          tags: [job.path],
          summary: 'Get a Job, with its steps when expand=JOB_STEPS',
          description:
            'The job itself reflects every acknowledged write (its stream is folded). Its steps come from the jobs read model: ' +
            'pass the `X-Event-Position` of a step\'s write as `minPosition` to see that step (waits at most 5 s, then 503). ' +
            '`expand` may be repeated or comma-separated; without JOB_STEPS `jobSteps` is empty.',
          params: z.strictObject({ id: z.string().max(255) }),
          querystring: z.strictObject({
            expand: expandQuery(['JOB_STEPS']),
            minPosition: position.optional(),
          }),
          response: { 200: job.record, ...errors(400, 403, 404, 503) },
        },
      },
      async (request, reply) => {
        const { id } = request.params;
        if (!isUuid(id)) throw malformedUuid('id', id);
        const expand = parseExpand(request.query.expand, ['JOB_STEPS'] as const);
        const found = await jobs.get(id);
        if (expand.includes('JOB_STEPS')) {
          await catchUpTo(deps, job.collection, request.query.minPosition);
          const collection = deps.readModels.collectionOf(job.collection);
          const doc = (await deps.readStore.getMany(collection, [found.id])).get(found.id)?.doc;
          found.jobSteps = doc?.jobSteps ?? [];
        }
        return reply.header('etag', `"${String(found.auditInfo.version)}"`).send(found);
      },
    );

    r.get(
      '/api/v1/job-steps/by-chunk',
      {
        config: { permission: 'admin' },
        schema: {
          tags: [jobStep.path],
          summary: 'The JobStep of a chunk with a name ((chunkId, name) is unique)',
          description: 'Read from the log\'s reservation of the pair, so it reflects every acknowledged write.',
          querystring: z.strictObject({ chunkId: uuid(), name: z.string().min(1).max(255) }),
          response: { 200: jobStep.record, ...errors(400, 403, 404) },
        },
      },
      async (request, reply) => {
        const key = jobStep.unique[0];
        if (key === undefined) throw new Error('JobStep has no (chunkId, name) key');
        const found = await steps.getByKey(key, { chunkId: request.query.chunkId, name: request.query.name });
        return reply.header('etag', `"${String(found.auditInfo.version)}"`).send(found);
      },
    );
  },
};
