// Operation logs (API.md's Logs table) on the shared operation set, with what logs do differently
// declared for it: a body that may name the log type by `logType` (its code or id) instead of
// `logTypeCode`, no id used again once the retention pass purged it, a log a deletion removed
// answering 404 (workers/deletions.ts), and replaces under the lock a deletion takes alone
// (api/deleteOldLogs.ts says why). Beside it, the logs of one owner.

import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { log } from '../domain/log.ts';
import { asReplace, assertNotDeleted } from '../workers/deletions.ts';
import { logType } from '../../registries/domain/logType.ts';
import { streamOf } from '../../../domain/resource/decider.ts';
import { keyedRecordId } from '../../../domain/resource/service.ts';
import { DomainError, isDomainError, referenceMissing, validationFailed } from '../../../domain/shared/errors.ts';
import { text } from '../../../domain/shared/fields.ts';
import { isUuid } from '../../../domain/shared/ids.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { readScope } from '../../../api/access.ts';
import { zodRoutes, type AppDeps, type ResourceRouteOptions } from '../../../api/module.ts';
import { eq, sendPageWhere } from '../../../api/readModelQuery.ts';
import { pagedNote, pagingQuery } from '../../../api/paging.ts';
import { position } from '../../../api/readModelWait.ts';
import { errors } from '../../../api/resourceRoutes.ts';

/** What create and replace accept: the log's fields with `logTypeCode` optional, since `logType`
 * (its code or id) may name the type instead. */
const logWrite = log.input
  .extend({ logTypeCode: text().optional() })
  .meta({ id: 'LogWrite', description: 'A log as written: `logTypeCode`, or `logType` with its `code` or `id`, names its log type.' });

/** The body with `logTypeCode` set from `logType` when only that names the type. */
async function withTypeCode(deps: AppDeps, body: JsonObject): Promise<JsonObject> {
  const named = body.logType as { code?: string; id?: string } | undefined;
  if (typeof body.logTypeCode === 'string') {
    if (named?.code !== undefined && named.code !== body.logTypeCode)
      throw validationFailed('logType and logTypeCode name different log types', [
        `logType.code: ${named.code} is not logTypeCode ${body.logTypeCode}`,
      ]);
    return body;
  }
  if (named?.code !== undefined) return { ...body, logTypeCode: named.code };
  if (named?.id === undefined)
    throw validationFailed('A log needs its log type', ['logTypeCode: required (or logType with its code or id)']);
  try {
    const found = await deps.runtime.service(logType).get(named.id);
    return { ...body, logTypeCode: String(found.code) };
  } catch (error) {
    if (isDomainError(error) && error.status === 'NOT_FOUND')
      throw referenceMissing(log.errorPrefix, [`logType.id: no log type ${named.id}`]);
    throw error;
  }
}

/** A log whose events the retention pass purged keeps its id: its stream is empty again, but the
 * logs' read model remembers the deletion, so a log made again under that id would be confirmed
 * and never shown (nor counted the same by a rebuild). Refused instead: ids are not used twice. */
async function refusePurgedId(deps: AppDeps, id: string | undefined): Promise<void> {
  if (id === undefined || !isUuid(id)) return;
  const stored = (await deps.readStore.getMany(deps.readModels.collectionOf(log.collection), [id])).get(id);
  if (stored?.doc !== null) return;
  if ((await deps.eventStore.readStream(streamOf(log, id), { limit: 1 })).length > 0) return;
  throw new DomainError(
    'LOG.ALREADY_EXISTS',
    `Log ${id} was deleted and its events purged by the retention pass: its id is not used again`,
    [`id: ${id} was a deleted log`],
  );
}

/** How logs are served by the shared operation set. */
export const logOperations: ResourceRouteOptions = {
  write: { body: logWrite, normalise: withTypeCode },
  create: {
    run: async (deps, input, ctx) => {
      const body = input as JsonObject;
      await refusePurgedId(
        deps,
        typeof body.id === 'string'
          ? body.id.toLowerCase()
          : ctx.idempotencyKey === undefined
            ? undefined
            : keyedRecordId(log, ctx.actor, ctx.idempotencyKey),
      );
      return deps.runtime.service(log).create(body, ctx);
    },
  },
  present: (deps, record, asOf) => assertNotDeleted(deps.runtime, record, asOf),
  aroundReplace: (deps, replace) => asReplace(deps.runtime, replace),
  docs: {
    create: {
      description: `${log.description} Honours \`Idempotency-Key\`; \`immediatelyRefresh=true\` waits until searches show it.`,
      errors: [413, 422],
    },
    replace: {
      description: 'A log a deletion removed is a 404. `If-Match` is honoured (412 when stale).',
      errors: [413, 422],
      param: 'id',
    },
    get: {
      summary: 'Get a Log',
      description:
        'Folded from the log: reflects every acknowledged write. A log a deletion removed is a 404. `asOf` answers the log as it was at that ' +
        'time (404 when it did not exist yet or a deletion made by then removed it; after the retention pass purged it, 404 at any time).',
      param: 'id',
    },
  },
};

/** GET /api/v1/logs/by-owner. */
export function logsByOwnerRoute(app: FastifyInstance, deps: AppDeps): void {
  zodRoutes(app).get(
    `/api/v1/${log.path}/by-owner`,
    {
      config: { permission: 'read', resource: log },
      schema: {
        tags: [log.path],
        summary: 'Logs of one owner',
        description: `Served by the read model (\`minPosition\` waits for a write). ${pagedNote('oldest startDate first')}`,
        querystring: z.strictObject({ ownerType: text(), ownerId: text(), minPosition: position.optional(), ...pagingQuery }),
        response: { 200: z.array(log.record), ...errors(400, 503) },
      },
    },
    async (request, reply) =>
      sendPageWhere(request, reply, deps, log, [eq('ownerType', request.query.ownerType), eq('ownerId', request.query.ownerId)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, log),
        paging: request.query,
      }),
  );
}
