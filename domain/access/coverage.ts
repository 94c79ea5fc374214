// Access rules (SPEC.md: "entity-level read or read-write rules"), as this service enforces them.
// A caller's role equal to the code of an access rule valid now grants `accessRule` (READ, the
// default, or READ_WRITE) on the resource whose path is the rule's `entityName`: every record of it
// when `fullAccess`, else the records its `expression` matches (a Filtering's filter items, as
// JSON). What several rules grant adds up. The built-in roles (admin, editor, viewer) are not
// narrowed by rules: they keep their meaning.

import { z } from 'zod';
import type { ResourceDefinition, RuleContext } from '../resource/defineResource.ts';
import { validationFailed } from '../shared/errors.ts';
import { withinPeriod } from '../shared/fields.ts';
import { FilterItemSchema, toQuery, type Alternatives, type Condition } from '../shared/filtering.ts';
import type { JsonObject } from '../shared/json.ts';
import { matchesAny } from '../shared/matchQuery.ts';

/** The built-in roles: a token's role of one of these names is that role, never an access rule of
 * that code (api/auth.ts says what each grants). */
export const BUILT_IN_ROLES = ['admin', 'editor', 'viewer', 'auditor'] as const;
export type BuiltInRole = (typeof BUILT_IN_ROLES)[number];
export const isBuiltInRole = (role: string): role is BuiltInRole => (BUILT_IN_ROLES as readonly string[]).includes(role);
/** What each built-in role is for, as the roles catalogue (GET /api/v1/roles) says it. */
export const BUILT_IN_ROLE_MEANINGS: Readonly<Record<BuiltInRole, string>> = {
  admin: 'Everything: reads, writes, the admin-only acts (access rules, roles, group roles, read models) and the audit feed.',
  editor: 'Reads and writes every record; never narrowed by access rules.',
  viewer: 'Reads every record.',
  auditor: 'Reads every record, its history included, and the audit feed of the whole log.',
};

/** The built-in roles as a 422 names them beside a missing access rule. */
export const BUILT_IN_ROLE_NAMES = `a built-in role (${BUILT_IN_ROLES.join(', ')})`;

/** What a caller may reach of a resource: every record, or those some alternative matches
 * (none: nothing). */
export type Coverage = 'all' | Alternatives;

export type Access = { read: Coverage; write: Coverage };

export const NO_ACCESS: Access = { read: [], write: [] };
export const FULL_ACCESS: Access = { read: 'all', write: 'all' };

const ExpressionSchema = z.union([z.array(FilterItemSchema).max(100), z.strictObject({ filter: z.array(FilterItemSchema).max(100) })]);

/** The filter items of an expression, or the reasons it is not one (naming `expression`). */
function expressionItems(expression: string): { items: z.infer<typeof FilterItemSchema>[] } | { errors: string[] } {
  let json: unknown;
  try {
    json = JSON.parse(expression);
  } catch {
    return { errors: ['expression: not JSON; expected a Filtering ({ "filter": [ … ] }) or its filter items ([ … ])'] };
  }
  const parsed = ExpressionSchema.safeParse(json);
  if (!parsed.success) {
    return {
      errors: parsed.error.issues.slice(0, 10).map((i) => `expression${i.path.length > 0 ? `.${i.path.join('.')}` : ''}: ${i.message}`),
    };
  }
  return { items: Array.isArray(parsed.data) ? parsed.data : parsed.data.filter };
}

/** The conditions of an expression over a resource's columns; 400 naming the problem. */
export function expressionConditions(expression: string, def: ResourceDefinition): readonly Condition[] {
  const parsed = expressionItems(expression);
  if ('errors' in parsed) throw validationFailed("The access rule's expression is not a filter", parsed.errors);
  try {
    return toQuery({ filter: parsed.items, sort: [] }, def.columns, def.defaultSort).conditions;
  } catch (error) {
    const lines = error instanceof Error && 'errors' in error ? (error as { errors: readonly string[] }).errors : [String(error)];
    throw validationFailed(
      "The access rule's expression is not a filter",
      lines.map((l) => `expression: ${l}`),
    );
  }
}

/** The rule of an access rule record (a FieldRule): its expression parses as filter items, over
 * the columns of the resource its entityName names when this service serves it. */
export function expressionRule(fields: Record<string, unknown>, context: RuleContext): string[] {
  if (typeof fields.expression !== 'string') return [];
  const def = typeof fields.entityName === 'string' ? context.resourceAt?.(fields.entityName) : undefined;
  if (def === undefined) {
    const parsed = expressionItems(fields.expression);
    return 'errors' in parsed ? parsed.errors : [];
  }
  try {
    expressionConditions(fields.expression, def);
    return [];
  } catch (error) {
    return error instanceof Error && 'errors' in error
      ? [...(error as { errors: readonly string[] }).errors]
      : [`expression: ${String(error)}`];
  }
}

/** Whether an access rule applies now: inside validFor's window, and not marked invalid. */
export const isRuleValid = (rule: JsonObject, now: Date): boolean => {
  const validFor = (rule.validFor ?? {}) as JsonObject;
  return validFor.isValid !== false && withinPeriod(validFor.validFrom, validFor.validTo, now);
};

const union = (a: Coverage, b: Coverage): Coverage => (a === 'all' || b === 'all' ? 'all' : [...a, ...b]);

/** What some access rules (those a caller's roles name) grant on a resource now. A rule whose
 * expression no longer parses (its resource changed) grants nothing. */
export function accessFrom(rules: readonly JsonObject[], def: ResourceDefinition, now: Date): Access {
  let access: Access = NO_ACCESS;
  for (const rule of rules) {
    if (rule.entityName !== def.path || !isRuleValid(rule, now)) continue;
    let covered: Coverage = [];
    if (rule.fullAccess === true) covered = 'all';
    else if (typeof rule.expression === 'string') {
      try {
        covered = [expressionConditions(rule.expression, def)];
      } catch {
        covered = [];
      }
    }
    access = { read: union(access.read, covered), write: rule.accessRule === 'READ_WRITE' ? union(access.write, covered) : access.write };
  }
  return access;
}

export const covers = (coverage: Coverage, record: JsonObject): boolean => coverage === 'all' || matchesAny(record, coverage);
