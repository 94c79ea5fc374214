// The resources whose events `admin replay` folds: the same declarations the service folds with.
// test/cli/replay.unit.spec.ts checks this list against the service's modules.

import { job, jobStep } from '../domain/jobs/jobs.ts';
import { user } from '../domain/identity/user.ts';
import { userGroup } from '../domain/identity/userGroup.ts';
import { userGroupRegion } from '../domain/identity/userGroupRegion.ts';
import { notification } from '../domain/notifications/notification.ts';
import { notificationTrigger } from '../domain/notifications/trigger.ts';
import { log, logDeletion } from '../domain/logs/log.ts';
import { registries } from '../domain/registries/index.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { sharing } from '../domain/sharing/sharing.ts';

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
