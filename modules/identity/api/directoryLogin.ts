// Login of users whose authentication is LDAP or AD: the directory judges the password (the
// service binds to it as them; nothing of the password is kept), and says which directory groups
// they are in now. Those groups count through the user groups that name them (`ldapMemberOf`,
// compared normalised) in place of the directory-backed groups the user record holds from the last
// sync: the directory is their source. The session remembers the groups' codes, so that each
// request computes the roles from the groups as they are then.

import type { Directory } from '../../../domain/ports.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import type { LiveRecord } from '../../../domain/resource/defineResource.ts';
import type { AppDeps } from '../../../api/module.ts';
import type { Session } from '../../../api/auth.ts';
import { isDirectoryUser } from '../../directory/domain/sync.ts';
import { isActiveUser } from '../domain/user.ts';
import { userGroup } from '../domain/userGroup.ts';
import { groupsOf } from './userRoles.ts';

/** What a directory session names in place of a password's fingerprint (which is never this). */
export const DIRECTORY_SESSION = 'directory';

/** The user groups that name these directory groups (a DN no group names gives nothing). */
async function groupsNamingDns(deps: AppDeps, dns: readonly string[]): Promise<JsonObject[]> {
  const groups = deps.runtime.service(userGroup);
  const key = userGroup.unique.find((k) => k.name === 'ldapMemberOf');
  if (key === undefined) return [];
  const found = new Map<string, JsonObject>();
  for (const dn of new Set(dns)) {
    // Read from the log's reservation of the normalised DN: a group just made counts at once.
    const group = await groups.getByKey(key, { ldapMemberOf: dn }).catch(() => undefined);
    if (group !== undefined) found.set(group.id, group);
  }
  return [...found.values()];
}

/** A directory user's groups: those the record names that no directory group backs, and the
 * directory-backed ones of `codes` (the session's, from the directory at login). */
export async function directoryUserGroups(deps: AppDeps, fields: JsonObject, codes: readonly string[]): Promise<JsonObject[]> {
  const own = (await groupsOf(deps, fields)).filter((g) => typeof g.ldapMemberOf !== 'string');
  const fromDirectory = (await groupsOf(deps, { groups: [...codes] })).filter((g) => typeof g.ldapMemberOf === 'string');
  return [...own, ...fromDirectory];
}

/** The directory, when a login of this user is its to judge. */
export const directoryFor = (deps: AppDeps, found: LiveRecord | undefined): Directory | undefined =>
  found !== undefined && isDirectoryUser(found.fields) ? deps.directory : undefined;

/** Whether a session token of a directory login works for the user as it is now. */
export const directorySessionHolds = (found: LiveRecord, now: Date): boolean =>
  isActiveUser(found.fields, now) && isDirectoryUser(found.fields);

/**
 * The session of a directory login, or undefined when the directory does not accept the password
 * for the user (or the user cannot act now: then the directory is not asked). Throws the
 * directory's 503 when it cannot answer: a directory user never falls back to a local password.
 */
export async function directoryLogin(
  deps: AppDeps,
  directory: Directory,
  found: LiveRecord,
  password: string,
  now: Date,
): Promise<{ session: Session; groups: JsonObject[] } | undefined> {
  if (!directorySessionHolds(found, now)) return undefined;
  const person = await directory.authenticate(String(found.fields.code), password);
  if (person === undefined) return undefined;
  const named = await groupsNamingDns(deps, person.groups);
  const codes = named.map((g) => String(g.code));
  return { session: { pwd: DIRECTORY_SESSION, groups: codes }, groups: await directoryUserGroups(deps, found.fields, codes) };
}
