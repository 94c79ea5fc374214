// User groups (SPEC.md "User group"): a tree of groups (parentUserGroupId, never a cycle) of a
// user group type, optionally backed by a directory group (ldapMemberOf, unique as a normalised
// DN). Users name their groups by code; a group that users, child groups or region assignments
// still name cannot be deleted (409), nor its code changed while users name it.

import { z } from 'zod';
import {
  code,
  dateTime,
  email,
  jsonMap,
  longText,
  periodRule,
  phoneNumber,
  stringList,
  text,
  uuid,
} from '../../../domain/shared/fields.ts';
import { created, defineResource, deleted, patched, replaced, type ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import { forbidden } from '../../../domain/shared/errors.ts';
import { accessRule } from '../../../domain/access/accessRule.ts';
import { userGroupType } from '../../registries/domain/userGroupType.ts';

/** An LDAP distinguished name compared case-insensitively, spaces around `,` and `=` ignored. */
export const normalizeDn = (dn: string): string =>
  dn
    .trim()
    .replace(/\s*([,=])\s*/g, '$1')
    .toLowerCase();

export const userGroup: ResourceDefinition = defineResource({
  name: 'UserGroup',
  events: { UserGroupCreated: created(), UserGroupReplaced: replaced(), UserGroupPatched: patched(), UserGroupDeleted: deleted() },
  path: 'user-groups',
  description:
    'A group of users, of a user group type (`type`: the code of an existing user group type, else 422), in a tree (`parentUserGroupId`: an existing group, ' +
    'never the group itself or one of its descendants, else 422). `ldapMemberOf`, when set, is unique among groups, compared as a DN case-insensitively ' +
    'with spaces around `,` and `=` ignored (409 USER_GROUP.LDAP_MEMBER_OF_TAKEN). Deleting a group that users, child groups or region assignments still name ' +
    'is 409 USER_GROUP.STILL_REFERENCED counting them and naming those the caller may read; so is changing the code of a group users name (users hold group codes).',
  fields: z.strictObject({
    code: code(),
    type: code().meta({ description: 'code of an existing user group type' }),
    name: text(),
    description: longText(4000).optional(),
    ldapMemberOf: text(1000).optional().meta({ description: 'the directory group (a DN) backing this group; unique, compared normalised' }),
    parentUserGroupId: uuid().optional(),
    validFrom: dateTime().optional(),
    validTo: dateTime().optional(),
    dataTags: stringList(100).optional(),
    email: email().optional(),
    phoneNumber: phoneNumber().optional(),
    chars: jsonMap().meta({ description: 'characteristics by characteristic code; their shape depends on the group type' }),
    associatedUserRoleId: uuid()
      .optional()
      .meta({
        description:
          "the id of an access rule (422 when none has it): every member receives the rule's code as a role (in its effective roles, hence at login) " +
          'while the group is valid; only an admin may set it, and the rule cannot be deleted while a group names it (409)',
      }),
  }),
  rules: [periodRule('validFrom', 'validTo')],
  unique: [
    { name: 'code', fields: ['code'] },
    { name: 'ldapMemberOf', fields: ['ldapMemberOf'], normalize: normalizeDn },
  ],
  references: [
    { field: 'type', resource: () => userGroupType, by: 'code', restrict: true },
    { field: 'parentUserGroupId', resource: () => userGroup, acyclic: true, restrict: true, private: true },
    { field: 'associatedUserRoleId', resource: () => accessRule, restrict: true },
  ],
  indexed: ['type', 'parentUserGroupId', 'associatedUserRoleId'],
  adminOnly: ['associatedUserRoleId'],
  behaviour: {
    onChange: (before, after, ctx) => {
      // A group's validity decides whether its role is granted: for a group that carries one, an admin's to change.
      const carries = typeof before?.associatedUserRoleId === 'string' || typeof after.associatedUserRoleId === 'string';
      const moved = before !== undefined && (before.validFrom !== after.validFrom || before.validTo !== after.validTo);
      if (ctx.privileged === false && carries && moved)
        throw forbidden('Only an admin may change the validity of a group that grants a role');
      return after;
    },
  },
});
