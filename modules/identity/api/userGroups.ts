// User groups: the shared operation set, and the rows of API.md's User groups table: expanded
// forms (by codes, by directory membership), groups of users, search by a characteristic,
// built-in convertors and scripts, and the users of a group. Records named by code or id are
// read from the log; lists from the read models (they honour minPosition).

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { isActiveUser, user } from '../domain/user.ts';
import { userGroup } from '../domain/userGroup.ts';
import type { Document } from '../../../domain/ports.ts';
import { userGroupType } from '../../registries/domain/userGroupType.ts';
import { notFound, validationFailed } from '../../../domain/shared/errors.ts';
import { uuid, withinPeriod } from '../../../domain/shared/fields.ts';
import { isUuid } from '../../../domain/shared/ids.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { assertReadable, readable, readScope, writable } from '../../../api/access.ts';
import { sendItems } from '../../../api/documentStream.ts';
import { zodRoutes, type AppDeps, type ZodRoutes } from '../../../api/module.ts';
import { eq, isIn, recordsWhere, sendPageWhere, type QueryOptions } from '../../../api/readModelQuery.ts';
import { DEFAULT_LIMIT, linkNext, MAX_LIMIT, pagedNote, pagingQuery, repostNote } from '../../../api/paging.ts';
import { position } from '../../../api/readModelWait.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { idOrCode } from '../../../api/schemas.ts';
import { groupsOfUsers } from './memberships.ts';

const tags = [userGroup.path];
const base = `/api/v1/${userGroup.path}`;
const read = { permission: 'read', resource: userGroup } as const;
const MAX_KEYS = 1000;
/** Most groups a script walks (a subtree). */
const MAX_TREE = 10_000;

const freeMap = z.record(z.string(), z.unknown());

/** The audit fields as the expanded forms carry them: beside the record's own, not in auditInfo. */
const flatAudit = { version: z.int(), whoInserted: z.string(), whenInserted: z.string(), whenEdited: z.string(), whoEdited: z.string() };

/** The expanded form of a user group type (SPEC.md): audit fields flattened, `valid` as text. */
const expandedTypeSchema = z
  .object({
    code: z.string(),
    name: z.string(),
    id: z.string(),
    readonlyAccess: z.boolean(),
    ...flatAudit,
    description: z.string().optional(),
    validityFrom: z.string().optional(),
    validityTo: z.string().optional(),
    valid: z.enum(['true', 'false']).meta({ description: '"true" while now is inside validityFrom..validityTo' }),
    localizationData: freeMap.meta({ description: '`empty` (boolean) plus each language code mapped to its name and description' }),
    userGroupSpecId: z.string().optional(),
    registry: freeMap,
  })
  .meta({ id: 'UserGroupTypeExpanded' });

const expandedGroupSchema = z
  .object({
    name: z.string(),
    code: z.string(),
    id: z.string(),
    readonlyAccess: z.boolean().meta({ description: 'true when the caller may not change this group' }),
    ...flatAudit,
    description: z.string().optional(),
    ldapMemberOf: z.string().optional(),
    period: z.object({
      validFrom: z.string().optional(),
      validTo: z.string().optional(),
      isValid: z.boolean().meta({ description: 'computed when read' }),
    }),
    chars: freeMap.meta({ description: '`empty` (boolean) plus the characteristics' }),
    userGroupType: expandedTypeSchema.optional(),
    parentUserGroupId: z.string().optional(),
    dataTags: z.array(z.string()).optional(),
    email: z.string().optional(),
    phoneNumber: z.string().optional(),
    associatedUserRoleId: z.string().optional(),
  })
  .meta({ id: 'UserGroupExpanded' });

type Audit = { version: number; whoInserted: string; whenInserted: string; whoEdited: string; whenEdited: string };
const defined = (o: Record<string, unknown>): JsonObject => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));

function expandedType(t: JsonObject, readonlyAccess: boolean, now: Date): JsonObject {
  const { auditInfo, localizationData, ...fields } = t as JsonObject & { auditInfo: Audit };
  const languages = (localizationData as JsonObject | undefined) ?? {};
  return defined({
    ...fields,
    readonlyAccess,
    ...auditInfo,
    valid: String(withinPeriod(t.validityFrom, t.validityTo, now)),
    localizationData: { empty: Object.keys(languages).length === 0, ...languages },
    registry: fields.registry ?? {},
  });
}

/** A group in its expanded form (SPEC.md "User group expanded form"), computed now. */
async function expandedGroup(deps: AppDeps, group: JsonObject, request: FastifyRequest): Promise<z.infer<typeof expandedGroupSchema>> {
  const now = deps.clock.now();
  const readonlyAccess = !(await writable(deps, request, userGroup, group));
  const { auditInfo, validFrom, validTo, chars, type, ...fields } = group as JsonObject & { auditInfo: Audit; chars: JsonObject };
  const typeRecord = await deps.runtime
    .service(userGroupType)
    .getByCode(String(type))
    .catch(() => undefined);
  // The type is embedded only for a caller who may read user group types.
  const groupType = typeRecord !== undefined && (await readable(deps, request, userGroupType, typeRecord)) ? typeRecord : undefined;
  return expandedGroupSchema.parse(
    defined({
      ...fields,
      readonlyAccess,
      ...auditInfo,
      period: defined({ validFrom, validTo, isValid: withinPeriod(validFrom, validTo, now) }),
      chars: { ...chars, empty: Object.keys(chars).length === 0 },
      userGroupType:
        groupType === undefined ? undefined : expandedType(groupType, !(await writable(deps, request, userGroupType, groupType)), now),
    }),
  );
}

/** A dotted path below `chars`: letters, digits, `_` and `-` per segment; never more. */
const charsPath = z
  .string()
  .max(255)
  .regex(/^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,15}$/, {
    error: 'expected dotted segments of letters, digits, _ and - (e.g. region.code)',
  });

export const Convertors = ['CODE_TO_NAME', 'CODE_TO_ID', 'ID_TO_CODE', 'LDAP_TO_CODE'] as const;
export const Scripts = ['HIERARCHY', 'EFFECTIVE_MEMBERS'] as const;

/** One key through a convertor, from the log; undefined when no live group has it. */
async function convert(
  deps: AppDeps,
  convertor: (typeof Convertors)[number],
  key: string,
  visible: (group: JsonObject) => Promise<boolean>,
): Promise<string | undefined> {
  const groups = deps.runtime.service(userGroup);
  const ldapKey = userGroup.unique.find((k) => k.name === 'ldapMemberOf');
  const found = await (async () => {
    switch (convertor) {
      case 'CODE_TO_NAME':
      case 'CODE_TO_ID':
        return groups.getByCode(key);
      case 'ID_TO_CODE':
        return isUuid(key) ? groups.get(key) : undefined;
      case 'LDAP_TO_CODE':
        return ldapKey === undefined ? undefined : groups.getByKey(ldapKey, { ldapMemberOf: key });
    }
  })().catch(() => undefined);
  if (found === undefined || !(await visible(found))) return undefined;
  return String(convertor === 'CODE_TO_NAME' ? found.name : convertor === 'CODE_TO_ID' ? found.id : found.code);
}

/** The groups of a subtree, breadth first, from the read model. */
async function subtree(deps: AppDeps, root: JsonObject & { id: string }, options: QueryOptions): Promise<Document[]> {
  const all: Document[] = [root];
  // Visited groups are not walked again: a cycle (which writes prevent) cannot loop the walk.
  const seen = new Set([root.id]);
  for (let level = [root.id]; level.length > 0 && all.length <= MAX_TREE;) {
    const children = (await recordsWhere(deps, userGroup, [isIn('parentUserGroupId', level)], { ...options, limit: MAX_TREE + 1 })).filter(
      (c) => !seen.has(c.id),
    );
    for (const c of children) seen.add(c.id);
    all.push(...children);
    level = children.map((c) => c.id);
  }
  if (all.length > MAX_TREE)
    throw validationFailed(`The subtree has more than ${String(MAX_TREE)} groups`, ['scriptCode: the subtree is too large for a script']);
  return all;
}

type TreeNode = { id: string; code: unknown; name: unknown; children: TreeNode[] };

function treeOf(groups: readonly Document[], rootId: string): TreeNode {
  const children = new Map<string, Document[]>();
  for (const g of groups) {
    const parent = typeof g.parentUserGroupId === 'string' ? g.parentUserGroupId : '';
    children.set(parent, [...(children.get(parent) ?? []), g]);
  }
  const placed = new Set<string>();
  const node = (g: Document): TreeNode => {
    placed.add(g.id);
    return { id: g.id, code: g.code, name: g.name, children: (children.get(g.id) ?? []).filter((c) => !placed.has(c.id)).map(node) };
  };
  const root = groups.find((g) => g.id === rootId);
  if (root === undefined) throw new Error('subtree without its root');
  return node(root);
}

const scriptBody = z.strictObject({
  group: z.string().min(1).max(255).meta({ description: 'id or code of the group the script starts from' }),
  minPosition: position.optional(),
});

/** Groups in their expanded form: by codes, by directory membership. */
function expandedRoutes(r: ZodRoutes, deps: AppDeps): void {
  const groups = deps.runtime.service(userGroup);
  r.post(
    `${base}/by-codes`,
    {
      config: read,
      schema: {
        tags,
        summary: 'User groups by codes, in their expanded form (unknown codes left out)',
        description:
          'Read from the log: reflects every acknowledged write. `period.isValid`, `userGroupType.valid` and `readonlyAccess` are computed when read.',
        body: z.array(z.string().min(1).max(255)).max(MAX_KEYS),
        response: { 200: z.array(expandedGroupSchema), ...errors(400) },
      },
    },
    async (request, reply) => {
      const codes = [...new Set(request.body)];
      async function* expanded(): AsyncGenerator<JsonObject> {
        for (const c of codes) {
          const found = await groups.getByCode(c).catch(() => undefined);
          if (found !== undefined && (await readable(deps, request, userGroup, found))) yield await expandedGroup(deps, found, request);
        }
      }
      return sendItems(reply, expanded());
    },
  );

  r.get(
    `${base}/by-ldap`,
    {
      config: read,
      schema: {
        tags,
        summary: 'The user group backed by a directory group, in its expanded form',
        description: 'The DN is compared normalised (case-insensitive, spaces around `,` and `=` ignored). 404 when no group has it.',
        querystring: z.strictObject({ ldapMemberOf: z.string().min(1).max(1000) }),
        response: { 200: expandedGroupSchema, ...errors(400, 404) },
      },
    },
    async (request, reply) => {
      const key = userGroup.unique.find((k) => k.name === 'ldapMemberOf');
      if (key === undefined) throw new Error('UserGroup has no ldapMemberOf key');
      const found = await assertReadable(
        deps,
        request,
        userGroup,
        await groups.getByKey(key, { ldapMemberOf: request.query.ldapMemberOf }),
      );
      return reply.send(await expandedGroup(deps, found, request));
    },
  );
}

/** Groups of users, by a characteristic. */
function queryRoutes(r: ZodRoutes, deps: AppDeps): void {
  r.post(
    `${base}/by-users`,
    {
      config: read,
      schema: {
        tags,
        summary: 'The groups of several users: { userId: [group] }',
        description:
          'Users unknown here map to an empty list. Groups come from the read model (`minPosition` waits for a write). ' +
          `Paged by (user, group) pairs: \`limit\` pairs (default ${String(DEFAULT_LIMIT)}, at most ${String(MAX_LIMIT)}), in the order of \`userIds\`, ` +
          "each user's groups by code; a user's list may go on in the next page, whose map then names it again (append its lists). " +
          `When more follow, \`Link: <…>; rel="next"\` names the next page. ${repostNote}`,
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        body: z.strictObject({ userIds: z.array(uuid()).min(1).max(MAX_KEYS) }),
        response: { 200: z.record(z.string(), z.array(userGroup.record)), ...errors(400, 503) },
      },
    },
    async (request, reply) => {
      const { answer, next } = await groupsOfUsers(deps, request, request.body.userIds, {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, userGroup),
        paging: request.query,
      });
      linkNext(request, reply, next);
      return answer;
    },
  );

  r.get(
    `${base}/by-chars`,
    {
      config: read,
      schema: {
        tags,
        summary: 'User groups whose characteristic at a path equals a value',
        description:
          '`path` is a dotted path below `chars` (segments of letters, digits, `_`, `-`; 400 otherwise), compared as the read model compares a free-form ' +
          `value: equal text, or an equal number or boolean. ${pagedNote('by code')}`,
        querystring: z.strictObject({ path: charsPath, value: z.string().max(1000), minPosition: position.optional(), ...pagingQuery }),
        response: { 200: z.array(userGroup.record), ...errors(400, 503) },
      },
    },
    async (request, reply) =>
      sendPageWhere(request, reply, deps, userGroup, [eq(`chars.${request.query.path}`, request.query.value)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, userGroup),
        paging: request.query,
      }),
  );
}

/** Built-in convertors and read-only scripts. */
function convertRoutes(r: ZodRoutes, deps: AppDeps): void {
  const groups = deps.runtime.service(userGroup);
  r.post(
    `${base}/convert/:convertorCode`,
    {
      config: read,
      schema: {
        tags,
        summary: 'Convert keys with a built-in convertor',
        description:
          'Convertors: CODE_TO_NAME (group code → name), CODE_TO_ID (code → id), ID_TO_CODE (id → code), LDAP_TO_CODE (directory DN, compared normalised, → code). ' +
          'Keys no live group has are left out of the answer. `params` and `tqlParams` are accepted and unused by these convertors. Unknown convertor: 404. Read from the log.',
        params: z.strictObject({ convertorCode: z.string().max(255) }),
        body: z.strictObject({
          keys: z.array(z.strictObject({ key: z.string().max(1000) })).max(MAX_KEYS),
          params: freeMap.optional(),
          tqlParams: freeMap.optional(),
        }),
        response: { 200: z.record(z.string(), z.string()), ...errors(400, 404) },
      },
    },
    async (request) => {
      const convertor = Convertors.find((c) => c === request.params.convertorCode);
      if (convertor === undefined) throw notFound('USER_GROUP.CONVERTOR', request.params.convertorCode);
      const answer = new Map<string, string>();
      for (const { key } of request.body.keys) {
        const value = answer.has(key) ? undefined : await convert(deps, convertor, key, (g) => readable(deps, request, userGroup, g));
        if (value !== undefined) answer.set(key, value);
      }
      return Object.fromEntries(answer);
    },
  );

  r.post(
    `${base}/scripts/:scriptCode`,
    {
      config: read,
      schema: {
        tags,
        summary: 'Run a built-in, read-only script',
        description:
          'Scripts: HIERARCHY (`{ group }` → `{ root }`: the group and its descendants as a tree of `{ id, code, name, children }`), ' +
          'EFFECTIVE_MEMBERS (`{ group }` → `{ users }`: the users of the group and of all its descendants, each once). `group` is an id or a code. ' +
          'No code sent by a client is ever evaluated. Unknown script: 404. At most 10000 groups.',
        params: z.strictObject({ scriptCode: z.string().max(255) }),
        body: scriptBody,
        response: { 200: freeMap, ...errors(400, 404, 503) },
      },
    },
    async (request) => {
      const script = Scripts.find((s) => s === request.params.scriptCode);
      if (script === undefined) throw notFound('USER_GROUP.SCRIPT', request.params.scriptCode);
      const root = await assertReadable(deps, request, userGroup, await groups.get(request.body.group));
      const tree = await subtree(deps, root, { minPosition: request.body.minPosition, within: await readScope(deps, request, userGroup) });
      if (script === 'HIERARCHY') return { root: treeOf(tree, root.id) };
      const users = await recordsWhere(
        deps,
        user,
        [
          isIn(
            'groups',
            tree.map((g) => String(g.code)),
          ),
        ],
        { limit: 10_000, within: await readScope(deps, request, user) },
      );
      return { users };
    },
  );
}

/** The users of a group, and its valid users. */
function memberRoutes(r: ZodRoutes, deps: AppDeps): void {
  const groups = deps.runtime.service(userGroup);
  for (const valid of [false, true]) {
    r.get(
      `${base}/:idOrCode/users${valid ? '/valid' : ''}`,
      {
        config: { permission: 'read', resource: user },
        schema: {
          tags,
          summary: valid ? 'The valid users of a group: ENABLE, and now inside their validity window' : 'The users of a group',
          description: `The group is read from the log; its users from the read model (\`minPosition\` waits for a write). ${pagedNote('by code')}`,
          params: z.strictObject({ idOrCode: idOrCode() }),
          querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
          response: { 200: z.array(user.record), ...errors(400, 404, 503) },
        },
      },
      async (request, reply) => {
        // The group is another resource: a caller who may not read it learns nothing of it (404).
        const group = await assertReadable(deps, request, userGroup, await groups.get(request.params.idOrCode));
        const filter = [eq('groups', String(group.code)), ...(valid ? [eq('status', 'ENABLE')] : [])];
        const now = deps.clock.now();
        return sendPageWhere(request, reply, deps, user, filter, {
          minPosition: request.query.minPosition,
          within: await readScope(deps, request, user),
          paging: request.query,
          ...(valid ? { keep: (m: JsonObject) => isActiveUser(m, now) } : {}),
        });
      },
    );
  }
}

/** The groups' routes beside the shared operation set. */
export function userGroupsRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = zodRoutes(app);
  expandedRoutes(r, deps);
  queryRoutes(r, deps);
  convertRoutes(r, deps);
  memberRoutes(r, deps);
}
