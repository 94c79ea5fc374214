// Directory: users of authentication LDAP and AD, from an LDAP directory (OpenLDAP, Active
// Directory). The login asks the directory port through the identity module (its domain here says
// who is a directory user); this module syncs users and their directory-backed groups from the
// directory as a job, on request (POST /api/v1/directory/sync) and every LDAP_SYNC_INTERVAL_MS.

import type { Module } from '../../api/module.ts';
import { directorySyncRoutes, retrySync, syncOf } from './api/directorySync.ts';
import { DIRECTORY_SYNC_JOB } from './workers/directorySync.ts';
import { syncSchedule } from './workers/directorySync.ts';

export const directoryModule: Module = {
  name: 'directory',
  routes: directorySyncRoutes,
  jobRetries: { [DIRECTORY_SYNC_JOB]: retrySync },
  schedules: (ctx) => {
    const sync = syncOf(ctx, ctx.logger);
    const every = ctx.settings.directory?.syncIntervalMs ?? 0;
    return sync === undefined || every <= 0 ? [] : [syncSchedule(sync, every, ctx.clock.now())];
  },
  workers: (ctx) => {
    const sync = syncOf(ctx, ctx.logger);
    return sync === undefined ? [] : [{ start: () => Promise.resolve(), stop: () => sync.stop() }];
  },
};
