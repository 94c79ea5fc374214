// Read models: the administration of the projections (/api/v1/indexes): their state and lag,
// refresh, recreate (a rebuild job beside the serving generation) and delete.
export { readModelAdminModule } from './api/readModelAdmin.ts';
