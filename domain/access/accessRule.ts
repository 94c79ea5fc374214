import { z } from 'zod';
import { code, dateTime, longText, periodRule, text } from '../shared/fields.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../resource/defineResource.ts';
import { expressionRule, isBuiltInRole } from './coverage.ts';

export const AccessLevels = ['READ', 'READ_WRITE'] as const;

const validForRule = periodRule('validFrom', 'validTo');

/** A token's role named like a built-in role is that role: a rule of that code would never apply,
 * and a group naming it (associatedUserRoleId) would hand its members the built-in role. */
const notBuiltIn = (f: Record<string, unknown>): string[] =>
  typeof f.code === 'string' && isBuiltInRole(f.code) ? [`code: ${JSON.stringify(f.code)} is a built-in role, never an access rule`] : [];

export const accessRule = defineRegistry({
  name: 'AccessRule',
  events: { AccessRuleCreated: created(), AccessRuleReplaced: replaced(), AccessRulePatched: patched(), AccessRuleDeleted: deleted() },
  path: 'access-rules',
  description:
    'Entity-level rule: a caller whose role equals `code` may read (`accessRule` READ, the default) or read and write (READ_WRITE) the records of the ' +
    'resource whose path is `entityName` (e.g. users, user-groups): all of them when `fullAccess`, else those `expression` matches. `expression` is JSON: ' +
    'a Filtering (`{ "filter": [ … ] }`) or its filter items (`[ … ]`), the same items as search; it is checked when the rule is saved (400 naming the ' +
    "problem; over the resource's columns when this service serves it). The rule applies while now is inside `validFor` (and `validFor.isValid` is not false). " +
    'Built-in roles admin, editor, viewer and auditor are not narrowed by rules, and no rule has one of their names as its code (400). ' +
    "A user group names a rule as the role of its members by the rule's id (`associatedUserRoleId`): they receive its code. " +
    "A user holds a rule's role by its code (`roles`). A rule a user holds cannot be deleted nor its code changed, and one a group names " +
    'cannot be deleted (409 ACCESS_RULE.STILL_REFERENCED); a group follows a renamed rule (it names the id). GET /api/v1/roles lists the roles.',
  fields: z.strictObject({
    code: code(),
    name: text(),
    validFor: z
      .strictObject({ validFrom: dateTime().optional(), validTo: dateTime().optional(), isValid: z.boolean().optional() })
      .optional(),
    entityName: z.string().max(255).optional(),
    expression: z.string().max(10_000).optional(),
    accessRule: z.enum(AccessLevels).optional(),
    fullAccess: z.boolean(),
    description: longText(4000).optional(),
  }),
  rules: [
    notBuiltIn,
    (f) => (typeof f.validFor === 'object' && f.validFor !== null ? validForRule(f.validFor as Record<string, unknown>, ['validFor']) : []),
  ],
  servedRules: [expressionRule],
  indexed: ['entityName'],
});
