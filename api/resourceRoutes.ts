// The shared operation set of the HTTP contract (openapi.json), generated from one resource
// declaration: the operations it offers, under the permissions its module gives.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Operation, ResourceDefinition } from '../domain/resource/defineResource.ts';
import type { WriteResult } from '../domain/resource/service.ts';
import { catchUpTo, position } from './readModelWait.ts';
import { isDomainError } from '../domain/shared/errors.ts';
import { dateTime, uuid } from '../domain/shared/fields.ts';
import {
  DEFAULT_PAGE_SIZE,
  DEFAULT_UNPAGED_SIZE,
  FilteringSchema,
  MAX_UNPAGED_SIZE,
  narrowed,
  toQuery,
  type Filtering,
  type LikePattern,
} from '../domain/shared/filtering.ts';
import type { AppDeps, ResourceRouteOptions } from './module.ts';
import { answerWrite as answerWriteTo, location, recordKey, sendRecord } from './replies.ts';
import { sendDocuments, sendItems, sendPage } from './documentStream.ts';
import { pagedNote, pagingQuery } from './paging.ts';
import { sendPageWhere } from './readModelQuery.ts';
import { ErrorBodySchema } from './errorHandler.ts';
import { ifMatchVersion } from './requestContext.ts';
import { accessTo, assertReadable, assertWritable, readScope, writeContext } from './access.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import type { JsonObject } from '../domain/shared/json.ts';
import type { ResourceRecord } from '../domain/resource/decider.ts';
import { historyEntrySchema, idOnly, idOrCode, notModifiedSchema, pageSchema, queryInteger } from './schemas.ts';
import { exchangeRoutes } from './exchangeRoutes.ts';

const MAX_HISTORY_PAGE = 1000;
const BY_IDS_CHUNK = 20;

const bool = z.enum(['true', 'false']).transform((s) => s === 'true');

/** A whole number in a path or query: decimal digits only (not ' ', '1e3' or '0x10', which a plain
 * Number() reads as 0, 1000 and 16). */
const writeQuery = z.strictObject({ immediatelyRefresh: bool.optional() });
const readModelQuery = z.strictObject({ minPosition: position.optional() });
const idOrCodeParams = z.strictObject({ idOrCode: idOrCode() });
/** For a resource without codes, `{idOrCode}` is its id (checked by `target`). */
const idParams = z.strictObject({ idOrCode: idOnly() });

export const errors = (...codes: number[]) => Object.fromEntries(codes.map((c) => [c, ErrorBodySchema]));

/** A member of a merge patch: scalars as their field, objects and maps as a nested merge patch
 * (whose nulls remove members, RFC 7396); the merged result is validated in full by the decider. */
function patchValue(field: z.ZodType): z.ZodType {
  if (field instanceof z.ZodDefault) {
    // null is let through to the decider, whose 400 says the member has a default; documented as
    // what it is, a value that cannot be null.
    const inner = field.unwrap() as z.ZodType;
    const { $schema: _, ...documented } = z.toJSONSchema(inner, { io: 'input', unrepresentable: 'any' });
    return inner
      .nullable()
      .optional()
      .meta({ anyOf: undefined, ...documented });
  }
  const optional = field instanceof z.ZodOptional;
  const inner = optional ? (field.unwrap() as z.ZodType) : field;
  const nested = inner instanceof z.ZodObject || inner instanceof z.ZodRecord;
  const value = nested ? z.record(z.string(), z.unknown()).meta({ description: 'merge patch of this object' }) : inner;
  // null removes a member: only an optional one may go (a required one would leave the record invalid).
  return (optional ? value.nullable() : value).optional();
}

/** For validation of the top level and for the OpenAPI document; the merged result is validated in full.
 * One per descriptor: its id is registered globally, and a second one (a second app in one process)
 * would be renamed in the document. */
const patchSchemas = new WeakMap<ResourceDefinition, z.ZodType>();
const patchSchema = (def: ResourceDefinition): z.ZodType => {
  let schema = patchSchemas.get(def);
  if (schema === undefined) {
    schema = newPatchSchema(def);
    patchSchemas.set(def, schema);
  }
  return schema;
};

const newPatchSchema = (def: ResourceDefinition) =>
  z
    .strictObject({
      ...Object.fromEntries(Object.entries(def.fields.shape).map(([k, v]) => [k, patchValue(v as z.ZodType)])),
      id: z.unknown().optional().meta({ readOnly: true, description: 'Read-only: a patch naming it is refused.' }),
      auditInfo: z.unknown().optional().meta({ readOnly: true, description: 'Read-only: a patch naming it is refused.' }),
    })
    .meta({ id: `${def.name}Patch`, description: 'JSON merge patch (RFC 7396): null removes a field.' });

type RouteKit = ReturnType<typeof routeKit>;

function routeKit(app: FastifyInstance, def: ResourceDefinition, deps: AppDeps, options: ResourceRouteOptions) {
  const service = deps.runtime.service(def);
  const r = app.withTypeProvider<ZodTypeProvider>();
  const base = `/api/v1/${def.path}`;
  const tags = [def.path];
  const record = def.record;
  const read = { permission: options.permissions?.read ?? 'read', resource: def } as const;
  const write = { permission: options.permissions?.write ?? 'write', resource: def } as const;
  const offers = (operation: Operation): boolean => def.operations.has(operation) && options.except?.includes(operation) !== true;
  /** The physical collection now serving the read model (it moves with each rebuild). */
  const collection = (): string => deps.readModels.collectionOf(def.collection);
  /** A path's `{idOrCode}`: any code, or for resources without codes a uuid (400 otherwise). */
  const target = (idOrCode: string): string => recordKey(def, idOrCode);

  /** The path parameter naming the record (for a resource without codes its id, checked by
   * `target`): `{idOrCode}`, unless the module's contract names an operation's otherwise. */
  const paramName = (operation: Operation): string => options.docs?.[operation]?.param ?? 'idOrCode';
  const recordParamsOf = (operation: Operation) => z.strictObject({ [paramName(operation)]: def.hasCode ? idOrCode() : idOnly() });
  const recordParams = def.hasCode ? idOrCodeParams : idParams;
  const keyOf = (operation: Operation, params: unknown): string =>
    target(String((params as Record<string, unknown>)[paramName(operation)]));
  /** An operation's summary, description and errors: the shared ones, or the module's own. */
  const docs = (operation: Operation, summary: string, ...codes: number[]) => {
    const own = options.docs?.[operation];
    return {
      summary: own?.summary ?? summary,
      ...(own?.description === undefined ? {} : { description: own.description }),
      errors: errors(...codes, ...(own?.errors ?? [])),
    };
  };
  /** A write's 422 where a field names another record: missing, not valid now, or a cycle. */
  const referenceErrors = def.references.length > 0 ? errors(422) : {};

  const answerWrite = (reply: FastifyReply, result: WriteResult, refresh: boolean | undefined): Promise<void> =>
    answerWriteTo(deps, reply, def.collection, result, refresh);

  /** The command context, with the caller's write coverage when access rules narrow it. */
  const ctx = (request: FastifyRequest): Promise<CommandContext> => writeContext(deps, request, def);

  /** A filtering as a query, narrowed to what the caller may read. */
  const query = async (filtering: Pick<Filtering, 'filter' | 'sort'>, request: FastifyRequest) =>
    narrowed(toQuery(filtering, def.columns, def.defaultSort), await readScope(deps, request, def));

  /** A record the caller may read, else 404. */
  const visible = <T extends JsonObject>(request: FastifyRequest, record: T): Promise<T> => assertReadable(deps, request, def, record);

  /** Before a change of a record by a caller whose access rules narrow its writes: 404 when it
   * may not read the record, 403 when it may not write it. */
  const writableNow = async (request: FastifyRequest, idOrCode: string): Promise<number | undefined> => {
    const asked = ifMatchVersion(request);
    if ((await accessTo(deps, request, def)).write === 'all') return asked;
    const judged = await service.get(idOrCode);
    await assertWritable(deps, request, def, judged);
    // The write applies to the version judged (412 if another write came between), as with If-Match.
    return asked ?? judged.auditInfo.version;
  };

  const catchUp = (minPosition: string | undefined) => catchUpTo(deps, def.collection, minPosition);

  const create = options.create;
  const writeBody = options.write;
  const createBody = create?.body ?? writeBody?.body ?? def.createInput;
  const replaceBody = writeBody?.body ?? def.input;
  /** The body of a create or replace as the resource takes it. */
  const normalised = (body: unknown): Promise<unknown> =>
    writeBody === undefined ? Promise.resolve(body) : writeBody.normalise(deps, body as JsonObject);
  const createFrom = (body: unknown, context: CommandContext): Promise<WriteResult> =>
    create === undefined ? service.create(body, context) : create.run(deps, body, context);
  /** A record the caller may read and that is there (ResourceRouteOptions.present). */
  const present = async <T extends ResourceRecord>(request: FastifyRequest, found: T, asOf?: string): Promise<T> => {
    const shown = await visible(request, found);
    await options.present?.(deps, shown, asOf);
    return shown;
  };
  const aroundReplace = options.aroundReplace ?? (<T>(_deps: AppDeps, replace: () => Promise<T>) => replace());

  return {
    app,
    r,
    def,
    deps,
    service,
    base,
    tags,
    record,
    answerWrite,
    catchUp,
    ctx,
    query,
    visible,
    present,
    writableNow,
    read,
    write,
    offers,
    collection,
    target,
    keyOf,
    keyParam: paramName,
    docs,
    presentCheck: options.present !== undefined,
    createBody,
    replaceBody,
    normalised,
    createFrom,
    aroundReplace,
    recordParams,
    recordParamsOf,
    referenceErrors,
    getExpansion: options.get,
  };
}

/** Create, replace, patch and delete: each appends to the record's stream. */
function commandRoutes(kit: RouteKit): void {
  const {
    r,
    def,
    deps,
    service,
    base,
    tags,
    record,
    answerWrite,
    ctx,
    write,
    offers,
    target,
    keyOf,
    docs,
    present,
    writableNow,
    recordParams,
    recordParamsOf,
    referenceErrors,
  } = kit;
  if (offers('create')) {
    const { errors: createErrors, ...doc } = docs('create', `Create a ${def.name}`, 400, 401, 403, 409, 415);
    r.post(
      base,
      {
        config: write,
        schema: {
          tags,
          ...doc,
          querystring: writeQuery,
          body: kit.createBody,
          response: { 201: record, ...createErrors, ...referenceErrors },
        },
      },
      async (request, reply) => {
        const body = await kit.normalised(request.body);
        const result = await kit.createFrom(body, await ctx(request));
        const created = result.record;
        if (created === undefined) throw new Error(`create of ${def.name} left no record`);
        await answerWrite(reply, result, request.query.immediatelyRefresh);
        return location(reply.code(201), `${base}/${created.id}`).send(created);
      },
    );
  }

  if (offers('replace')) {
    const { errors: replaceErrors, ...doc } = docs('replace', `Replace a ${def.name}`, 400, 404, 409, 412);
    r.put(
      `${base}/:${kit.keyParam('replace')}`,
      {
        config: write,
        schema: {
          tags,
          ...doc,
          params: recordParamsOf('replace'),
          querystring: writeQuery,
          body: kit.replaceBody,
          response: { 200: record, ...replaceErrors, ...referenceErrors },
        },
      },
      async (request, reply) => {
        const key = keyOf('replace', request.params);
        const body = await kit.normalised(request.body);
        return kit.aroundReplace(deps, async () => {
          // A record that is gone for the module (ResourceRouteOptions.present) is a 404 here too.
          if (kit.presentCheck) await present(request, await service.get(key));
          const version = await writableNow(request, key);
          const result = await service.replace(key, body, await ctx(request), version);
          await answerWrite(reply, result, request.query.immediatelyRefresh);
          return result.record;
        });
      },
    );
  }

  if (offers('patch'))
    r.patch(
      `${base}/:idOrCode`,
      {
        config: write,
        schema: {
          tags,
          summary: `Change some fields of a ${def.name} (JSON merge patch, RFC 7396)`,
          consumes: ['application/merge-patch+json', 'application/json'],
          params: recordParams,
          querystring: writeQuery,
          body: patchSchema(def),
          response: { 200: record, ...errors(400, 404, 409, 412), ...referenceErrors },
        },
      },
      async (request, reply) => {
        const version = await writableNow(request, target(request.params.idOrCode));
        const result = await service.patch(target(request.params.idOrCode), request.body, await ctx(request), version);
        await answerWrite(reply, result, request.query.immediatelyRefresh);
        return result.record;
      },
    );

  if (offers('delete'))
    r.delete(
      `${base}/:idOrCode`,
      {
        config: write,
        schema: {
          tags,
          summary: `Delete a ${def.name}`,
          params: recordParams,
          querystring: writeQuery,
          response: { 204: z.undefined(), ...errors(404, 412) },
        },
      },
      async (request, reply) => {
        const version = await writableNow(request, target(request.params.idOrCode));
        const result = await service.remove(target(request.params.idOrCode), await ctx(request), version);
        await answerWrite(reply, result, request.query.immediatelyRefresh);
        return reply.code(204).send();
      },
    );
}

/** Reads of one record fold its stream, so they reflect every acknowledged write. */
function recordRoutes({
  r,
  def,
  deps,
  service,
  base,
  tags,
  record,
  read,
  offers,
  target,
  visible,
  present,
  recordParams,
  recordParamsOf,
  keyParam,
  keyOf,
  docs,
  getExpansion,
}: RouteKit): void {
  if (offers('byCode'))
    r.get(
      `${base}/by-code/:code`,
      {
        config: read,
        schema: {
          tags,
          summary: `Get a ${def.name} by code`,
          params: z.strictObject({ code: z.string().min(1).max(255) }),
          response: { 200: record, 304: notModifiedSchema, ...errors(404) },
        },
      },
      async (request, reply) => {
        return sendRecord(reply, await visible(request, await service.getByCode(request.params.code)));
      },
    );

  if (offers('byIds'))
    r.post(
      `${base}/by-ids`,
      {
        config: read,
        schema: {
          tags,
          summary: `Get ${def.name} records by ids (missing ids left out)`,
          body: z.array(uuid()).max(1000),
          response: { 200: z.array(record) },
        },
      },
      async (request, reply) => {
        const ids = [...new Set(request.body.map((id) => id.toLowerCase()))];
        const one = (id: string) =>
          service
            .get(id)
            .then((found) => visible(request, found))
            .catch((error: unknown) => {
              if (isDomainError(error) && error.status === 'NOT_FOUND') return undefined;
              throw error;
            });
        // A thousand records of up to 512 KiB are more than one string holds: a few at a time.
        async function* records(): AsyncGenerator {
          for (let i = 0; i < ids.length; i += BY_IDS_CHUNK) {
            for (const found of await Promise.all(ids.slice(i, i + BY_IDS_CHUNK).map(one))) if (found !== undefined) yield found;
          }
        }
        return sendItems(reply, records());
      },
    );

  if (offers('get')) {
    const { errors: getErrors, ...doc } = docs('get', `Get a ${def.name} by id or code, optionally as it was at a time`, 400, 404);
    r.get(
      `${base}/:${keyParam('get')}`,
      {
        config: read,
        schema: {
          tags,
          ...doc,
          params: recordParamsOf('get'),
          querystring: z.strictObject({ asOf: dateTime().optional(), ...getExpansion?.query }),
          response: { 200: getExpansion?.response ?? record, 304: notModifiedSchema, ...getErrors },
        },
      },
      async (request, reply) => {
        const { asOf } = request.query as { asOf?: string };
        const expand = getExpansion?.expand(request.query);
        const found = await present(request, await service.get(keyOf('get', request.params), asOf === undefined ? {} : { asOf }), asOf);
        return sendRecord(reply, found, expand === undefined ? undefined : await expand(deps, request, found));
      },
    );
  }

  if (offers('versions'))
    r.get(
      `${base}/:idOrCode/versions/:version`,
      {
        config: read,
        schema: {
          tags,
          summary: `A ${def.name} as it was at one version`,
          params: recordParams.extend({ version: queryInteger(0, Number.MAX_SAFE_INTEGER) }),
          response: { 200: record, 304: notModifiedSchema, ...errors(400, 404) },
        },
      },
      async (request, reply) => {
        // A record gone for its module (a log a deletion removed) is gone in each of its versions too.
        return sendRecord(
          reply,
          await present(request, await service.get(target(request.params.idOrCode), { version: request.params.version })),
        );
      },
    );
}

/** A record's versions, paged and written one at a time. */
function historyRoute({ r, def, deps, service, base, tags, read, offers, target, visible, recordParams }: RouteKit): void {
  if (offers('history'))
    r.get(
      `${base}/:idOrCode/history`,
      {
        config: read,
        schema: {
          tags,
          summary: `Every version of a ${def.name}: who, when, which request, what changed`,
          description:
            'Oldest first, in pages of `size` versions (default and at most 1000). `X-Total-Count` gives the number of versions; ' +
            'when more follow, a `Link` header names the next page (`rel="next"`). History stays readable after a delete.',
          params: recordParams,
          querystring: z.strictObject({
            page: queryInteger(0, 1_000_000).default(0),
            size: queryInteger(1, MAX_HISTORY_PAGE).default(MAX_HISTORY_PAGE),
          }),
          response: { 200: z.array(historyEntrySchema), ...errors(400, 404) },
        },
      },
      async (request, reply) => {
        const { page, size } = request.query;
        // A caller narrowed by access rules sees the history of records it may read now.
        if ((await readScope(deps, request, def)) !== undefined) await visible(request, await service.get(target(request.params.idOrCode)));
        const history = await service.history(target(request.params.idOrCode), { page, size });
        void reply.header('x-total-count', String(history.total));
        if ((page + 1) * size < history.total) {
          void reply.header(
            'link',
            `<${base}/${encodeURIComponent(request.params.idOrCode)}/history?page=${String(page + 1)}&size=${String(size)}>; rel="next"`,
          );
        }
        return sendItems(reply, history.entries);
      },
    );
}

/** List, search, page, count and autocomplete: served by the read model. */
/** List all, a page at a time (api/paging.ts): in the default order by a keyset on its unique first
 * column (`code`), else by id. */
function listRoute({ r, def, deps, base, tags, record, read }: RouteKit): void {
  const keyed = def.unique.find((k) => k.fields.length === 1 && k.fields[0] === def.defaultSort[0])?.fields[0];
  r.get(
    base,
    {
      config: read,
      schema: {
        tags,
        summary: `List all ${def.name} records`,
        description: `${pagedNote(`in ${keyed ?? 'id'} order`)} Use search for another order.`,
        querystring: readModelQuery.extend(pagingQuery),
        response: { 200: z.array(record), ...errors(400) },
      },
    },
    async (request, reply) =>
      sendPageWhere(request, reply, deps, def, [], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, def),
        paging: request.query,
        order: keyed ?? 'id',
      }),
  );
}

function queryRoutes({ r, def, deps, base, tags, record, catchUp, query, read, offers, collection }: RouteKit): void {
  if (offers('search'))
    r.post(
      `${base}/search`,
      {
        config: read,
        schema: {
          tags,
          summary: `Search ${def.name} records (unpaged)`,
          querystring: z.strictObject({
            size: queryInteger(1, MAX_UNPAGED_SIZE).default(DEFAULT_UNPAGED_SIZE),
            minPosition: position.optional(),
          }),
          body: FilteringSchema,
          response: { 200: z.array(record), ...errors(400) },
        },
      },
      async (request, reply) => {
        const q = await query(request.body, request);
        await catchUp(request.query.minPosition);
        const ids = await deps.readStore.findIds(collection(), q, { offset: 0, limit: request.query.size });
        return sendDocuments(reply, deps.readStore, collection(), ids);
      },
    );

  if (offers('searchPage'))
    r.post(
      `${base}/search/page`,
      {
        config: read,
        schema: {
          tags,
          summary: `Search ${def.name} records, one page`,
          querystring: readModelQuery,
          body: FilteringSchema,
          response: { 200: pageSchema(record), ...errors(400) },
        },
      },
      async (request, reply) => {
        const q = await query(request.body, request);
        await catchUp(request.query.minPosition);
        const size = request.body.size ?? DEFAULT_PAGE_SIZE;
        const [ids, total] = await Promise.all([
          deps.readStore.findIds(collection(), q, { offset: request.body.page * size, limit: size }),
          deps.readStore.count(collection(), q),
        ]);
        return sendPage(
          reply,
          { readStore: deps.readStore, collection: collection(), ids },
          { total, number: request.body.page, size, sorted: request.body.sort.length > 0 },
        );
      },
    );

  if (offers('count'))
    r.post(
      `${base}/count`,
      {
        config: read,
        schema: {
          tags,
          summary: `Count ${def.name} records matching a filtering`,
          querystring: readModelQuery,
          body: FilteringSchema,
          response: { 200: z.int(), ...errors(400) },
        },
      },
      async (request) => {
        const q = await query(request.body, request);
        await catchUp(request.query.minPosition);
        return deps.readStore.count(collection(), q);
      },
    );
}

/** Codes and names for type-ahead fields. */
function autocompleteRoute({ r, def, deps, base, tags, catchUp, read, offers, collection }: RouteKit): void {
  if (offers('autocomplete'))
    r.get(
      `${base}/autocomplete`,
      {
        config: read,
        schema: {
          tags,
          summary: 'Codes and names starting with or containing the search text, best first',
          querystring: z.strictObject({
            search: z.string().max(255).default(''),
            size: queryInteger(1, 100).default(10),
            minPosition: position.optional(),
          }),
          response: { 200: z.array(z.string()) },
        },
      },
      async (request) => {
        await catchUp(request.query.minPosition);
        const { search, size } = request.query;
        const within = await readScope(deps, request, def);
        if (within === undefined) return deps.readStore.autocomplete(collection(), def.autocomplete, search, size);
        // Narrowed by access rules: the codes and names of covered records containing the text (as a
        // literal: the pattern is built here, so its wildcards need no escapes and the plain route's
        // length holds).
        const found = new Set<string>();
        const like: LikePattern = search === '' ? [{ kind: 'any' }] : [{ kind: 'any' }, { kind: 'text', text: search }, { kind: 'any' }];
        const { sort } = toQuery({ filter: [], sort: [] }, def.columns, def.defaultSort);
        for (const path of def.autocomplete) {
          const column = def.columns.columns.get(path);
          if (column === undefined) continue;
          const q = narrowed({ conditions: [{ kind: 'field', column, op: 'LIKE', like }], sort }, within);
          for (const doc of await deps.readStore.find(collection(), q, { offset: 0, limit: size })) {
            const value = doc[path];
            if (typeof value === 'string' && found.size < size) found.add(value);
          }
        }
        return [...found];
      },
    );
}

export function resourceRoutes(app: FastifyInstance, def: ResourceDefinition, deps: AppDeps, options: ResourceRouteOptions = {}): void {
  const kit = routeKit(app, def, deps, options);
  if (kit.offers('list')) listRoute(kit);
  commandRoutes(kit);
  recordRoutes(kit);
  historyRoute(kit);
  queryRoutes(kit);
  autocompleteRoute(kit);
  exchangeRoutes(kit);
}
