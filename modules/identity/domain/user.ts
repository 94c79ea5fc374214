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
  type EventOf,
  type FieldRule,
  type ResourceDefinition,
} from '../../../domain/resource/defineResource.ts';
import { forbidden } from '../../../domain/shared/errors.ts';
import { UserKinds, userType } from '../../registries/domain/userType.ts';
import { userGroup } from './userGroup.ts';

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
};
export type UserCommand = CommandOf<typeof userCommands>;

const validUserType = (record: JsonObject, now: Date): boolean => withinPeriod(record.validityFrom, record.validityTo, now);

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
    groups: distinct(z.array(code()).max(1000))
      .optional()
      .meta({ description: 'codes of existing user groups, each once; adding one whose associatedUserRoleId is set takes an admin' }),
    roles: distinct(z.array(text()).max(1000))
      .optional()
      .meta({
        description: 'role codes, each once: built-in (admin, editor, viewer, auditor) or access rule codes; only an admin may change them',
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
      // Joining a group that carries a role grants the role: an admin's decision, as `roles` is.
      const granting = (ctx.refs.get('groups') ?? []).filter((g) => typeof g.associatedUserRoleId === 'string');
      if (ctx.privileged === false && granting.length > 0) {
        throw forbidden(`Only an admin may add a user to ${granting.map((g) => String(g.code)).join(', ')}: the group grants a role`);
      }
      return withName(before, after);
    },
    decide(c) {
      switch (c.type) {
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
