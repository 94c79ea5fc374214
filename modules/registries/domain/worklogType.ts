import { z } from 'zod';
import { created, defineRegistry, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { codedValue, validityRule } from './codedValue.ts';

export const worklogType = defineRegistry({
  name: 'WorklogType',
  events: { WorklogTypeCreated: created(), WorklogTypeReplaced: replaced(), WorklogTypePatched: patched(), WorklogTypeDeleted: deleted() },
  path: 'worklog-types',
  description: 'Kind of work log entry.',
  fields: codedValue({
    form: z.string().max(255).optional(),
    privilege: z.string().max(255).optional(),
    icon: z.string().max(255).optional(),
  }),
  rules: [validityRule],
});
