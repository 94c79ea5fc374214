import { z } from 'zod';
import { code, dateTime, longText, periodRule, text } from '../shared/fields.ts';
import { defineRegistry } from '../resource/defineResource.ts';

export const AccessLevels = ['READ', 'READ_WRITE'] as const;

const validForRule = periodRule('validFrom', 'validTo');

export const accessRule = defineRegistry({
  name: 'AccessRule',
  path: 'access-rules',
  description: 'Entity-level read or read-write rule narrowing what a role may do.',
  fields: z.strictObject({
    code: code(),
    name: text(),
    validFor: z
      .strictObject({
        validFrom: dateTime().optional(),
        validTo: dateTime().optional(),
        isValid: z.boolean().optional(),
      })
      .optional(),
    entityName: z.string().max(255).optional(),
    expression: z.string().max(10_000).optional(),
    accessRule: z.enum(AccessLevels).optional(),
    fullAccess: z.boolean(),
    description: longText(4000).optional(),
  }),
  rules: [(f) => (typeof f.validFor === 'object' && f.validFor !== null ? validForRule(f.validFor as Record<string, unknown>, ['validFor']) : [])],
  indexed: ['entityName'],
});
