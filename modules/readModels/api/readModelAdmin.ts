// Read-model administration (API.md "Indexes (read models), jobs and job steps"), admin only:
// list the read models, wait until all have caught up, recreate one as a blue/green rebuild job,
// drop one (rebuilt at once; its searches answer 503 until then).

import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { notFound } from '../../../domain/shared/errors.ts';
import { FilteringSchema } from '../../../domain/shared/filtering.ts';
import type { AppDeps } from '../../../api/module.ts';
import { commandContext } from '../../../api/requestContext.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { JobAckSchema } from '../../../api/schemas.ts';

const REFRESH_WAIT_MS = 30_000;

const ReadModelSchema = z
  .object({
    name: z.string(),
    documents: z.int().meta({ description: 'live documents of the serving generation (0 while none serves)' }),
    position: z.string().meta({ description: 'log position the serving generation has folded' }),
    lag: z.int().meta({ description: "how far the log is ahead: events on the embedded log, bytes of KurrentDB's log" }),
    lagMs: z.number().meta({ description: 'how long the oldest event not folded yet has waited' }),
    state: z
      .enum(['live', 'rebuilding', 'failed'])
      .meta({ description: 'failed: no generation serves it and none is being built (its rebuild failed); recreate it' }),
    generation: z.int().nullable().meta({ description: 'the generation serving searches; null after a delete until its rebuild swaps in' }),
    building: z.int().nullable().meta({ description: 'the generation a rebuild is folding, if any' }),
    jobId: z.string().nullable().meta({ description: 'the job rebuilding it, if any' }),
    active: z.boolean().meta({ description: 'this instance folds it (holds its lease); false = another instance does' }),
    skipped: z
      .array(z.object({ position: z.string(), stream: z.string(), type: z.string(), error: z.string(), at: z.string() }))
      .meta({ description: 'events this instance skipped as poison since it started (at most 100)' }),
  })
  .meta({ id: 'ReadModel' });

const RefreshResultSchema = z
  .object({
    task: z.string().meta({ description: 'the read model' }),
    indexed: z.int().meta({ description: 'its live documents once caught up' }),
    failed: z.int().meta({ description: 'events skipped as poison (see failures), plus 1 when it did not catch up in time' }),
    failures: z.array(z.object({ id: z.string(), error: z.string() })),
    deleted: z.int().meta({ description: 'always 0: a refresh folds the log, it deletes nothing' }),
    took: z.string().meta({ description: 'time spent waiting for it, e.g. "12 ms"' }),
  })
  .meta({ id: 'IndexRefreshResult' });

const nameParams = z.strictObject({
  indexName: z
    .string()
    .min(1)
    .max(255)
    .meta({
      description: "the read model's name as GET /indexes lists it (`user_groups`), or the path of the resource it serves (`user-groups`)",
    }),
});

async function documentsOf(deps: AppDeps, name: string): Promise<number> {
  try {
    return await deps.readStore.size(deps.readModels.collectionOf(name));
  } catch {
    return 0;
  }
}

/** Recreate, refresh of chosen documents and delete: each starts a job. */
function rebuildRoutes(app: FastifyInstance, deps: AppDeps, known: (name: string) => string): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['indexes'];
  r.post(
    '/api/v1/indexes/:indexName/recreate',
    {
      config: { permission: 'admin' },
      schema: {
        tags,
        summary: 'Rebuild a read model from the log into a new generation, as a job',
        description:
          'Answers 202 at once. The live generation keeps serving searches while the new one folds the log; once it has caught up it is ' +
          'swapped in atomically and the old one dropped. Progress is on the job (`data.progress`), the outcome in `data.result` ' +
          '(poison events skipped are listed there). A restart resumes the rebuild; a half-built generation is never swapped in.',
        params: nameParams,
        response: { 202: JobAckSchema, ...errors(403, 404, 409) },
      },
    },
    async (request, reply) => {
      const name = known(request.params.indexName);
      const jobId = await deps.readModelJobs.recreate(name, commandContext(request, deps.clock, deps.newId), { dropLive: false });
      return reply.code(202).send({ acknowledge: true, jobId });
    },
  );

  r.post(
    '/api/v1/indexes/:indexName/refresh',
    {
      config: { permission: 'admin' },
      schema: {
        tags,
        summary: 'Fold the documents a Filtering selects again from their streams, as a job (repairs drift)',
        description:
          'Answers 202 at once with a READ_MODEL_REFRESH job. Each selected document is folded again from the events of its streams and ' +
          'written when it differs from the stored one, unless the read model has meanwhile folded a newer event for it. ' +
          'The result (`data.result`) counts matched, repaired and unchanged documents. A Filtering the read model cannot run is 400 at once.',
        params: nameParams,
        body: FilteringSchema,
        response: { 202: JobAckSchema, ...errors(400, 403, 404) },
      },
    },
    async (request, reply) => {
      const name = known(request.params.indexName);
      const jobId = await deps.readModelJobs.refresh(name, request.body, commandContext(request, deps.clock, deps.newId));
      return reply.code(202).send({ acknowledge: true, jobId });
    },
  );

  r.delete(
    '/api/v1/indexes/:indexName',
    {
      config: { permission: 'admin' },
      schema: {
        tags,
        summary: 'Drop a read model; it is rebuilt from the log at once',
        description:
          'Its searches, counts and lists answer 503 READ_MODEL.REBUILDING until the rebuild (a READ_MODEL_RECREATE job) has caught up.',
        params: nameParams,
        response: { 204: z.undefined(), ...errors(403, 404, 409) },
      },
    },
    async (request, reply) => {
      const name = known(request.params.indexName);
      await deps.readModelJobs.recreate(name, commandContext(request, deps.clock, deps.newId), { dropLive: true });
      return reply.code(204).send();
    },
  );
}

/** The administration of the read models (/api/v1/indexes). */
export function readModelAdminRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const tags = ['indexes'];
  // A resource's default read model is named after its collection; clients know the resource by its path.
  const byPath = new Map(deps.modules.flatMap((m) => m.resources ?? []).map((r) => [r.definition.path, r.definition.collection]));
  const known = (asked: string): string => {
    const name = deps.readModels.projection(asked) === undefined ? byPath.get(asked) : asked;
    if (name === undefined || deps.readModels.projection(name) === undefined) throw notFound('READ_MODEL', asked);
    return name;
  };

  r.get(
    '/api/v1/indexes',
    {
      config: { permission: 'admin' },
      schema: {
        tags,
        summary: 'Every read model: documents, position, lag, state and generation',
        response: { 200: z.array(ReadModelSchema), ...errors(403) },
      },
    },
    async () =>
      Promise.all(
        deps.readModels
          .statuses()
          .map(async (s) => ({
            name: s.name,
            documents: await documentsOf(deps, s.name),
            position: s.position,
            lag: s.lag,
            lagMs: s.lagMs,
            state: s.state,
            generation: s.generation,
            building: s.building,
            jobId: s.jobId,
            active: s.active,
            skipped: s.failures,
          })),
      ),
  );

  r.post(
    '/api/v1/indexes/refresh',
    {
      config: { permission: 'admin' },
      schema: {
        tags,
        summary: 'Wait until every read model has folded the log as it was when the request arrived',
        description: `Waits at most ${String(REFRESH_WAIT_MS / 1000)} s per read model; one result per read model.`,
        response: { 200: z.array(RefreshResultSchema), ...errors(403) },
      },
    },
    async () => {
      const head = await deps.eventStore.headPosition();
      return Promise.all(
        deps.readModels.statuses().map(async (s) => {
          const started = Date.now();
          const caughtUp = s.generation !== null && (await deps.readModels.waitFor(s.name, head, REFRESH_WAIT_MS));
          const failures = s.failures.map((f) => ({ id: `${f.stream}@${f.position}`, error: f.error }));
          if (!caughtUp)
            failures.push({
              id: s.name,
              error:
                s.generation === null ? 'rebuilding: no generation serves it yet' : `did not reach position ${head.toString()} in time`,
            });
          return {
            task: s.name,
            indexed: await documentsOf(deps, s.name),
            failed: failures.length,
            failures,
            deleted: 0,
            took: `${String(Date.now() - started)} ms`,
          };
        }),
      );
    },
  );

  rebuildRoutes(app, deps, known);
}
