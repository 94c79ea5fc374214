// The modules of the service, one folder each (modules/<name>/index.ts exports its Module).
// Adding a capability is a folder beside these and a line here: compose.ts builds the routes, read
// models, reactors, schedules and workers of every process from this list.

import type { Module } from '../api/module.ts';
import { auditModule } from './audit/index.ts';
import { directoryModule } from './directory/index.ts';
import { documentsModule } from './documents/index.ts';
import { identityModule } from './identity/index.ts';
import { jobsModule } from './jobs/index.ts';
import { logsModule } from './logs/index.ts';
import { notificationsModule } from './notifications/index.ts';
import { readModelAdminModule } from './readModels/index.ts';
import { registriesModule } from './registries/index.ts';
import { sharingModule } from './sharing/index.ts';

export const modules: readonly Module[] = [
  registriesModule,
  identityModule,
  sharingModule,
  documentsModule,
  notificationsModule,
  jobsModule,
  readModelAdminModule,
  auditModule,
  logsModule,
  directoryModule,
];
