// Which roles a user holds, and who may touch it. Its effective roles are its own and the codes of
// the access rules its valid groups name. A caller holds a role when its token names it or when its
// built-in roles grant all the role grants: admin holds every role; a built-in role is held by a
// caller granted all its permissions (an editor holds viewer, not auditor or admin); an access
// rule's role, which grants reading or writing some records, by a caller whose built-in roles write
// every record (admin, editor). Changing, disabling, deleting a user, setting its password or
// thumbnail, by any route (replace, patch, delete, import, diff/apply), takes every role it holds
// (403); removing it from a group that carries a role takes an admin (403), as adding it to one
// does; and no one makes the last enabled admin stop being one (409).

import type { FastifyRequest } from 'fastify';
import { isBuiltInRole } from '../../../domain/access/coverage.ts';
import { effectiveRoles, groupRoleIds } from '../domain/roles.ts';
import { canLogIn, isActiveUser, user } from '../domain/user.ts';
import { userGroup } from '../domain/userGroup.ts';
import { accessRule } from '../../../domain/access/accessRule.ts';
import type { ChangeGuard } from '../../../domain/shared/commandHandler.ts';
import { DomainError, forbidden } from '../../../domain/shared/errors.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { allows, permissionsOf, type Caller } from '../../../api/auth.ts';
import type { AppDeps } from '../../../api/module.ts';
import { readModelLookup } from '../../../api/services.ts';

/** The live groups a user names, read from the log (a code no live group has is left out). */
export async function groupsOf(deps: AppDeps, fields: JsonObject): Promise<JsonObject[]> {
  const codes = Array.isArray(fields.groups) ? fields.groups.filter((c): c is string => typeof c === 'string') : [];
  const groups = deps.runtime.service(userGroup);
  const found: JsonObject[] = [];
  for (const c of new Set(codes)) {
    const g = await groups.getByCode(c).catch(() => undefined);
    if (g !== undefined) found.push(g);
  }
  return found;
}

/** The codes of the access rules the groups name as their role, by id, read from the log. A rule
 * stored under a built-in role's name (refused since) gives nothing: a group never hands out a
 * built-in role. */
async function groupRuleCodes(deps: AppDeps, groups: readonly JsonObject[], now: Date): Promise<Map<string, string>> {
  const rules = deps.runtime.service(accessRule);
  const codes = new Map<string, string>();
  for (const id of groupRoleIds(groups, now)) {
    // By id only: an old rule whose code is shaped like this id must not stand in for it.
    const rule = await rules.getById(id).catch(() => undefined);
    if (typeof rule?.code === 'string' && !isBuiltInRole(rule.code)) codes.set(id, rule.code);
  }
  return codes;
}

/** A user's effective roles now: its roles and the codes of its valid groups' access rules. */
export async function rolesOf(deps: AppDeps, fields: JsonObject, groups?: readonly JsonObject[]): Promise<string[]> {
  const now = deps.clock.now();
  const of = groups ?? (await groupsOf(deps, fields));
  return effectiveRoles(fields, of, now, await groupRuleCodes(deps, of, now));
}

/** Whether a caller holds a role (see the top of this file). */
export function holds(caller: Caller, role: string): boolean {
  if (caller.roles.includes(role) || allows(caller, 'admin')) return true;
  if (isBuiltInRole(role)) return permissionsOf(role).every((p) => allows(caller, p));
  return allows(caller, 'write');
}

/** `admin` among its own roles (a group never grants a built-in role). */
const isAdmin = (fields: JsonObject): boolean => Array.isArray(fields.roles) && fields.roles.includes('admin');

/** An admin that can act: where this service logs users in, one that can log in now (the login's
 * own test: enabled, inside its validity, on PASSWORD, with a password set); with AUTH_ISSUER, who
 * logs in is the issuer's to say, and an enabled admin inside its validity counts. `hidden` is the
 * user's hidden part as stored (a change of its fields leaves it as it is). */
function enabledAdmin(fields: JsonObject, hidden: JsonObject | undefined, now: Date): boolean {
  return isAdmin(fields) && (hidden === undefined ? isActiveUser(fields, now) : canLogIn({ fields, hidden }, now));
}

/** The hidden part of a user, where this service logs users in (undefined otherwise: not needed). */
async function hiddenOf(deps: AppDeps, id: unknown): Promise<JsonObject | undefined> {
  if (deps.issueToken === undefined) return undefined;
  return (await deps.runtime.service(user).live(String(id)))?.hidden ?? {};
}

/** Users read when looking for another enabled admin (the read model narrows them to those with
 * `admin` that are ENABLE; validity and authentication are judged here). */
const ADMINS_READ = 1000;

/** Another user than this one is an enabled admin: from the users read model once it has caught up
 * with the log's head. */
async function anotherAdmin(deps: AppDeps, id: unknown, now: Date): Promise<boolean> {
  const filter = [
    { column: 'roles', operator: 'EQ', value: 'admin' },
    { column: 'status', operator: 'EQ', value: 'ENABLE' },
    { column: 'id', operator: 'NOT_EQ', value: String(id) },
  ] as const;
  for (const found of await readModelLookup(deps)(user, filter, ADMINS_READ)) {
    if (isActiveUser(found, now) && enabledAdmin(found, await hiddenOf(deps, found.id), now)) return true;
  }
  return false;
}

/** The lock of the last admin check: one check at a time in this process, held until its change is
 * written, so two admins demoting each other at once cannot both find the other still there.
 * (Across processes the read model's lag is the window that remains, as for references.) */
const LAST_ADMIN_LOCK = 'last-admin';

const lastAdmin = (code: unknown): DomainError =>
  new DomainError('USER.LAST_ADMIN', `${String(code)} is the last enabled admin: make another user an enabled admin first`, [
    'no other user has the role admin, is ENABLE and inside its validity (and, where this service logs users in, is on PASSWORD with a password set)',
  ]);

/** The group codes a user names before a change and no longer after it. */
const codesLeft = (before: JsonObject, after: JsonObject): string[] => {
  const kept = new Set(Array.isArray(after.groups) ? after.groups : []);
  return (Array.isArray(before.groups) ? before.groups : []).filter((c): c is string => typeof c === 'string' && !kept.has(c));
};

/** The 403 of a caller that does not hold every role the user holds. The roles are named only
 * where the user record shows them (its own `roles`): a role from a group names an access rule, and
 * both may be hidden from the caller, so those are counted. */
function unheldRoles(before: JsonObject, unheld: readonly string[]): DomainError {
  const own = new Set(Array.isArray(before.roles) ? before.roles : []);
  const named = unheld.filter((role) => own.has(role));
  const fromGroups = unheld.length - named.length;
  const held = [
    ...(named.length > 0 ? [named.join(', ')] : []),
    ...(fromGroups > 0 ? [`${String(fromGroups)} role(s) its groups carry`] : []),
  ].join(' and ');
  return forbidden(`The user holds ${held}, which you do not hold: changing, disabling or deleting a user takes every role it holds`);
}

/** The caller's standing over a user, checked on every change of one (ServedResource.guard). */
export function userStanding(deps: AppDeps, request: FastifyRequest): ChangeGuard {
  return async ({ before, after }) => {
    const caller = request.caller;
    // An admin holds every role: the user's need not be read.
    const admin = caller !== undefined && allows(caller, 'admin');
    const unheld = admin ? [] : (await rolesOf(deps, before)).filter((role) => caller === undefined || !holds(caller, role));
    if (unheld.length > 0) throw unheldRoles(before, unheld);
    if (!admin && after !== undefined) {
      // Leaving a group that carries a role revokes the role: an admin's decision, as joining one
      // (domain/identity/user.ts) and setting a group's role are. The caller holding the role is
      // not enough: an editor holds every access rule's role.
      const revoking = (await groupsOf(deps, { groups: codesLeft(before, after) })).filter(
        (g) => typeof g.associatedUserRoleId === 'string',
      );
      if (revoking.length > 0)
        throw forbidden(`Only an admin may remove a user from ${revoking.map((g) => String(g.code)).join(', ')}: the group grants a role`);
    }
    if (!isAdmin(before)) return undefined;
    const now = deps.clock.now();
    const hidden = await hiddenOf(deps, before.id);
    if (!enabledAdmin(before, hidden, now) || (after !== undefined && enabledAdmin(after, hidden, now))) return undefined;
    const release = await deps.runtime.locks.acquire([{ name: LAST_ADMIN_LOCK, exclusive: true }]);
    try {
      if (!(await anotherAdmin(deps, before.id, now))) throw lastAdmin(before.code);
    } catch (error) {
      release();
      throw error;
    }
    return release;
  };
}
