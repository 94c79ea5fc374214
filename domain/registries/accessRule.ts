import { z } from 'zod';
import { code, dateTime, longText, periodRule, text } from '../shared/fields.ts';
import { defineRegistry } from '../resource/defineResource.ts';
import { expressionRule } from '../access/coverage.ts';

export const AccessLevels = ['READ', 'READ_WRITE'] as const;

const validForRule = periodRule('validFrom', 'validTo');

export const accessRule = defineRegistry({
  name: 'AccessRule',
  path: 'access-rules',
  description:
    'Entity-level rule: a caller whose role equals `code` may read (`accessRule` READ, the default) or read and write (READ_WRITE) the records of the ' +
    'resource whose path is `entityName` (e.g. users, user-groups): all of them when `fullAccess`, else those `expression` matches. `expression` is JSON: ' +
    'a Filtering (`{ "filter": [ … ] }`) or its filter items (`[ … ]`), the same items as search; it is checked when the rule is saved (400 naming the ' +
    'problem; over the resource\'s columns when this service serves it). The rule applies while now is inside `validFor` (and `validFor.isValid` is not false). ' +
    'Built-in roles admin, editor and viewer are not narrowed by rules.',
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
  rules: [(f) => (typeof f.validFor === 'object' && f.validFor !== null ? validForRule(f.validFor as Record<string, unknown>, ['validFor']) : []), expressionRule],
  indexed: ['entityName'],
});
