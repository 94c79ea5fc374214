// Jobs: background jobs with their steps (one read model of a job with its steps), the seed's job
// actions, and the job machinery that diff apply and read-model rebuilds run as.

import { orphanedApplies } from '../../api/diffApply.ts';
import type { Module } from '../../api/module.ts';
import { jobActionRoutes } from './api/actions.ts';
import { jobOperations, jobStepByChunkRoute, jobStepOperations } from './api/jobs.ts';
import { job, jobStep } from './domain/jobs.ts';
import { jobsWithSteps } from './projections/jobsWithSteps.ts';

export const jobsModule: Module = {
  name: 'jobs',
  resources: [
    { definition: job, routes: jobOperations, defaultReadModel: false },
    { definition: jobStep, routes: jobStepOperations },
  ],
  projections: [jobsWithSteps],
  // Diff applies run as jobs in the process that accepted them: one whose process ended is FAILED.
  schedules: (ctx) => [orphanedApplies(ctx)],
  routes(app, deps) {
    jobActionRoutes(app, deps);
    jobStepByChunkRoute(app, deps);
  },
};
