// Operation logs (API.md's Logs table): create, get, replace, by owner, search (the shared set's),
// and "delete old logs" (admin only), which appends one LogDeletion record whatever the number of
// logs it removes; the logs' projection folds it (projections/logs.ts). The retention schedule
// later purges the deleted logs' events from the log (EventStore.purge) and marks the deletion.
//
// A deletion counts the logs it removes against the read model caught up with the log's head, and
// the projection deletes those that match and were last written at or before that position. A
// replace of a log between the count and the deletion's append would make the two differ, so in
// this process replaces share a lock the deletion takes alone (creates need none: a log created
// after the position is never deleted). Across API processes the lock does not reach: there `deleted`
// may count a log replaced in that window, which then stays.

import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { deletedBy, deletionFilter, deletionOf, log, logDeletion, type Deletion, type DeletionFilter } from '../domain/log.ts';
import { logType } from '../../registries/domain/logType.ts';
import type { BlobRef, BlobStore, EventStore, Position, ReadStore } from '../../../domain/ports.ts';
import { streamOf } from '../../../domain/resource/decider.ts';
import { keyedRecordId, resourceService, type WriteResult } from '../../../domain/resource/service.ts';
import { DomainError, idempotencyKeyReused, isDomainError, malformedUuid, notFound, referenceMissing, validationFailed } from '../../../domain/shared/errors.ts';
import { dateTime, text } from '../../../domain/shared/fields.ts';
import { toQuery, type FilterItem } from '../../../domain/shared/filtering.ts';
import { isUuid } from '../../../domain/shared/ids.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { KeyedLocks } from '../../../domain/shared/keyedLocks.ts';
import { forgetFolds } from '../../../domain/shared/streamFold.ts';
import { logsProjection } from '../projections/logs.ts';
import { dueInReadModel, type Schedule } from '../../../workers/scheduler.ts';
import { assertReadable, assertWritable, readScope, writeContext } from '../../../api/access.ts';
import { sendDocuments } from '../../../api/documentStream.ts';
import { zodRoutes, type AppDeps, type Module, type ModuleContext, type ZodRoutes } from '../../../api/module.ts';
import { eq, idsWhere } from '../../../api/readModelQuery.ts';
import { position, waitForReadModelAt } from '../../../api/readModelWait.ts';
import { ifMatchVersion } from '../../../api/requestContext.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { serviceOf } from '../../../api/services.ts';
import { idOnly } from '../../../api/schemas.ts';

const tags = [log.path];
const base = `/api/v1/${log.path}`;
const admin = { permissions: { read: 'admin', write: 'admin' } } as const;
/** The actor of the retention pass's writes. */
export const LOG_RETENTION_ACTOR = 'system:log-retention';
/** Default days between a deletion and the purge of its logs' events (LOG_RETENTION_DAYS). */
export const DEFAULT_LOG_RETENTION_DAYS = 30;
/** Ids per blob of a deletion's list (36 bytes and a separator each: under 4 MiB a blob). */
const IDS_PER_BLOB = 100_000;
/** Documents or streams handled per read or purge. */
const PAGE = 5000;
/** Streams checked or purged between two turns of the event loop. */
const PURGE_PART = 1000;
/** Ids of a selection read per query: large, since each page past the first re-reads the ones before (offset). */
const ID_PAGE = 50_000;
const DELETION_WAIT_MS = 5000;

/** What create and replace accept: the log's fields with `logTypeCode` optional, since `logType`
 * (its code or id) may name the type instead. */
const logWrite = log.input.extend({ logTypeCode: text().optional() }).meta({ id: 'LogWrite', description: 'A log as written: `logTypeCode`, or `logType` with its `code` or `id`, names its log type.' });

const writeQuery = z.strictObject({ immediatelyRefresh: z.enum(['true', 'false']).optional() });

// ---- per log: the deletions recorded so far, and the lock replaces share against a deletion ----

type LogState = { locks: KeyedLocks; deletions: DeletionLog };
const states = new WeakMap<EventStore, LogState>();
const stateOf = (store: EventStore): LogState => {
  let state = states.get(store);
  if (state === undefined) {
    state = { locks: new KeyedLocks(), deletions: new DeletionLog(store) };
    states.set(store, state);
  }
  return state;
};
const LOCK = 'logs';

const conditionsOf = (filter: FilterItem[]) => toQuery({ filter, sort: [] }, log.columns, log.defaultSort).conditions;

/** Every LogDeletionCreated of the log, read on from where the last read ended (they are few). */
class DeletionLog {
  readonly #store: EventStore;
  #after: Position = 0n;
  #list: (Deletion & { at: string })[] = [];
  #reading: Promise<void> = Promise.resolve();

  constructor(store: EventStore) {
    this.#store = store;
  }

  current(): Promise<readonly (Deletion & { at: string })[]> {
    // A failed read (a store down) fails its callers, not every later one.
    this.#reading = this.#reading.catch(() => undefined).then(() => this.#readOn());
    return this.#reading.then(() => this.#list);
  }

  async #readOn(): Promise<void> {
    for (;;) {
      const batch = await this.#store.readAll({ after: this.#after, limit: 500, categories: [logDeletion.category], types: [logDeletion.createdEvent] });
      for (const e of batch) {
        const deletion = deletionOf(e.data, conditionsOf);
        if (deletion !== undefined) this.#list = [...this.#list, { ...deletion, at: e.metadata.at }];
      }
      this.#after = batch.at(-1)?.position ?? this.#after;
      if (batch.length < 500) return;
    }
  }
}

/** 404 for a log a deletion removed (its stream still holds it until the retention pass); with
 * `asOf`, only deletions made by then count. */
async function assertNotDeleted(deps: AppDeps, record: JsonObject & { id: string; auditInfo: { version: number } }, asOf?: string): Promise<void> {
  const all = await stateOf(deps.eventStore).deletions.current();
  const deletions = asOf === undefined ? all : all.filter((d) => Date.parse(d.at) <= Date.parse(asOf));
  if (deletions.length === 0) return;
  const [last] = await deps.eventStore.readStream(streamOf(log, record.id), { from: record.auditInfo.version, limit: 1 });
  if (last === undefined || deletions.some((d) => deletedBy(d, record, last.position))) throw notFound(log.errorPrefix, record.id);
}

/** The body with `logTypeCode` set from `logType` when only that names the type. */
async function withTypeCode(deps: AppDeps, body: JsonObject): Promise<JsonObject> {
  const named = body.logType as { code?: string; id?: string } | undefined;
  if (typeof body.logTypeCode === 'string') {
    if (named?.code !== undefined && named.code !== body.logTypeCode) throw validationFailed('logType and logTypeCode name different log types', [`logType.code: ${named.code} is not logTypeCode ${body.logTypeCode}`]);
    return body;
  }
  if (named?.code !== undefined) return { ...body, logTypeCode: named.code };
  if (named?.id === undefined) throw validationFailed('A log needs its log type', ['logTypeCode: required (or logType with its code or id)']);
  try {
    const found = await serviceOf(deps, logType).get(named.id);
    return { ...body, logTypeCode: String(found.code) };
  } catch (error) {
    if (isDomainError(error) && error.status === 'NOT_FOUND') throw referenceMissing(log.errorPrefix, [`logType.id: no log type ${named.id}`]);
    throw error;
  }
}

async function answerWrite(deps: AppDeps, reply: FastifyReply, result: WriteResult, refresh: string | undefined): Promise<void> {
  void reply.header('etag', `"${String(result.version)}"`);
  if (result.position === undefined) return;
  void reply.header('x-event-position', result.position.toString());
  if (refresh === 'true') await waitForReadModelAt(deps, log.collection, result.position);
}

const idParams = z.strictObject({ id: idOnly() });
const uuidOf = (id: string): string => {
  if (!isUuid(id)) throw malformedUuid('id', id);
  return id.toLowerCase();
};

async function liveLog(deps: AppDeps, request: FastifyRequest, id: string, asOf?: string) {
  const record = await assertReadable(deps, request, log, await serviceOf(deps, log).get(id, asOf === undefined ? {} : { asOf }));
  await assertNotDeleted(deps, record, asOf);
  return record;
}

function writeRoutes(r: ZodRoutes, deps: AppDeps): void {
  const logs = serviceOf(deps, log);
  r.post(
    base,
    {
      config: { permission: 'write', resource: log },
      schema: {
        tags,
        summary: 'Create a Log',
        description: `${log.description} Honours \`Idempotency-Key\`; \`immediatelyRefresh=true\` waits until searches show it.`,
        querystring: writeQuery,
        body: logWrite,
        response: { 201: log.record, ...errors(400, 409, 413, 422) },
      },
    },
    async (request, reply) => {
      const body = await withTypeCode(deps, request.body);
      const ctx = await writeContext(deps, request, log);
      await refusePurgedId(deps, typeof body.id === 'string' ? body.id.toLowerCase() : ctx.idempotencyKey === undefined ? undefined : keyedRecordId(log, ctx.actor, ctx.idempotencyKey));
      const result = await logs.create(body, ctx);
      const created = result.record;
      if (created === undefined) throw new Error('a create of a log left no record');
      await answerWrite(deps, reply, result, request.query.immediatelyRefresh);
      return reply.code(201).header('location', `${base}/${created.id}`).send(created);
    },
  );

  r.put(
    `${base}/:id`,
    {
      config: { permission: 'write', resource: log },
      schema: {
        tags,
        summary: 'Replace a Log',
        description: 'A log a deletion removed is a 404. `If-Match` is honoured (412 when stale).',
        params: idParams,
        querystring: writeQuery,
        body: logWrite,
        response: { 200: log.record, ...errors(400, 404, 409, 412, 413, 422) },
      },
    },
    async (request, reply) => {
      const id = uuidOf(request.params.id);
      const body = await withTypeCode(deps, request.body);
      const release = await stateOf(deps.eventStore).locks.acquire([{ name: LOCK, exclusive: false }]);
      try {
        const current = await liveLog(deps, request, id);
        await assertWritable(deps, request, log, current);
        const result = await logs.replace(id, body, await writeContext(deps, request, log), ifMatchVersion(request));
        await answerWrite(deps, reply, result, request.query.immediatelyRefresh);
        return result.record;
      } finally {
        release();
      }
    },
  );
}

/** A log whose events the retention pass purged keeps its id: its stream is empty again, but the
 * logs' read model remembers the deletion, so a log made again under that id would be confirmed
 * and never shown (nor counted the same by a rebuild). Refused instead: ids are not used twice. */
async function refusePurgedId(deps: AppDeps, id: string | undefined): Promise<void> {
  if (id === undefined || !isUuid(id)) return;
  const stored = (await deps.readStore.getMany(deps.readModels.collectionOf(log.collection), [id])).get(id);
  if (stored?.doc !== null) return;
  if ((await deps.eventStore.readStream(streamOf(log, id), { limit: 1 })).length > 0) return;
  throw new DomainError('LOG.ALREADY_EXISTS', `Log ${id} was deleted and its events purged by the retention pass: its id is not used again`, [`id: ${id} was a deleted log`]);
}

function readRoutes(r: ZodRoutes, deps: AppDeps): void {
  r.get(
    `${base}/:id`,
    {
      config: { permission: 'read', resource: log },
      schema: {
        tags,
        summary: 'Get a Log',
        description:
          'Folded from the log: reflects every acknowledged write. A log a deletion removed is a 404. `asOf` answers the log as it was at that ' +
          'time (404 when it did not exist yet or a deletion made by then removed it; after the retention pass purged it, 404 at any time).',
        params: idParams,
        querystring: z.strictObject({ asOf: dateTime().optional() }),
        response: { 200: log.record, ...errors(400, 404) },
      },
    },
    async (request, reply) => {
      const found = await liveLog(deps, request, uuidOf(request.params.id), request.query.asOf);
      return reply.header('etag', `"${String(found.auditInfo.version)}"`).send(found);
    },
  );

  r.get(
    `${base}/by-owner`,
    {
      config: { permission: 'read', resource: log },
      schema: {
        tags,
        summary: 'Logs of one owner',
        description: 'At most 10,000, oldest startDate first; served by the read model (`minPosition` waits for a write).',
        querystring: z.strictObject({ ownerType: text(), ownerId: text(), minPosition: position.optional() }),
        response: { 200: z.array(log.record), ...errors(400, 503) },
      },
    },
    async (request, reply) => {
      const { collection, ids } = await idsWhere(deps, log, [eq('ownerType', request.query.ownerType), eq('ownerId', request.query.ownerId)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, log),
      });
      sendDocuments(reply, deps.readStore, collection, ids);
      return reply;
    },
  );
}

// ---- delete old logs ----

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

/** Lets the event loop go (the embedded stores answer synchronously: a long loop of their calls
 * would hold every request meanwhile). */
const turn = () => new Promise((resolve) => setImmediate(resolve));

const sameFilter = (a: JsonObject, f: DeletionFilter): boolean =>
  a.logTypeCode === f.logTypeCode && a.olderThan === f.olderThan && a.ownerType === f.ownerType && a.ownerId === f.ownerId;

/** An earlier deletion under the same Idempotency-Key: its answer again (409 for another filter). */
async function earlierDeletion(deps: AppDeps, actor: string, key: string | undefined, filter: DeletionFilter): Promise<JsonObject | undefined> {
  if (key === undefined) return undefined;
  try {
    const found = await serviceOf(deps, logDeletion).get(keyedRecordId(logDeletion, actor, key));
    if (!sameFilter(found, filter)) throw idempotencyKeyReused();
    return found;
  } catch (error) {
    if (isDomainError(error) && error.status === 'NOT_FOUND') return undefined;
    throw error;
  }
}

async function deleteOldLogs(deps: AppDeps, request: FastifyRequest, filter: DeletionFilter): Promise<{ deleted: number; at: Position | undefined }> {
  const ctx = await writeContext(deps, request, logDeletion);
  const release = await stateOf(deps.eventStore).locks.acquire([{ name: LOCK, exclusive: true }]);
  try {
    // Under the lock, so that a retry racing its first request finds it.
    const earlier = await earlierDeletion(deps, ctx.actor, ctx.idempotencyKey, filter);
    if (earlier !== undefined) return { deleted: Number(earlier.deleted), at: undefined };
    const upTo = await deps.eventStore.headPosition();
    await waitForReadModelAt(deps, log.collection, upTo);
    const ids = await idsToDelete(deps.readStore, deps.readModels.collectionOf(log.collection), filter, upTo);
    const created = await serviceOf(deps, logDeletion).create(
      { ...filter, upTo: upTo.toString(), deleted: ids.length, deletedIds: await idBlobs(deps.blobStore, ids) },
      ctx,
    );
    return { deleted: ids.length, at: created.position };
  } finally {
    release();
  }
}

function deleteRoute(r: ZodRoutes, deps: AppDeps): void {
  r.delete(
    base,
    {
      config: { permission: 'admin' },
      schema: {
        tags,
        summary: 'Delete old logs (admin only)',
        description:
          'Deletes every log of log type `code`, owner `ownerType`/`ownerId`, whose `startDate` is before `olderThan` (all four required), ' +
          'as the log stands when the request is decided: a log created or replaced after that is kept. One `LogDeletionCreated` event records ' +
          'who, when, the filter, that position and how many (readable at `/api/v1/log-deletions`); the logs\' read model folds it, and the ' +
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
        void reply.header('x-event-position', at.toString());
        await deps.readModels.waitFor(log.collection, at, DELETION_WAIT_MS);
      }
      return { deleted };
    },
  );
}

// ---- the retention pass ----

async function idsIn(blobs: BlobStore, refs: readonly JsonObject[]): Promise<string[]> {
  const ids: string[] = [];
  for (const ref of refs) {
    const blob = await blobs.get(String(ref.sha256));
    if (blob === undefined) throw new Error(`blob ${String(ref.sha256)} of a log deletion is missing`);
    ids.push(...(JSON.parse(new TextDecoder().decode(blob.content)) as string[]));
  }
  return ids;
}

/** Deletions older than the retention whose logs are not purged yet are due; each purges the
 * streams of its logs that nothing wrote since the deletion's position (so never a live log), then
 * records the purge on the deletion, which stays. */
function retentionSchedule(ctx: ModuleContext): Schedule {
  const days = ctx.settings.logs?.retentionDays ?? DEFAULT_LOG_RETENTION_DAYS;
  const deletions = resourceService(logDeletion, ctx.eventStore);
  return {
    name: 'log-retention',
    due: (now) => {
      const cutoff = new Date(now.getTime() - days * 86_400_000).toISOString();
      const filter: FilterItem[] = [{ column: 'purgedAt', operator: 'IS_NULL' }, { column: 'auditInfo.whenInserted', operator: 'LTE', value: cutoff }];
      return dueInReadModel(ctx.readStore, ctx.readModels, logDeletion.collection, toQuery({ filter, sort: [] }, logDeletion.columns, logDeletion.defaultSort));
    },
    run: async (item, now) => {
      const upTo = BigInt(String(item.upTo));
      const streams: string[] = [];
      for (const [i, id] of (await idsIn(ctx.blobStore, (item.deletedIds ?? []) as JsonObject[])).entries()) {
        const stream = streamOf(log, id);
        const last = (await ctx.eventStore.readStream(stream)).at(-1);
        if (last !== undefined && last.position <= upTo) streams.push(stream);
        if (i % PURGE_PART === 0) await turn();
      }
      let events = 0;
      for (let i = 0; i < streams.length; i += PURGE_PART) {
        const part = streams.slice(i, i + PURGE_PART);
        events += await ctx.eventStore.purge(part);
        forgetFolds(ctx.eventStore, part.map((stream) => ({ resource: log.errorPrefix, stream })));
        await turn();
      }
      await deletions.execute(item.id, { type: 'Purge', streams: streams.length, events }, { actor: LOG_RETENTION_ACTOR, now, newId: ctx.newId, requestId: ctx.newId(), idempotencyKey: `purge:${item.id}` });
      return true;
    },
  };
}

export const logsModule: Module = {
  name: 'logs',
  resources: [
    { definition: log, routes: { except: ['create', 'get', 'replace'] }, defaultReadModel: false },
    { definition: logDeletion, routes: admin },
  ],
  projections: [logsProjection()],
  schedules: (ctx) => [retentionSchedule(ctx)],
  routes(app, deps) {
    const r = zodRoutes(app);
    writeRoutes(r, deps);
    readRoutes(r, deps);
    deleteRoute(r, deps);
  },
};
