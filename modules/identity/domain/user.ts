// Users (SPEC.md "User"): individuals, work groups, organizations and external parties, with
// their groups (by code), roles, supervisor (never a cycle), regions and notification
// preferences. A password (its argon2id hash) and a thumbnail (a blob's hash, type and size) are
// hidden parts set by their own events: never in a record, a read model or the data of history.

import { z } from 'zod';
import {
  code,
  dayOrDateTime,
  dateTime,
  distinct,
  email,
  jsonMap,
  longText,
  periodRule,
  phoneNumber,
  stringList,
  text,
  uuid,
  webUrl,
  withinPeriod,
} from '../../../domain/shared/fields.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import {
  command,
  created,
  defineResource,
  deleted,
  exhaustive,
  ownEvent,
  patched,
  replaced,
  type CommandOf,
  type DecideContext,
  type EventOf,
  type OwnEventOf,
  type FieldRule,
  type ResourceDefinition,
} from '../../../domain/resource/defineResource.ts';
import { forbidden, validationFailed } from '../../../domain/shared/errors.ts';
import { UserKinds, userType } from '../../registries/domain/userType.ts';
import { userGroup } from './userGroup.ts';
import { accessRule } from '../../../domain/access/accessRule.ts';
import { BUILT_IN_ROLE_NAMES, isBuiltInRole } from '../../../domain/access/coverage.ts';

export const UserStatuses = ['ENABLE', 'DISABLE'] as const;
export const Authentications = ['LDAP', 'PKI', 'AD', 'PASSWORD', 'EMPTY'] as const;

/** The name of an individual without one: given and family names. */
const personalName = (f: JsonObject): string | undefined => {
  const parts = [f.givenName, f.familyName].filter((p): p is string => typeof p === 'string' && p.trim() !== '');
  return parts.length === 0 ? undefined : parts.join(' ').slice(0, 255);
};

const nameRule: FieldRule = (f) => {
  if (f.name !== undefined) return [];
  if (f.type === 'WORK_GROUP' || f.type === 'ORGANIZATION') return [`name: required for type ${f.type}`];
  return personalName(f) === undefined ? ['name: required, or givenName or familyName to derive it from'] : [];
};

const regionPeriods: FieldRule = (f) =>
  Array.isArray(f.regions)
    ? f.regions.flatMap((r, i) => periodRule('validFrom', 'validTo')(r as Record<string, unknown>, ['regions', String(i)]))
    : [];

/** A name derived from given and family names follows them; one the client gave stays. */
function withName(before: JsonObject | undefined, after: JsonObject): JsonObject {
  const derivedBefore = before?.name !== undefined && before.name === personalName(before);
  if (after.name === undefined || (derivedBefore && after.name === before.name)) {
    const name = personalName(after);
    if (name !== undefined && after.type !== 'WORK_GROUP' && after.type !== 'ORGANIZATION') return { ...after, name };
  }
  return after;
}

/** A thumbnail as a user holds it: the blob's hash, type and size. */
const thumbnailRef = z.strictObject({ sha256: z.string().regex(/^[0-9a-f]{64}$/), contentType: text(), size: z.int().min(0) });
export type ThumbnailRef = z.infer<typeof thumbnailRef>;

/** The group codes a user names. */
function groupsOf(fields: JsonObject): string[] {
  return Array.isArray(fields.groups) ? fields.groups.filter((c): c is string => typeof c === 'string') : [];
}

/** A user's fields with it a member of a group (last in `groups`), or not: what the membership
 * events leave. */
export function withMembership(fields: JsonObject, group: string, member: boolean): JsonObject {
  const others = groupsOf(fields).filter((c) => c !== group);
  return { ...fields, groups: member ? [...others, group] : others };
}

/** A membership event's data: the group by code, as `groups` names it (a group's code cannot
 * change while a user names it, so the code in the log names the group it meant). */
const membershipData = z.strictObject({ group: code().meta({ description: "the group's code" }) });

const userEvents = {
  UserCreated: created(),
  UserReplaced: replaced(),
  UserPatched: patched(),
  UserDeleted: deleted(),
  UserPasswordChanged: ownEvent({
    meaning:
      "The user's password was set (PUT /api/v1/users/{id}/password): its argon2id hash, hidden (never in reads, history or the audit feed), and " +
      'whether the user must change it (an admin set it: true; the user changed its own: false), shown on the user as `mustChangePassword`.',
    data: z.strictObject({
      passwordHash: z.string(),
      // Optional: events written before it existed say nothing, and leave the flag as it was.
      mustChangePassword: z
        .boolean()
        .optional()
        .meta({ description: 'true: an admin set it (a reset); false: the user changed its own; absent in events written before' }),
    }),
    evolve: (r, d) => ({
      fields: d.mustChangePassword === undefined ? r.fields : { ...r.fields, mustChangePassword: d.mustChangePassword },
      hidden: { ...r.hidden, passwordHash: d.passwordHash },
    }),
  }),
  UserAddedToGroup: ownEvent({
    meaning:
      'The user joined a user group (PUT /api/v1/users/{userId}/groups/{groupIdOrCode}, or an `add` of POST /api/v1/user-groups/{idOrCode}/members): ' +
      "the group's code, added to the user's `groups`.",
    data: membershipData,
    evolve: (r, d) => ({ ...r, fields: withMembership(r.fields, d.group, true) }),
  }),
  UserRemovedFromGroup: ownEvent({
    meaning:
      'The user left a user group (DELETE /api/v1/users/{userId}/groups/{groupIdOrCode}, or a `remove` of POST /api/v1/user-groups/{idOrCode}/members): ' +
      "the group's code, taken out of the user's `groups`.",
    data: membershipData,
    evolve: (r, d) => ({ ...r, fields: withMembership(r.fields, d.group, false) }),
  }),
  UserThumbnailChanged: ownEvent({
    meaning:
      "The user's thumbnail was set: the blob holding the image (its bytes are in the blob store, never in an event); hidden from reads and history.",
    data: thumbnailRef,
    evolve: (r, d) => ({ ...r, hidden: { ...r.hidden, thumbnail: { sha256: d.sha256, contentType: d.contentType, size: d.size } } }),
  }),
};
export type UserEvent = EventOf<typeof userEvents>;

/** The user's own commands: its password (already hashed) and its thumbnail (already stored). */
const userCommands = {
  SetPassword: command(
    "Set the user's password, hashed before the command: by the user itself (`reset` false), or by an admin (`reset` true: the user must change it).",
    z.strictObject({
      passwordHash: z.string(),
      reset: z.boolean().meta({ description: "true: an admin's reset (the user must change it); false: the user's own change" }),
    }),
  ),
  SetThumbnail: command(
    "Set the user's thumbnail, stored in the blob store before the command.",
    z.strictObject({ thumbnail: thumbnailRef }),
  ),
  JoinGroup: command('Add the user to a user group, by its code (nothing when it is a member already).', z.strictObject({ group: code() })),
  LeaveGroup: command(
    'Remove the user from a user group, by its code (nothing when it is not a member).',
    z.strictObject({ group: code() }),
  ),
};
export type UserCommand = CommandOf<typeof userCommands>;

const validUserType = (record: JsonObject, now: Date): boolean => withinPeriod(record.validityFrom, record.validityTo, now);

/** The most groups a user names. */
const MAX_GROUPS = 1000;

/** Joining a group that carries a role grants the role: an admin's decision, as `roles` is. The
 * groups a change adds are its `groups` references (loaded before the decision). */
function assertMayJoin(ctx: DecideContext): void {
  const granting = (ctx.refs.get('groups') ?? []).filter((g) => typeof g.associatedUserRoleId === 'string');
  if (ctx.privileged === false && granting.length > 0) {
    throw forbidden(`Only an admin may add a user to ${granting.map((g) => String(g.code)).join(', ')}: the group grants a role`);
  }
}

/** A user joining one more group: its event, or none when it is a member already. */
function joined(fields: JsonObject, group: string, ctx: DecideContext): OwnEventOf<typeof userEvents>[] {
  const groups = groupsOf(fields);
  if (groups.includes(group)) return [];
  if (groups.length >= MAX_GROUPS)
    throw validationFailed('The user is in as many groups as a user may be', [`groups: at most ${String(MAX_GROUPS)}`]);
  assertMayJoin(ctx);
  return [{ type: 'UserAddedToGroup', data: { group } }];
}

export const user: ResourceDefinition<typeof userEvents, typeof userCommands> = defineResource({
  name: 'User',
  path: 'users',
  description:
    '`type` must be the `type` of an existing user type valid now (else 422). `name` is required for WORK_GROUP and ORGANIZATION; for INDIVIDUAL and ' +
    'EXTERNAL it may be left out and is then derived from givenName and familyName (and follows them while derived). `status` defaults to ENABLE. ' +
    "`authentication` defaults to PASSWORD: SPEC.md's schema default, which the embedded login uses (its field text names AD, the two disagree; " +
    'PASSWORD is the one this service can honour without a directory). `groups` are codes of existing user groups, `supervisorId` an existing user ' +
    'that is not the user itself nor below it (422 otherwise). The password and thumbnail have their own routes and are never part of the record; ' +
    '`mustChangePassword` (read-only) says an admin set the password and the user has not changed it since.',
  fields: z.strictObject({
    code: code().meta({ description: 'business key; the login name' }),
    type: z.enum(UserKinds),
    givenName: text().optional(),
    familyName: text().optional(),
    name: text()
      .optional()
      .meta({
        description: 'company or group name; required for WORK_GROUP and ORGANIZATION; derived from givenName and familyName when absent',
      }),
    email: email().optional(),
    phoneNumber: phoneNumber().optional(),
    webSite: webUrl().optional(),
    status: z.enum(UserStatuses).default('ENABLE'),
    validFrom: dayOrDateTime('start').optional(),
    validTo: dayOrDateTime('end').optional(),
    authentication: z.enum(Authentications).default('PASSWORD').meta({ description: 'default PASSWORD (see the resource description)' }),
    description: longText(4000).optional(),
    groups: distinct(z.array(code()).max(MAX_GROUPS))
      .optional()
      .meta({ description: 'codes of existing user groups, each once; adding one whose associatedUserRoleId is set takes an admin' }),
    roles: distinct(z.array(text()).max(1000))
      .optional()
      .meta({
        description:
          'role codes, each once: a built-in role (admin, editor, viewer, auditor) or the code of an existing access rule (422 otherwise; ' +
          'GET /api/v1/roles lists them); only an admin may change them',
      }),
    dataTags: stringList(100).optional(),
    chars: jsonMap().meta({ description: 'characteristics by code; their shape depends on the user type' }),
    supervisorId: uuid().optional(),
    regions: z
      .array(
        z.strictObject({
          regionId: uuid(),
          coefficient: z.number().min(0).max(1e9).optional(),
          validFrom: dateTime().optional(),
          validTo: dateTime().optional(),
        }),
      )
      .max(1000)
      .optional(),
    notificationConfig: z
      .strictObject({ ignoredTemplateCodes: z.array(code()).max(1000).optional(), ignoredUserGroups: z.array(code()).max(1000).optional() })
      .optional(),
    modulesIds: z.array(uuid()).max(1000).optional(),
  }),
  rules: [nameRule, periodRule('validFrom', 'validTo'), regionPeriods],
  references: [
    { field: 'type', resource: () => userType, by: { field: 'type' }, valid: validUserType },
    { field: 'groups', resource: () => userGroup, by: 'code', restrict: true, private: true },
    { field: 'supervisorId', resource: () => user, acyclic: true, restrict: true, private: true },
    // A role is granted by name: a built-in role, or an access rule's code, which cannot then be
    // deleted or renamed (409) while a user holds it (GET /api/v1/roles lists them).
    { field: 'roles', resource: () => accessRule, by: 'code', restrict: true, builtIn: { is: isBuiltInRole, what: BUILT_IN_ROLE_NAMES } },
  ],
  indexed: ['type', 'status', 'groups', 'supervisorId', 'email', 'familyName'],
  hidden: ['passwordHash', 'thumbnail'],
  // Set by the password's own event only: a client cannot set it through create, replace or patch
  // (a replace keeps it; a patch naming it is 400).
  readOnly: {
    mustChangePassword: {
      schema: z
        .boolean()
        .optional()
        .meta({
          description:
            'Read-only: true after an admin set the password (PUT /api/v1/users/{idOrCode}/password without currentPassword), until the user changes it ' +
            'itself; meanwhile its login token answers 403 AUTH.PASSWORD_CHANGE_REQUIRED to anything but that change and the logout. False or absent otherwise.',
        }),
      initial: undefined,
    },
  },
  adminOnly: ['roles'],
  events: userEvents,
  commands: userCommands,
  behaviour: {
    onChange: (before, after, ctx) => {
      assertMayJoin(ctx);
      return withName(before, after);
    },
    decide(c, record, ctx) {
      switch (c.type) {
        case 'JoinGroup':
          return joined(record.fields, c.group, ctx);
        case 'LeaveGroup':
          return groupsOf(record.fields).includes(c.group) ? [{ type: 'UserRemovedFromGroup', data: { group: c.group } }] : [];
        case 'SetPassword':
          return [{ type: 'UserPasswordChanged', data: { passwordHash: c.passwordHash, mustChangePassword: c.reset } }];
        case 'SetThumbnail':
          return [{ type: 'UserThumbnailChanged', data: { ...c.thumbnail } }];
        default:
          return exhaustive(c, 'user command');
      }
    },
  },
});

/** Whether a user may act now: enabled and inside its validity window. */
export const isActiveUser = (fields: JsonObject, now: Date): boolean =>
  fields.status === 'ENABLE' && withinPeriod(fields.validFrom, fields.validTo, now);

/** Whether a user can log in with this service's login now: active, on PASSWORD, and with a
 * password set. The login, its sessions and the last-admin check all judge by this one test. */
export const canLogIn = (user: { fields: JsonObject; hidden: JsonObject }, now: Date): boolean =>
  isActiveUser(user.fields, now) && user.fields.authentication === 'PASSWORD' && typeof user.hidden.passwordHash === 'string';

/** Whether a user can log in with a TLS client certificate now (certificate.ts): active and on PKI.
 * A PKI user cannot log in with a password (canLogIn), nor a PASSWORD user with a certificate. */
export const canLogInWithCertificate = (fields: JsonObject, now: Date): boolean =>
  isActiveUser(fields, now) && fields.authentication === 'PKI';
