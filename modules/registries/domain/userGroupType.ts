import { jsonMap, uuid } from '../../../domain/shared/fields.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { codedValue, validityRule } from './codedValue.ts';

export const userGroupType = defineRegistry({
  name: 'UserGroupType',
  events: {
    UserGroupTypeCreated: created(),
    UserGroupTypeReplaced: replaced(),
    UserGroupTypePatched: patched(),
    UserGroupTypeDeleted: deleted(),
  },
  path: 'user-group-types',
  description: 'Kind of user group; its registry holds the characteristics a group of this type carries.',
  fields: codedValue({ userGroupSpecId: uuid().optional(), registry: jsonMap() }),
  rules: [validityRule],
});
