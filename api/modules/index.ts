// The modules of the service. Adding a bounded part of the service is a file beside this one and
// a line here: compose.ts builds the routes, read models, reactors, schedules and workers from it.

import type { Module } from '../module.ts';
import { auditModule } from './audit.ts';
import { formatterModule } from './formatter.ts';
import { jobsModule } from './jobs.ts';
import { readModelAdminModule } from './readModelAdmin.ts';
import { registriesModule } from './registries.ts';
import { loginModule } from './login.ts';
import { logsModule } from './logs.ts';
import { notificationsModule } from './notifications.ts';
import { notificationTriggersModule } from './notificationTriggers.ts';
import { sharingModule } from './sharing.ts';
import { userGroupRegionsModule } from './userGroupRegions.ts';
import { userGroupsModule } from './userGroups.ts';
import { usersModule } from './users.ts';

export const modules: readonly Module[] = [
  registriesModule,
  userGroupsModule,
  usersModule,
  userGroupRegionsModule,
  sharingModule,
  loginModule,
  formatterModule,
  notificationsModule,
  notificationTriggersModule,
  jobsModule,
  readModelAdminModule,
  auditModule,
  logsModule,
];
