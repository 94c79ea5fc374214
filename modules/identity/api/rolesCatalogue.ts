// The roles catalogue (GET /api/v1/roles): what a user's `roles` and a group's
// `associatedUserRoleId` may name. The built-in roles first (what each grants), then every access
// rule as a role by its code, with its id (a group names it by id), in code order. Served here, by
// identity, which grants roles (users, groups, effective roles); the rules are read from their read
// model as access rules are, by whoever may read access rules, narrowed as their reads are.

import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { accessRule, AccessLevels } from '../../../domain/access/accessRule.ts';
import { BUILT_IN_ROLES, BUILT_IN_ROLE_MEANINGS, isBuiltInRole, isRuleValid } from '../../../domain/access/coverage.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { readScope } from '../../../api/access.ts';
import { Permissions, permissionsOf } from '../../../api/auth.ts';
import { documentsOf, sendItems } from '../../../api/documentStream.ts';
import { zodRoutes, type AppDeps } from '../../../api/module.ts';
import { pageWhere } from '../../../api/readModelQuery.ts';
import { linkNext, pagedNote, pagingQuery } from '../../../api/paging.ts';
import { position } from '../../../api/readModelWait.ts';
import { errors } from '../../../api/resourceRoutes.ts';

const RoleSchema = z
  .object({
    code: z.string().meta({ description: "the name a user's `roles` holds, and a token's `roles` claim carries" }),
    kind: z.enum(['BUILT_IN', 'ACCESS_RULE']),
    id: z.uuid().optional().meta({ description: "ACCESS_RULE: the rule's id, which a group's associatedUserRoleId names" }),
    name: z.string().optional().meta({ description: "ACCESS_RULE: the rule's name" }),
    description: z.string().optional(),
    permissions: z.array(z.enum(Permissions)).optional().meta({ description: 'BUILT_IN: what it grants on every record and route' }),
    entityName: z.string().optional().meta({ description: 'ACCESS_RULE: the path of the resource whose records it covers' }),
    accessRule: z.enum(AccessLevels).optional().meta({ description: 'ACCESS_RULE: READ or READ_WRITE' }),
    fullAccess: z.boolean().optional().meta({ description: 'ACCESS_RULE: every record of the resource, not those its expression matches' }),
    validNow: z.boolean().optional().meta({ description: 'ACCESS_RULE: whether it applies now (validFor)' }),
  })
  .meta({ id: 'Role' });
type Role = z.infer<typeof RoleSchema>;

const builtInRoles = (): Role[] =>
  BUILT_IN_ROLES.map((code) => ({
    code,
    kind: 'BUILT_IN',
    description: BUILT_IN_ROLE_MEANINGS[code],
    permissions: [...permissionsOf(code)],
  }));

const ruleRole = (rule: JsonObject, now: Date): Role => ({
  code: String(rule.code),
  kind: 'ACCESS_RULE',
  id: String(rule.id),
  name: String(rule.name),
  ...(typeof rule.description === 'string' ? { description: rule.description } : {}),
  ...(typeof rule.entityName === 'string' ? { entityName: rule.entityName } : {}),
  accessRule: rule.accessRule === 'READ_WRITE' ? 'READ_WRITE' : 'READ',
  fullAccess: rule.fullAccess === true,
  validNow: isRuleValid(rule, now),
});

export function rolesCatalogueRoute(app: FastifyInstance, deps: AppDeps): void {
  zodRoutes(app).get(
    '/api/v1/roles',
    {
      config: { permission: 'read', resource: accessRule },
      schema: {
        tags: ['roles'],
        summary: 'The roles that can be granted: the built-in roles, then each access rule by its code',
        description:
          "What a user's `roles` may hold (a built-in role's code or an access rule's code: 422 otherwise) and a group's " +
          "`associatedUserRoleId` may name (an access rule's id). Built-in roles first, in their fixed order, then the access rules in code order, " +
          'from their read model (`minPosition` waits for a write). Readable by whoever may read access rules; a caller whose reads of them ' +
          'are narrowed by access rules sees the built-in roles and the rules it may read. An access rule a user holds cannot be deleted or ' +
          'renamed (409 ACCESS_RULE.STILL_REFERENCED), nor one a group names deleted. ' +
          pagedNote('of access rules, by code') +
          ' The built-in roles come first on the first page, beside its `limit` rules.',
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        response: { 200: z.array(RoleSchema), ...errors(400, 503) },
      },
    },
    async (request, reply) => {
      const within = await readScope(deps, request, accessRule);
      const now = deps.clock.now();
      // A rule stored under a built-in role's name (refused since) is never that role: left out.
      const { collection, ids, next } = await pageWhere(deps, accessRule, [], {
        minPosition: request.query.minPosition,
        within,
        paging: request.query,
        order: 'code',
        keep: (rule) => typeof rule.code === 'string' && !isBuiltInRole(rule.code),
      });
      linkNext(request, reply, next);
      async function* roles(): AsyncGenerator<Role> {
        if (request.query.cursor === undefined) yield* builtInRoles();
        for await (const rule of documentsOf(deps.readStore, collection, ids)) yield ruleRole(rule, now);
      }
      return sendItems(reply, roles());
    },
  );
}
