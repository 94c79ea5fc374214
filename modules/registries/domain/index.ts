// The registry resources served by the shared operation set. Adding one is a file beside this one
// and a line here.

import type { ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import { accessRule } from '../../../domain/access/accessRule.ts';
import { formatterTemplate } from './formatterTemplate.ts';
import { logType } from './logType.ts';
import { notificationRule } from './notificationRule.ts';
import { notificationTemplate } from './notificationTemplate.ts';
import { userGroupType } from './userGroupType.ts';
import { userType } from './userType.ts';
import { worklogType } from './worklogType.ts';

export const registries: readonly ResourceDefinition[] = [
  userGroupType,
  userType,
  accessRule,
  worklogType,
  notificationRule,
  notificationTemplate,
  formatterTemplate,
  logType,
];
