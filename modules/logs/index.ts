// Logs: operation logs, the fastest-growing resource: the shared operation set with what logs do
// differently (api/logs.ts), their read model, "delete old logs" (api/deleteOldLogs.ts) and the
// retention pass that purges deleted logs' events (workers/retention.ts).

import type { Module } from '../../api/module.ts';
import { deleteOldLogsRoute } from './api/deleteOldLogs.ts';
import { logOperations, logsByOwnerRoute } from './api/logs.ts';
import { log, logDeletion } from './domain/log.ts';
import { logsProjection } from './projections/logs.ts';
import { retentionSchedule } from './workers/retention.ts';

export const logsModule: Module = {
  name: 'logs',
  resources: [
    { definition: log, routes: logOperations, defaultReadModel: false },
    { definition: logDeletion, routes: { permissions: { read: 'admin', write: 'admin' } } },
  ],
  projections: [logsProjection()],
  schedules: (ctx) => [retentionSchedule(ctx)],
  routes(app, deps) {
    logsByOwnerRoute(app, deps);
    deleteOldLogsRoute(app, deps);
  },
};
