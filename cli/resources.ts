// The resources whose events `admin replay` folds: the same declarations the service folds with.
// test/cli/replay.unit.spec.ts checks this list against the service's modules.

import { job, jobStep } from '../modules/jobs/domain/jobs.ts';
import { user } from '../modules/identity/domain/user.ts';
import { userGroup } from '../modules/identity/domain/userGroup.ts';
import { userGroupRegion } from '../modules/identity/domain/userGroupRegion.ts';
import { notification } from '../modules/notifications/domain/notification.ts';
import { notificationTrigger } from '../modules/notifications/domain/trigger.ts';
import { log, logDeletion } from '../modules/logs/domain/log.ts';
import { registries } from '../modules/registries/domain/index.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { sharing } from '../modules/sharing/domain/sharing.ts';

export const resources: readonly ResourceDefinition[] = [
  ...registries,
  userGroup,
  user,
  userGroupRegion,
  sharing,
  notification,
  notificationTrigger,
  job,
  jobStep,
  log,
  logDeletion,
];
