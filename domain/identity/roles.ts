// Effective roles (issue: "a user who has this group automatically receives this role at login"):
// the user's own roles, then the associatedUserRoleId of every group it belongs to that is valid
// now, each once, in that order.

import { withinPeriod } from '../shared/fields.ts';
import type { JsonObject } from '../shared/json.ts';

export const isValidGroup = (group: JsonObject, now: Date): boolean => withinPeriod(group.validFrom, group.validTo, now);

export function effectiveRoles(user: JsonObject, groups: readonly JsonObject[], now: Date): string[] {
  const roles = new Set<string>(Array.isArray(user.roles) ? user.roles.filter((r): r is string => typeof r === 'string') : []);
  for (const group of groups) {
    if (typeof group.associatedUserRoleId === 'string' && isValidGroup(group, now)) roles.add(group.associatedUserRoleId);
  }
  return [...roles];
}
