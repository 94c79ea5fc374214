import { z } from 'zod';
import { jsonMap } from '../../../domain/shared/fields.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { codedValue, validityRule } from './codedValue.ts';

const short = () => z.string().max(255).optional();

export const logType = defineRegistry({
  name: 'LogType',
  events: { LogTypeCreated: created(), LogTypeReplaced: replaced(), LogTypePatched: patched(), LogTypeDeleted: deleted() },
  path: 'log-types',
  description: 'Kind of operation log: the applications it connects and the forms of its payloads.',
  fields: codedValue({
    appFrom: short(),
    appTo: short(),
    requestFormCode: short(),
    responseFormCode: short(),
    relDataFormCode: short(),
    language: short(),
    protocol: short(),
    formCode: short(),
    config: jsonMap().optional(),
  }),
  rules: [validityRule],
});
