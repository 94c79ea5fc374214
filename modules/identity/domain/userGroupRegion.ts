// User group regions (SPEC.md "User group region"): a region assigned to a group, its own record
// with a unique (group, region) pair. Its read form embeds the group as it is now (`userGroup`),
// joined when read, so renaming a group shows in every assignment at once.

import { z } from 'zod';
import { uuid } from '../../../domain/shared/fields.ts';
import { created, defineResource, deleted, patched, replaced, type ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import { userGroup } from './userGroup.ts';

export const userGroupRegion: ResourceDefinition = defineResource({
  name: 'UserGroupRegion',
  events: {
    UserGroupRegionCreated: created(),
    UserGroupRegionReplaced: replaced(),
    UserGroupRegionPatched: patched(),
    UserGroupRegionDeleted: deleted(),
  },
  path: 'user-group-regions',
  description:
    'A region assigned to a user group. (userGroupId, regionId) is unique: a second assignment of the pair is 409 USER_GROUP_REGION.USER_GROUP_REGION_TAKEN. ' +
    '`userGroupId` must name an existing group (422). `userGroup` is the group as it is now, in every read of the assignment.',
  fields: z.strictObject({
    regionId: uuid().meta({ description: "the region (kept by the platform's region registry, not checked here)" }),
    userGroupId: uuid(),
  }),
  unique: [{ name: 'userGroupRegion', fields: ['userGroupId', 'regionId'] }],
  references: [{ field: 'userGroupId', resource: () => userGroup, restrict: true, private: true }],
  immutable: ['userGroupId', 'regionId'],
  carried: ['userGroupId'],
  indexed: ['userGroupId', 'regionId'],
  operations: ['create', 'get', 'versions', 'history', 'delete', 'list', 'count'],
  readOnly: {
    userGroup: { schema: userGroup.record.optional().meta({ description: 'Read-only: the group as it is now.' }), initial: undefined },
  },
});
