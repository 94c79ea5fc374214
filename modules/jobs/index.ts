// Jobs: background jobs with their steps (one read model of a job with its steps), the seed's job
// actions, and the job machinery that diff apply and read-model rebuilds run as.
export { jobsModule } from './api/jobs.ts';
