// "Delete old logs" (admin only): one LogDeletion record whatever the number of logs it removes;
// the logs' projection folds it (projections/logs.ts), and the retention schedule later purges the
// deleted logs' events (workers/retention.ts).
//
// A deletion counts the logs it removes against the read model caught up with the log's head, and
// the projection deletes those that match and were last written at or before that position. A
// replace of a log between the count and the deletion's append would make the two differ, so in
// this process replaces share a lock the deletion takes alone (workers/deletions.ts; creates need
// none: a log created after the position is never deleted). Across API processes the lock does not
// reach: there `deleted` may count a log replaced in that window, which then stays.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { deletionFilter, log, logDeletion, type DeletionFilter } from '../domain/log.ts';
import { sameFilter } from '../domain/deletions.ts';
import { asDeletion } from '../workers/deletions.ts';
import { turn } from '../workers/retention.ts';
import type { BlobRef, BlobStore, Position, ReadStore } from '../../../domain/ports.ts';
import { keyedRecordId } from '../../../domain/resource/service.ts';
import { idempotencyKeyReused, isDomainError } from '../../../domain/shared/errors.ts';
import { dateTime, text } from '../../../domain/shared/fields.ts';
import { toQuery } from '../../../domain/shared/filtering.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { writeContext } from '../../../api/access.ts';
import { zodRoutes, type AppDeps } from '../../../api/module.ts';
import { waitForReadModelAt } from '../../../api/readModelWait.ts';
import { eventPosition } from '../../../api/replies.ts';
import { errors } from '../../../api/resourceRoutes.ts';

/** Ids per blob of a deletion's list (36 bytes and a separator each: under 4 MiB a blob). */
const IDS_PER_BLOB = 100_000;
/** Documents handled per read. */
const PAGE = 5000;
/** Ids of a selection read per query: large, since each page past the first re-reads the ones before (offset). */
const ID_PAGE = 50_000;
const DELETION_WAIT_MS = 5000;

/** The ids of the live logs a deletion at `upTo` removes: matching, last written at or before it. */
async function idsToDelete(reads: ReadStore, collection: string, filter: DeletionFilter, upTo: Position): Promise<string[]> {
  const query = toQuery({ filter: deletionFilter(filter), sort: [] }, log.columns, log.defaultSort);
  const matching: string[] = [];
  for (let offset = 0; ; offset += ID_PAGE) {
    const page = await reads.findIds(collection, query, { offset, limit: ID_PAGE });
    matching.push(...page);
    if (page.length < ID_PAGE) break;
  }
  const kept: string[] = [];
  for (let i = 0; i < matching.length; i += PAGE) {
    const stored = await reads.getMany(collection, matching.slice(i, i + PAGE));
    for (const [id, s] of stored) if (s.doc !== null && (s.position ?? 0n) <= upTo) kept.push(id);
    await turn();
  }
  return kept;
}

async function idBlobs(blobs: BlobStore, ids: readonly string[]): Promise<BlobRef[]> {
  const refs: BlobRef[] = [];
  for (let i = 0; i < ids.length; i += IDS_PER_BLOB) {
    refs.push(await blobs.put(new TextEncoder().encode(JSON.stringify(ids.slice(i, i + IDS_PER_BLOB))), 'application/json'));
  }
  return refs;
}

/** An earlier deletion under the same Idempotency-Key: its answer again (409 for another filter). */
async function earlierDeletion(
  deps: AppDeps,
  actor: string,
  key: string | undefined,
  filter: DeletionFilter,
): Promise<JsonObject | undefined> {
  if (key === undefined) return undefined;
  try {
    const found = await deps.runtime.service(logDeletion).get(keyedRecordId(logDeletion, actor, key));
    if (!sameFilter(found, filter)) throw idempotencyKeyReused();
    return found;
  } catch (error) {
    if (isDomainError(error) && error.status === 'NOT_FOUND') return undefined;
    throw error;
  }
}

async function deleteOldLogs(
  deps: AppDeps,
  request: FastifyRequest,
  filter: DeletionFilter,
): Promise<{ deleted: number; at: Position | undefined }> {
  const ctx = await writeContext(deps, request, logDeletion);
  return asDeletion(deps.runtime, async () => {
    // Under the lock, so that a retry racing its first request finds it.
    const earlier = await earlierDeletion(deps, ctx.actor, ctx.idempotencyKey, filter);
    if (earlier !== undefined) return { deleted: Number(earlier.deleted), at: undefined };
    const upTo = await deps.eventStore.headPosition();
    await waitForReadModelAt(deps, log.collection, upTo);
    const ids = await idsToDelete(deps.readStore, deps.readModels.collectionOf(log.collection), filter, upTo);
    const created = await deps.runtime
      .service(logDeletion)
      .create({ ...filter, upTo: upTo.toString(), deleted: ids.length, deletedIds: await idBlobs(deps.blobStore, ids) }, ctx);
    return { deleted: ids.length, at: created.position };
  });
}

/** DELETE /api/v1/logs. */
export function deleteOldLogsRoute(app: FastifyInstance, deps: AppDeps): void {
  zodRoutes(app).delete(
    `/api/v1/${log.path}`,
    {
      config: { permission: 'admin' },
      schema: {
        tags: [log.path],
        summary: 'Delete old logs (admin only)',
        description:
          'Deletes every log of log type `code`, owner `ownerType`/`ownerId`, whose `startDate` is before `olderThan` (all four required), ' +
          'as the log stands when the request is decided: a log created or replaced after that is kept. One `LogDeletionCreated` event records ' +
          "who, when, the filter, that position and how many (readable at `/api/v1/log-deletions`); the logs' read model folds it, and the " +
          'logs answer 404 from then on. Their own events stay in the log until the retention pass purges them (LOG_RETENTION_DAYS after). ' +
          'Answers once searches no longer show them (or after 5 s; `X-Event-Position` for `minPosition`). Honours `Idempotency-Key`.',
        querystring: z.strictObject({ code: text(), olderThan: dateTime(), ownerType: text(), ownerId: text() }),
        response: { 200: z.strictObject({ deleted: z.int().min(0) }).meta({ id: 'LogsDeleted' }), ...errors(400, 403, 409, 503) },
      },
    },
    async (request, reply) => {
      const { code, olderThan, ownerType, ownerId } = request.query;
      const { deleted, at } = await deleteOldLogs(deps, request, { logTypeCode: code, olderThan, ownerType, ownerId });
      if (at !== undefined) {
        eventPosition(reply, at);
        await deps.readModels.waitFor(log.collection, at, DELETION_WAIT_MS);
      }
      return { deleted };
    },
  );
}
