// Sharing: the shared operation set, and its three queries of API.md's Sharing table, served by
// its read model (they honour minPosition like every search).

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { sharing } from '../domain/sharing.ts';
import type { FilterItem } from '../../../domain/shared/filtering.ts';
import { pagedNote, pagingQuery, repostNote, type Paging } from '../../../api/paging.ts';
import type { AppDeps } from '../../../api/module.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { position } from '../../../api/readModelWait.ts';
import { sendPageWhere } from '../../../api/readModelQuery.ts';
import { readScope } from '../../../api/access.ts';

const value = () => z.string().min(1).max(255);
const tags = [sharing.path];
const base = `/api/v1/${sharing.path}`;
const described = `Served by the read model (\`minPosition\` waits for a write). ${pagedNote('oldest first')}`;

async function answer(
  deps: AppDeps,
  request: FastifyRequest & { query: Paging },
  reply: FastifyReply,
  filter: FilterItem[],
  minPosition: string | undefined,
): Promise<FastifyReply> {
  return sendPageWhere(request, reply, deps, sharing, filter, {
    minPosition,
    within: await readScope(deps, request, sharing),
    paging: request.query,
  });
}

const eq = (column: string, v: string): FilterItem => ({ column, operator: 'EQ', value: v });

/** The sharings' routes beside the shared operation set. */
export function sharingRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  const list = { 200: z.array(sharing.record), ...errors(400, 503) };

  r.get(
    `${base}/by-ref`,
    {
      config: { permission: 'read', resource: sharing },
      schema: {
        tags,
        summary: 'Sharings of an owner type with one referenced entity',
        description: described,
        querystring: z.strictObject({
          ownerType: value(),
          refType: value(),
          refId: value(),
          minPosition: position.optional(),
          ...pagingQuery,
        }),
        response: list,
      },
    },
    async (request, reply) => {
      return answer(
        deps,
        request,
        reply,
        [eq('ownerType', request.query.ownerType), eq('refType', request.query.refType), eq('refId', request.query.refId)],
        request.query.minPosition,
      );
    },
  );

  r.get(
    `${base}/by-owner`,
    {
      config: { permission: 'read', resource: sharing },
      schema: {
        tags,
        summary: 'Sharings of one owner',
        description: described,
        querystring: z.strictObject({ ownerType: value(), ownerId: value(), minPosition: position.optional(), ...pagingQuery }),
        response: list,
      },
    },
    async (request, reply) => {
      return answer(
        deps,
        request,
        reply,
        [eq('ownerType', request.query.ownerType), eq('ownerId', request.query.ownerId)],
        request.query.minPosition,
      );
    },
  );

  r.post(
    `${base}/by-refs`,
    {
      config: { permission: 'read', resource: sharing },
      schema: {
        tags,
        summary: 'Sharings of an owner type with any of some referenced entities, of one sub type when given',
        description: `${described} ${repostNote} \`subType\` matches \`sharingTypeCode\`; without it, sharings of every sub type.`,
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        body: z.strictObject({ ownerType: value(), subType: value().optional(), refIds: z.array(value()).min(1).max(1000) }),
        response: list,
      },
    },
    async (request, reply) => {
      const { ownerType, subType, refIds } = request.body;
      const filter: FilterItem[] = [eq('ownerType', ownerType), { column: 'refId', operator: 'IN', values: refIds }];
      if (subType !== undefined) filter.push(eq('sharingTypeCode', subType));
      return answer(deps, request, reply, filter, request.query.minPosition);
    },
  );
}
