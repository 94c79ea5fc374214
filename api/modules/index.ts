// The modules of the service. Adding a bounded part of the service is a file beside this one and
// a line here: compose.ts builds the routes, read models, reactors, schedules and workers from it.

import type { Module } from '../module.ts';
import { jobsModule } from './jobs.ts';
import { readModelAdminModule } from './readModelAdmin.ts';
import { registriesModule } from './registries.ts';
import { sharingModule } from './sharing.ts';

export const modules: readonly Module[] = [registriesModule, sharingModule, jobsModule, readModelAdminModule];
