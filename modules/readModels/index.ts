// Read models: the administration of the projections (/api/v1/indexes): their state and lag,
// refresh, recreate (a rebuild job beside the serving generation) and delete.

import type { Module } from '../../api/module.ts';
import { readModelAdminRoutes } from './api/readModelAdmin.ts';

export const readModelAdminModule: Module = { name: 'read-model-admin', routes: readModelAdminRoutes };
