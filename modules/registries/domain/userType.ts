import { z } from 'zod';
import { jsonMap, uuid } from '../../../domain/shared/fields.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { codedValue, validityRule } from './codedValue.ts';

export const UserKinds = ['INDIVIDUAL', 'WORK_GROUP', 'ORGANIZATION', 'EXTERNAL'] as const;

export const userType = defineRegistry({
  name: 'UserType',
  events: { UserTypeCreated: created(), UserTypeReplaced: replaced(), UserTypePatched: patched(), UserTypeDeleted: deleted() },
  path: 'user-types',
  description: 'Kind of user (individual, work group, organization, external) and its characteristics.',
  fields: codedValue({
    type: z.enum(UserKinds),
    entitySpecId: uuid().optional(),
    icon: z.string().max(255).optional(),
    config: jsonMap().optional(),
    registry: jsonMap().optional(),
  }),
  rules: [validityRule],
  indexed: ['type'],
});
