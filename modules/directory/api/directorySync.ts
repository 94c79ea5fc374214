// POST /api/v1/directory/sync: an admin starts the directory sync, answered at once with the job
// acknowledgement (202); the job's state shows its steps, progress and outcome.

import type { FastifyInstance } from 'fastify';
import { directoryNotConfigured } from '../../../domain/shared/errors.ts';
import type { AppDeps, ModuleSettings } from '../../../api/module.ts';
import { zodRoutes } from '../../../api/module.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { JobAckSchema } from '../../../api/schemas.ts';
import { DirectorySync, type SyncEnv } from '../workers/directorySync.ts';
import { Slot } from '../../../application/runtime.ts';
import type { WriteResult } from '../../../domain/resource/service.ts';
import type { CommandContext } from '../../../domain/shared/commandHandler.ts';
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

/** The one sync of a service (its routes, schedule, worker and job retries share it): made by the
 * first of them to ask, from what it was given. */
const syncs = new Slot<{ made: boolean; sync?: DirectorySync | undefined }>(() => ({ made: false }));
export function syncOf(deps: Parameters<typeof syncEnvOf>[0], logger: SyncEnv['logger']): DirectorySync | undefined {
  const held = deps.runtime.own(syncs);
  if (!held.made) {
    const env = syncEnvOf(deps, logger);
    held.sync = env === undefined ? undefined : new DirectorySync(env);
    held.made = true;
  }
  return held.sync;
}

const appEnv = (deps: AppDeps) => ({ ...deps, resources: deps.modules.flatMap((m) => m.resources ?? []).map((r) => r.definition) });

/** POST /api/v1/jobs/{id}/retry of a FAILED DIRECTORY_SYNC job: the sync runs again (the one the
 * routes below made, as every route is made before a request comes). */
export function retrySync(deps: AppDeps, id: string, ctx: CommandContext): Promise<WriteResult> {
  const { sync } = deps.runtime.own(syncs);
  if (sync === undefined) throw directoryNotConfigured();
  return sync.retry(id, ctx);
}

export function directorySyncRoutes(app: FastifyInstance, deps: AppDeps): void {
  const sync = syncOf(appEnv(deps), app.log);
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
