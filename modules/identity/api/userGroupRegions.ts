// User group regions: assign (the shared create, with its (group, region) key), unassign (the
// shared delete), history; and the reads of API.md's table, each assignment with its group as it
// is now (`userGroup`), joined when read: from the log for one group, from the groups' read model
// for the list of all.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { userGroup } from '../domain/userGroup.ts';
import { userGroupRegion } from '../domain/userGroupRegion.ts';
import type { Document } from '../../../domain/ports.ts';
import { notFound } from '../../../domain/shared/errors.ts';
import { uuid } from '../../../domain/shared/fields.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { documentsOf, sendItems } from '../../../api/documentStream.ts';
import { linkNext, pagedNote, pagingQuery } from '../../../api/paging.ts';
import { zodRoutes, type AppDeps, type ResourceRouteOptions, type ZodRoutes } from '../../../api/module.ts';
import { eq, pageWhere, type PageOptions } from '../../../api/readModelQuery.ts';
import { assertReadable, readable, readScope } from '../../../api/access.ts';
import { catchUpTo, position } from '../../../api/readModelWait.ts';
import { sendRecord } from '../../../api/replies.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { idOrCode } from '../../../api/schemas.ts';

const read = { permission: 'read', resource: userGroupRegion } as const;
/** Assignments read together with their groups. */
const BATCH = 100;
const groupTags = [userGroup.path, userGroupRegion.path];
const readModelNote = `The group is read from the log; its assignments from the read model (\`minPosition\` waits for a write). ${pagedNote('oldest first')}`;
const list = () => ({ 200: z.array(userGroupRegion.record), ...errors(400, 404, 503) });

/** One page of the assignments of one group (read from the log), each with the group. */
async function ofGroup(
  deps: AppDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  idOrCode: string,
  byCode: boolean,
  options: PageOptions,
): Promise<FastifyReply> {
  const groups = deps.runtime.service(userGroup);
  // The group is another resource: a caller who may not read it learns nothing of it (404).
  const group = await assertReadable(deps, request, userGroup, byCode ? await groups.getByCode(idOrCode) : await groups.get(idOrCode));
  const { collection, ids, next } = await pageWhere(deps, userGroupRegion, [eq('userGroupId', group.id)], options);
  const embedded = await embedding(deps, request, group);
  linkNext(request, reply, next);
  async function* withGroup(): AsyncGenerator<JsonObject> {
    for await (const a of documentsOf(deps.readStore, collection, ids)) yield { ...a, ...embedded };
  }
  return sendItems(reply, withGroup());
}

/** The group to embed in an assignment: only for a caller who may read it. */
async function embedding(
  deps: AppDeps,
  request: FastifyRequest,
  group: JsonObject | null | undefined,
): Promise<{ userGroup?: JsonObject }> {
  return group !== undefined && group !== null && (await readable(deps, request, userGroup, group)) ? { userGroup: group } : {};
}

/** How user group regions are served by the shared operation set: a get with the group as it is
 * now (read from the log). */
export const userGroupRegionOperations: ResourceRouteOptions = {
  // The list of all joins the groups' read model a page at a time (below).
  except: ['list'],
  get: {
    query: {},
    response: userGroupRegion.record,
    expand: () => async (deps, request, found) => {
      const group = await deps.runtime
        .service(userGroup)
        .get(String(found.userGroupId))
        .catch(() => undefined);
      return { ...found, ...(await embedding(deps, request, group)) };
    },
  },
  docs: { get: { summary: 'A user group region, with its group as it is now' } },
};

/** All assignments. */
function listRoute(r: ZodRoutes, deps: AppDeps): void {
  r.get(
    `/api/v1/${userGroupRegion.path}`,
    {
      config: read,
      schema: {
        tags: [userGroupRegion.path],
        summary: 'All user group regions, each with its group as it is now',
        description: `From the read models of assignments and groups (\`minPosition\` waits for a write to both). ${pagedNote('in id order')}`,
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        response: list(),
      },
    },
    async (request, reply) => {
      await catchUpTo(deps, userGroup.collection, request.query.minPosition);
      const { collection, ids, next } = await pageWhere(deps, userGroupRegion, [], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, userGroupRegion),
        paging: request.query,
        order: 'id',
      });
      linkNext(request, reply, next);
      // Each batch of assignments with their groups, read together.
      async function* all(): AsyncGenerator<Document> {
        for (let i = 0; i < ids.length; i += BATCH) {
          const batch = ids.slice(i, i + BATCH);
          const read = await deps.readStore.getMany(collection, batch);
          const assignments = batch.flatMap((id) => read.get(id)?.doc ?? []);
          const groupIds = [...new Set(assignments.map((a) => String(a.userGroupId)))];
          const found = await deps.readStore.getMany(deps.readModels.collectionOf(userGroup.collection), groupIds);
          for (const a of assignments) yield { ...a, ...(await embedding(deps, request, found.get(String(a.userGroupId))?.doc)) };
        }
      }
      return sendItems(reply, all());
    },
  );
}

/** The assignments of one group. */
function groupRoutes(r: ZodRoutes, deps: AppDeps): void {
  const assignments = deps.runtime.service(userGroupRegion);
  const groups = deps.runtime.service(userGroup);
  r.get(
    '/api/v1/user-groups/:groupId/regions',
    {
      config: read,
      schema: {
        tags: groupTags,
        summary: 'The region assignments of a group (by id or code)',
        description: readModelNote,
        params: z.strictObject({ groupId: idOrCode() }),
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        response: list(),
      },
    },
    async (request, reply) =>
      ofGroup(deps, request, reply, request.params.groupId, false, {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, userGroupRegion),
        paging: request.query,
      }),
  );

  r.get(
    '/api/v1/user-groups/by-code/:groupCode/regions',
    {
      config: read,
      schema: {
        tags: groupTags,
        summary: 'The region assignments of a group by its code',
        description: readModelNote,
        params: z.strictObject({ groupCode: z.string().min(1).max(255) }),
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        response: list(),
      },
    },
    async (request, reply) =>
      ofGroup(deps, request, reply, request.params.groupCode, true, {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, userGroupRegion),
        paging: request.query,
      }),
  );

  r.get(
    '/api/v1/user-groups/:groupId/regions/:regionId',
    {
      config: read,
      schema: {
        tags: groupTags,
        summary: 'The assignment of one region to a group (404 when none)',
        description: "Read from the log (the pair's reservation): reflects every acknowledged write.",
        params: z.strictObject({ groupId: idOrCode(), regionId: uuid() }),
        response: { 200: userGroupRegion.record, ...errors(400, 404) },
      },
    },
    async (request, reply) => {
      const group = await assertReadable(deps, request, userGroup, await groups.get(request.params.groupId));
      const key = userGroupRegion.unique[0];
      if (key === undefined) throw new Error('UserGroupRegion has no (group, region) key');
      const found = await assignments.getByKey(key, { userGroupId: group.id, regionId: request.params.regionId }).catch(() => {
        throw notFound('USER_GROUP_REGION', `${group.id}/${request.params.regionId}`);
      });
      await assertReadable(deps, request, userGroupRegion, found);
      return sendRecord(reply, found, { ...found, ...(await embedding(deps, request, group)) });
    },
  );
}

/** The assignments' routes beside the shared operation set. */
export function userGroupRegionsRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = zodRoutes(app);
  listRoute(r, deps);
  groupRoutes(r, deps);
}
