// POST /api/v1/directory/sync: an admin starts the directory sync, answered at once with the job
// acknowledgement (202); the job's state shows its steps, progress and outcome.

import type { FastifyInstance } from 'fastify';
import { directoryNotConfigured } from '../../../domain/shared/errors.ts';
import type { AppDeps, ModuleContext, ModuleSettings } from '../../../api/module.ts';
import { zodRoutes } from '../../../api/module.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { JobAckSchema } from '../../../api/schemas.ts';
import { DirectorySync, type SyncEnv } from '../workers/directorySync.ts';
import type { DirectoryAuthentication } from '../domain/sync.ts';

/** What the sync takes of an app's or a worker's dependencies. */
export function syncEnvOf(
  deps: Pick<AppDeps, 'eventStore' | 'readStore' | 'readModels' | 'runtime' | 'clock' | 'newId' | 'directory'> & {
    resources: SyncEnv['resources'];
    settings?: ModuleSettings | undefined;
  },
  logger: SyncEnv['logger'],
): SyncEnv | undefined {
  if (deps.directory === undefined) return undefined;
  const settings = deps.settings?.directory;
  return {
    eventStore: deps.eventStore,
    readStore: deps.readStore,
    readModels: deps.readModels,
    runtime: deps.runtime,
    clock: deps.clock,
    newId: deps.newId,
    resources: deps.resources,
    directory: deps.directory,
    userType: settings?.userType ?? 'INDIVIDUAL',
    authentication: (settings?.authentication === 'AD' ? 'AD' : 'LDAP') satisfies DirectoryAuthentication,
    logger,
  };
}

/** The sync of a worker process's context (one per context: its schedule and its worker share it). */
const ofContext = new WeakMap<ModuleContext, DirectorySync | undefined>();
export function contextSync(ctx: ModuleContext): DirectorySync | undefined {
  if (!ofContext.has(ctx)) {
    const env = syncEnvOf(ctx, ctx.logger);
    ofContext.set(ctx, env === undefined ? undefined : new DirectorySync(env));
  }
  return ofContext.get(ctx);
}

export function directorySyncRoutes(app: FastifyInstance, deps: AppDeps): void {
  const env = syncEnvOf({ ...deps, resources: deps.modules.flatMap((m) => m.resources ?? []).map((r) => r.definition) }, app.log);
  const sync = env === undefined ? undefined : new DirectorySync(env);
  if (sync !== undefined) app.addHook('onClose', () => sync.stop());
  zodRoutes(app).post(
    '/api/v1/directory/sync',
    {
      config: { permission: 'admin' },
      schema: {
        tags: ['directory'],
        summary: 'Synchronise the users with the directory, as a job',
        description:
          'Answers 202 at once with the job acknowledgement and `Location: /api/v1/jobs/{id}/state`. The job (jobType DIRECTORY_SYNC) has a step per ' +
          'phase (read the directory, create users, update users, disable users) and its counts in `data.progress`, then `data.result`. It creates a user ' +
          'for each person of the directory the service does not have (LDAP_SYNC_USER_TYPE, LDAP_SYNC_AUTHENTICATION), updates the mapped fields ' +
          '(LDAP_ATTRIBUTES) and the membership of directory-backed groups (`ldapMemberOf`) of the LDAP and AD users, and disables those that left ' +
          'the directory, every write as the actor `directory-sync`; a person whose code a user of another authentication holds is left alone. An ' +
          'unchanged directory writes nothing. One sync runs at a time: 409 DIRECTORY.SYNC_RUNNING while one does; 503 DIRECTORY.NOT_CONFIGURED ' +
          'without LDAP_URL. Admin only. Docs: docs/directory.md.',
        response: { 202: JobAckSchema, ...errors(401, 403, 409, 503) },
      },
    },
    async (request, reply) => {
      if (sync === undefined) throw directoryNotConfigured();
      const jobId = await sync.start(request.caller?.sub ?? 'unknown');
      return reply.code(202).header('location', `/api/v1/jobs/${jobId}/state`).send({ acknowledge: true, jobId });
    },
  );
}
