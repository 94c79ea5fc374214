// The directory sync as a decision: from the people the directory holds, the users the service
// holds and the groups backed by directory groups, the writes that make the users match, as pure
// data. The directory is the source of the fields it maps and of the membership of directory-backed
// groups; everything else of a user (its other groups, roles, status once disabled) is the
// service's. An unchanged directory decides nothing, so a second sync appends nothing.

import type { DirectoryPerson } from '../../../domain/ports.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { normalizeDn } from '../../identity/domain/userGroup.ts';

/** The authentications whose users log in against the directory and that the sync manages. */
export const DirectoryAuthentications = ['LDAP', 'AD'] as const;
export type DirectoryAuthentication = (typeof DirectoryAuthentications)[number];

export const isDirectoryUser = (fields: JsonObject): boolean =>
  (DirectoryAuthentications as readonly unknown[]).includes(fields.authentication);

/** The actor of every write the sync makes. */
export const SYNC_ACTOR = 'directory-sync';

/** The fields the directory is the source of, besides the membership of directory-backed groups. */
const MAPPED = ['givenName', 'familyName', 'email', 'phoneNumber'] as const;

/** The codes a user may have (domain/shared/fields.ts `code()`): a directory name outside it is skipped. */
const CODE = /^[\x21-\x7e]{1,255}$/;

export type SyncUser = { id: string; version: number; fields: JsonObject };
export type SyncGroup = { code: string; ldapMemberOf: string };
export type SyncOptions = { userType: string; authentication: DirectoryAuthentication };

export type SyncCommand =
  | { type: 'Create'; code: string; input: JsonObject }
  | { type: 'Update'; id: string; version: number; code: string; input: JsonObject; changed: readonly string[] }
  | { type: 'Disable'; id: string; version: number; code: string; input: JsonObject };

export type SyncDecision = {
  commands: SyncCommand[];
  /** People the sync leaves alone, and why. */
  skipped: { dn: string; code?: string; reason: string }[];
  /** Directory users already as the directory has them. */
  unchanged: number;
};

/** The codes of the directory-backed groups a person's group DNs name, in their order, each once. */
export function groupCodesOf(dns: readonly string[], groups: readonly SyncGroup[]): string[] {
  const byDn = new Map(groups.map((g) => [normalizeDn(g.ldapMemberOf), g.code]));
  return [...new Set(dns.flatMap((dn) => byDn.get(normalizeDn(dn)) ?? []))];
}

const codesIn = (value: unknown): string[] => (Array.isArray(value) ? value.filter((c): c is string => typeof c === 'string') : []);
const sameSet = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && new Set([...a, ...b]).size === new Set(a).size;

/** The user's groups with its directory-backed ones as the directory says: the others kept, in
 * their order, then the directory's. */
function groupsAfter(current: readonly string[], backed: ReadonlySet<string>, mapped: readonly string[]): string[] {
  return [...new Set([...current.filter((c) => !backed.has(c)), ...mapped])];
}

/** A user's fields with the person's mapped ones (absent in the directory: removed). */
function withPerson(fields: JsonObject, person: DirectoryPerson): JsonObject {
  const kept = Object.entries(fields).filter(([k]) => !(MAPPED as readonly string[]).includes(k));
  const mapped = MAPPED.flatMap((f) => (person[f] === undefined ? [] : [[f, person[f]] as const]));
  return Object.fromEntries([...kept, ...mapped]);
}

/** The people by code: those without a usable one, and codes several entries share, are skipped. */
function peopleByCode(people: readonly DirectoryPerson[], skipped: SyncDecision['skipped']): Map<string, DirectoryPerson> {
  const counts = new Map<string, number>();
  for (const p of people) if (p.code !== undefined) counts.set(p.code, (counts.get(p.code) ?? 0) + 1);
  const byCode = new Map<string, DirectoryPerson>();
  for (const p of people) {
    if (p.code === undefined) skipped.push({ dn: p.dn, reason: 'the entry has no value for the code attribute' });
    else if (!CODE.test(p.code))
      skipped.push({ dn: p.dn, code: p.code, reason: 'not a user code (printable ASCII without spaces, at most 255)' });
    else if ((counts.get(p.code) ?? 0) > 1) skipped.push({ dn: p.dn, code: p.code, reason: 'several directory entries have this code' });
    else byCode.set(p.code, p);
  }
  return byCode;
}

/**
 * The writes that make the users match the directory. `users` are the service's users that are
 * directory users (LDAP, AD) or have a code a person has. A person whose code a user of another
 * authentication holds is skipped: the sync never takes over a local account.
 */
export function decideSync(
  people: readonly DirectoryPerson[],
  users: readonly SyncUser[],
  groups: readonly SyncGroup[],
  options: SyncOptions,
): SyncDecision {
  const skipped: SyncDecision['skipped'] = [];
  const commands: SyncCommand[] = [];
  let unchanged = 0;
  const byCode = peopleByCode(people, skipped);
  const present = new Set(people.flatMap((p) => (p.code === undefined ? [] : [p.code])));
  const usersByCode = new Map(users.map((u) => [String(u.fields.code), u]));
  const backed = new Set(groups.map((g) => g.code));
  for (const [code, person] of byCode) {
    const mapped = groupCodesOf(person.groups, groups);
    const found = usersByCode.get(code);
    if (found === undefined) {
      const named = person.givenName !== undefined || person.familyName !== undefined;
      const input = withPerson(
        {
          code,
          type: options.userType,
          authentication: options.authentication,
          status: 'ENABLE',
          chars: {},
          ...(named ? {} : { name: code }),
        },
        person,
      );
      commands.push({ type: 'Create', code, input: mapped.length === 0 ? input : { ...input, groups: mapped } });
      continue;
    }
    if (!isDirectoryUser(found.fields)) {
      skipped.push({
        dn: person.dn,
        code,
        reason: `a user of authentication ${String(found.fields.authentication)} has this code: the sync leaves it`,
      });
      continue;
    }
    const current = codesIn(found.fields.groups);
    const changed: string[] = MAPPED.filter((f) => found.fields[f] !== person[f]);
    const currentBacked = current.filter((c) => backed.has(c));
    let input = withPerson(found.fields, person);
    if (!sameSet(currentBacked, mapped)) {
      changed.push('groups');
      const { groups: _groups, ...rest } = input;
      const after = groupsAfter(current, backed, mapped);
      input = after.length === 0 ? rest : { ...rest, groups: after };
    }
    if (changed.length === 0) unchanged++;
    else commands.push({ type: 'Update', id: found.id, version: found.version, code, input, changed });
  }
  for (const u of users) {
    const code = String(u.fields.code);
    if (isDirectoryUser(u.fields) && !present.has(code) && u.fields.status === 'ENABLE') {
      commands.push({ type: 'Disable', id: u.id, version: u.version, code, input: { ...u.fields, status: 'DISABLE' } });
    }
  }
  return { commands, skipped, unchanged };
}
