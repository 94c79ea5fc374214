// Effective roles (issue: "a user who has this group automatically receives this role at login"):
// the user's own roles, then the role of every group it belongs to that is valid now, each once,
// in that order. A group names its role by an access rule's id (associatedUserRoleId); the role it
// gives is that rule's code, the name authorization looks rules up by. Resolved each time roles are
// asked for (a login session's on every request), so a rule renamed since gives its new code and
// one deleted gives nothing.

import { withinPeriod } from '../../../domain/shared/fields.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';

export const isValidGroup = (group: JsonObject, now: Date): boolean => withinPeriod(group.validFrom, group.validTo, now);

/** The access rule ids the user's valid groups name as their role, each once. */
export function groupRoleIds(groups: readonly JsonObject[], now: Date): string[] {
  const ids = groups.flatMap((g) => (typeof g.associatedUserRoleId === 'string' && isValidGroup(g, now) ? [g.associatedUserRoleId] : []));
  return [...new Set(ids)];
}

/** `ruleCodes`: the code of each access rule a group names, by id (a rule not in it gives nothing). */
export function effectiveRoles(
  user: JsonObject,
  groups: readonly JsonObject[],
  now: Date,
  ruleCodes: ReadonlyMap<string, string>,
): string[] {
  const roles = new Set<string>(Array.isArray(user.roles) ? user.roles.filter((r): r is string => typeof r === 'string') : []);
  for (const id of groupRoleIds(groups, now)) {
    const code = ruleCodes.get(id);
    if (code !== undefined) roles.add(code);
  }
  return [...roles];
}
