// Export, export as diff, import and apply diff of the shared operation set, derived for every
// resource that offers them (resourceRoutes.ts calls this). An export is written as it is read,
// a keyset page at a time, so its size never weighs on the service's memory; a diff compares an
// incoming data set with the records here that its filtering selects; applying is diffApply.ts.

import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import fastifyMultipart from '@fastify/multipart';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Document } from '../domain/ports.ts';
import type { Operation, ResourceDefinition } from '../domain/resource/defineResource.ts';
import type { ResourceService } from '../application/resourceService.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import {
  checkCompareField,
  compareFields,
  diffAgainst,
  exportObjectSchema,
  ExportRequestSchema,
  indexIncoming,
  type DiffEntry,
  type ExportObject,
} from '../domain/resource/exchange.ts';
import { DomainError, isDomainError, tooLarge, validationFailed } from '../domain/shared/errors.ts';
import { narrowed, toQuery, type FilterItem, type Query } from '../domain/shared/filtering.ts';
import type { JsonObject } from '../domain/shared/json.ts';
import { readScope } from './access.ts';
import {
  applyEntry,
  appliedItems,
  closeStoppedApplies,
  diffEntryInput,
  failureOf,
  runningApplies,
  startApplyJob,
  type ApplyEnv,
  type EntrySource,
} from './diffApply.ts';
import { importDiff, type ImportedDiff, type ImportSource } from './importDiff.ts';
import { readModelLookup } from './services.ts';
import { sendItems } from './documentStream.ts';
import { ErrorBodySchema } from './errorHandler.ts';
import type { Permission } from './auth.ts';
import type { AppDeps, ExchangeSettings, ZodRoutes } from './module.ts';
import { position, waitForReadModelAt } from './readModelWait.ts';
import { location } from './replies.ts';

/** What the derived routes of a resource share (resourceRoutes.ts's route kit). */
export type RouteKit = {
  app: FastifyInstance;
  r: ZodRoutes;
  def: ResourceDefinition;
  deps: AppDeps;
  service: ResourceService;
  base: string;
  tags: string[];
  record: z.ZodObject;
  read: { permission: Permission; resource: ResourceDefinition };
  write: { permission: Permission; resource: ResourceDefinition };
  offers: (operation: Operation) => boolean;
  collection: () => string;
  ctx: (request: FastifyRequest) => Promise<CommandContext>;
  catchUp: (minPosition: string | undefined) => Promise<void>;
};

const errors = (...codes: number[]) => Object.fromEntries(codes.map((c) => [c, ErrorBodySchema]));

/** Records read per page of an export or a diff's scan. */
const EXPORT_PAGE = 500;
/** Characters of JSON per page of an export (see jsonPagesHere), and the first page's records. */
const JSON_PAGE_CHARS = 64 * 1024;
const JSON_PAGE_FIRST = 100;
/** Bytes of an export written between two turns of the event loop (see documentStream.ts). */
const TURN_BYTES = 256 * 1024;
/** Values a JSON body of export/diff or diff/apply may hold (its byte limit bounds it first). */
const EXCHANGE_JSON_VALUES = 50_000_000;

export const DEFAULT_EXCHANGE: ExchangeSettings = {
  importMaxBytes: 32 * 1024 * 1024,
  importFileMaxBytes: 4 * 1024 * 1024 * 1024,
  applyJobThreshold: 1000,
  massRemovePercent: 10,
  massRemoveFloor: 10,
};

export const exchangeSettings = (deps: Pick<AppDeps, 'exchange'>): ExchangeSettings => ({ ...DEFAULT_EXCHANGE, ...deps.exchange });

/** Checked by checkCompareField (its 400 names the fields); documented as their list. */
const compareFieldQuery = (def: ResourceDefinition) =>
  z
    .string()
    .min(1)
    .max(255)
    .optional()
    .meta({
      enum: compareFields(def),
      description: 'the field records are matched by: id (default), code, or another field unique on both sides',
    });
const bool = z.enum(['true', 'false']).transform((s) => s === 'true');
const allowMassRemoveQuery = bool
  .default(false)
  .meta({ description: 'true: apply however many records the diff deletes (see MASS_REMOVE_PERCENT)' });

const DiffEntryFailureSchema = z
  .object({ index: z.int(), diffType: z.string(), error: ErrorBodySchema })
  .meta({
    id: 'DiffEntryFailure',
    description: 'In place of the record of an entry that could not be applied: its index in the request, and why.',
  });

const JobAckSchema = z.object({ acknowledge: z.boolean(), jobId: z.uuid() }).meta({ id: 'DiffApplyJobAcknowledgement' });

/** The query of the records here a filtering selects, with the caller's read scope (undefined: all). */
async function selectionHere(kit: RouteKit, filter: readonly FilterItem[], request: FastifyRequest): Promise<Query | undefined> {
  const scope = await readScope(kit.deps, request, kit.def);
  return filter.length === 0 && scope === undefined ? undefined : narrowed(checkedFilter(kit, filter), scope);
}

/** The records here a filtering selects (with the caller's read scope), in id order, a keyset page
 * at a time (ReadStore.scan, along the id index): however many there are, one page is held, and
 * paging through them is one pass over the read model whatever the filter. */
async function* recordsHere(kit: RouteKit, filter: readonly FilterItem[], request: FastifyRequest): AsyncGenerator<Document> {
  const query = await selectionHere(kit, filter, request);
  for (let after: string | undefined; ;) {
    const page = await kit.deps.readStore.scan(kit.collection(), {
      ...(after === undefined ? {} : { after }),
      limit: EXPORT_PAGE,
      ...(query === undefined ? {} : { query }),
    });
    yield* page;
    if (page.length < EXPORT_PAGE) return;
    after = page.at(-1)?.id;
  }
}

/** The same records as JSON text, a page at a time (ReadStore.scanJson): written as they are
 * stored, none parsed and serialized again, so a page is one string rather than its records' objects.
 * Pages are sized from the last one's bytes to about JSON_PAGE_CHARS: V8 puts a string over 128 KiB
 * in its large-object space, which a first export of 1,000,000 records grew by 60 MB before a
 * collection came (500 worklog types are 175 KB). */
async function* jsonPagesHere(kit: RouteKit, filter: readonly FilterItem[], request: FastifyRequest): AsyncGenerator<string> {
  const query = await selectionHere(kit, filter, request);
  let limit = JSON_PAGE_FIRST;
  for (let after: string | undefined; ;) {
    const page = await kit.deps.readStore.scanJson(kit.collection(), {
      ...(after === undefined ? {} : { after }),
      limit,
      ...(query === undefined ? {} : { query }),
    });
    if (page.count > 0) yield page.json;
    if (page.count < limit || page.last === undefined) return;
    after = page.last;
    limit = Math.max(1, Math.min(EXPORT_PAGE, Math.floor((JSON_PAGE_CHARS * page.count) / Math.max(1, page.json.length))));
  }
}

/** A filtering's query, checked before an answer starts (400 naming the bad item). */
const checkedFilter = (kit: RouteKit, filter: readonly FilterItem[]): Query =>
  toQuery({ filter: [...filter], sort: [] }, kit.def.columns, kit.def.defaultSort);

/** The export object as JSON text, its data written a page at a time as it is read. */
async function* exportText(head: JsonObject, pages: AsyncIterable<string>): AsyncGenerator<string> {
  yield `${JSON.stringify(head).slice(0, -1)},"data":[`;
  let sinceTurn = 0;
  let first = true;
  for await (const json of pages) {
    yield first ? json : `,${json}`;
    first = false;
    sinceTurn += json.length;
    if (sinceTurn >= TURN_BYTES) {
      sinceTurn = 0;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
  yield ']}';
}

function exportRoute(kit: RouteKit): void {
  const { r, def, base, tags, read, record, catchUp } = kit;
  r.post(
    `${base}/export`,
    {
      config: read,
      schema: {
        tags,
        summary: `Export ${def.name} records`,
        description:
          'The records the filter items select (all when none; only those the caller may read), in id order, as an export object: ' +
          '`exportedBy` is the caller, `whenExported` now, `data` last. The answer is written as it is read from the read model, a ' +
          'keyset page at a time, so any number of records exports in constant memory; should the read model fail midway the answer ' +
          'ends early and is not valid JSON. `?minPosition=` waits until the read model reflects a write.',
        querystring: z.strictObject({ minPosition: position.optional() }),
        // The resource's own compare fields in the document (the shared schema cannot list them).
        body: ExportRequestSchema.extend({ compareField: compareFieldQuery(def) }),
        response: { 200: exportObjectSchema(def, record), ...errors(400) },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const compareField = checkCompareField(def, body.compareField ?? 'id');
      const filter = body.filtering ?? [];
      checkedFilter(kit, filter);
      await catchUp(request.query.minPosition);
      const head: JsonObject = {
        name: `${def.path}-${kit.deps.clock.now().toISOString()}`,
        whenExported: kit.deps.clock.now().toISOString(),
        exportedBy: request.caller?.sub ?? 'anonymous',
        entityType: body.entityType,
        ...(body.listingType === undefined ? {} : { listingType: body.listingType }),
        ...(body.listingProfile === undefined ? {} : { listingProfile: body.listingProfile }),
        compareField,
        filtering: filter,
      };
      // Two pages at most wait for the socket (a page is one chunk of about 64 KiB of JSON).
      const text = Readable.from(exportText(head, jsonPagesHere(kit, filter, request)), { highWaterMark: 2 });
      return reply.type('application/json; charset=utf-8').send(text as unknown as ExportObject);
    },
  );
}

/** The diff of an export object against the records here its filtering selects. */
async function diffOf(
  kit: RouteKit,
  request: FastifyRequest,
  exported: ExportObject,
  asked: string | undefined,
): Promise<{ entries: DiffEntry[]; compareField: string }> {
  const fromExport = typeof exported.compareField === 'string' ? exported.compareField : undefined;
  const compareField = checkCompareField(kit.def, asked ?? fromExport ?? 'id');
  checkedFilter(kit, exported.filtering);
  const incoming = indexIncoming(exported.data, compareField);
  const entries = await diffAgainst(kit.def, incoming, recordsHere(kit, exported.filtering, request), compareField);
  return { entries, compareField };
}

const DIFF_DESCRIPTION =
  '`left` is the record as stored here, `right` as in the incoming export. DIFF_TYPE_NEW: only in the incoming data; DIFF_TYPE_CHANGE: ' +
  'in both and different (auditInfo ignored; `id` too when matching by another field); DIFF_TYPE_REMOVE: only here, where "here" is the ' +
  "records the export's own `filtering` selects here (as the caller may read them), so a filtered export is compared with the same " +
  "selection, not with the whole collection. Records are matched by `compareField` (query; else the export object's; else id): id, " +
  'code, or another single-valued field whose values are unique on both sides, else 400 DIFF.COMPARE_FIELD_NOT_UNIQUE listing the clashes. ' +
  'Order: CHANGE and REMOVE in id order of the records here, then NEW in the incoming order.';

const diffEntrySchema = (def: RouteKit['def'], record: z.ZodType) =>
  z.object({
    diffType: z.enum(['DIFF_TYPE_NEW', 'DIFF_TYPE_CHANGE', 'DIFF_TYPE_REMOVE']),
    left: record.optional(),
    right: def.input.optional(),
    error: ErrorBodySchema.optional().meta({
      description: 'import with save=true only: why applying this entry failed (the others were applied)',
    }),
  });

function exportDiffRoute(kit: RouteKit, limits: ExchangeSettings): void {
  const { r, def, base, tags, read, record, catchUp } = kit;
  r.post(
    `${base}/export/diff`,
    {
      config: { ...read, maxJsonValues: EXCHANGE_JSON_VALUES },
      bodyLimit: limits.importMaxBytes,
      schema: {
        tags,
        summary: `Compare an export of ${def.name} records with the records here`,
        description: `${DIFF_DESCRIPTION} Each item of \`data\` must be a valid ${def.name} record (400 naming \`data[i]\` otherwise).`,
        querystring: z.strictObject({ compareField: compareFieldQuery(def), minPosition: position.optional() }),
        body: exportObjectSchema(def),
        response: { 200: z.array(diffEntrySchema(def, record)), ...errors(400, 413) },
      },
    },
    async (request, reply) => {
      await catchUp(request.query.minPosition);
      const { entries } = await diffOf(kit, request, request.body as ExportObject, request.query.compareField);
      return sendItems(reply, entries);
    },
  );
}

/** The parts of an import's form read at most: its one file, and a few fields beside it. */
const IMPORT_FORM = { files: 1, fields: 10, parts: 11 } as const;

const tooBig = (limits: ExchangeSettings) => tooLarge('IMPORT', 'The file', limits.importFileMaxBytes + 1, limits.importFileMaxBytes);

/** The form's own limits, which its parser answers 413: a form of more parts than an import reads
 * is malformed, whatever its size. */
const FORM_LIMITS: Readonly<Record<string, string>> = {
  FST_FILES_LIMIT: 'one file, `file`',
  FST_FIELDS_LIMIT: `at most ${String(IMPORT_FORM.fields)} other fields (read and dropped)`,
  FST_PARTS_LIMIT: `at most ${String(IMPORT_FORM.parts)} parts`,
};

/** An error of reading the form: 413 for a file over the limit, 400 for a form over its part
 * limits; the parser's other errors are the form's fault. */
function importError(error: unknown, limits: ExchangeSettings): unknown {
  const { code, statusCode } = error as { code?: string; statusCode?: number };
  if (code === 'FST_REQ_FILE_TOO_LARGE') return tooBig(limits);
  const limit = code === undefined ? undefined : FORM_LIMITS[code];
  if (limit !== undefined) return validationFailed('An import form holds the field `file` and little else', [`(form): ${limit}`]);
  if (isDomainError(error) || (typeof statusCode === 'number' && statusCode < 500)) return error;
  return validationFailed(`Malformed multipart/form-data: ${error instanceof Error ? error.message.slice(0, 200) : 'unreadable'}`, [
    'file: a multipart/form-data body (lines end with CRLF)',
  ]);
}

/** The diff of the uploaded `file` field, read as it arrives: 400 when absent, 413 beyond the limit. */
async function importedDiff(kit: RouteKit, request: FastifyRequest, limits: ExchangeSettings): Promise<ImportedDiff> {
  if (!request.isMultipart()) throw validationFailed('An import is multipart/form-data with a field `file`', ['file: required']);
  const source: ImportSource = {
    def: kit.def,
    asked: request.query === null ? undefined : (request.query as { compareField?: string }).compareField,
    checkFilter: (filter) => checkedFilter(kit, filter),
    here: (filter) => recordsHere(kit, filter, request),
    // Among the records the caller may read, as the diff's own records are.
    heldTwice: async (field, key) =>
      (
        await readModelLookup(kit.deps)(
          kit.def,
          [{ column: field, operator: 'EQ', value: key }],
          2,
          await readScope(kit.deps, request, kit.def),
        )
      ).length > 1,
  };
  let diff: ImportedDiff | undefined;
  // An error of the diff itself (the store, our code) keeps its own status: only the form
  // parser's errors are the form's fault.
  const failed = { inDiff: false };
  try {
    for await (const part of request.parts()) {
      if (part.type !== 'file') continue;
      if (part.fieldname !== 'file' || diff !== undefined) {
        // Another file field: read and dropped, never held.
        part.file.resume();
        await finished(part.file);
        continue;
      }
      try {
        diff = await importDiff(source, part.file);
      } catch (error) {
        // The rest of the file is read and dropped, so the answer is the 400, not a stalled upload.
        part.file.resume();
        failed.inDiff = !part.file.truncated;
        throw part.file.truncated ? tooBig(limits) : error;
      }
      if (part.file.truncated) throw tooBig(limits);
    }
  } catch (error) {
    diff?.close();
    throw failed.inDiff ? error : importError(error, limits);
  }
  if (diff === undefined) throw validationFailed('An import is multipart/form-data with a field `file`', ['file: required']);
  return diff;
}

const applyEnv = async (kit: RouteKit, request: FastifyRequest, compareField: string): Promise<ApplyEnv> => ({
  def: kit.def,
  deps: kit.deps,
  service: kit.service,
  compareField,
  ctx: await kit.ctx(request),
  request,
});

const answerJob = async (reply: FastifyReply, env: ApplyEnv, entries: readonly DiffEntry[] | EntrySource): Promise<FastifyReply> => {
  const jobId = await startApplyJob(env, entries);
  return location(reply.code(202), `/api/v1/jobs/${jobId}`).send({ acknowledge: true, jobId });
};

const MASS_REMOVE_TEXT = (limits: ExchangeSettings) =>
  `Deleting more than ${String(limits.massRemovePercent)}% (MASS_REMOVE_PERCENT) of the records of the resource the caller may read, and more than ` +
  `${String(limits.massRemoveFloor)} (MASS_REMOVE_FLOOR), takes \`allowMassRemove=true\`: without it the request is a 400 DIFF.MASS_REMOVE saying how many ` +
  'it would delete, and nothing is applied.';

/** A save deleting many records at once must say so: a file of a few records imported by code, or a
 * diff against a filtered selection applied to the whole, would otherwise delete every other
 * record. At most MASS_REMOVE_PERCENT of the records the caller may read, and always
 * MASS_REMOVE_FLOOR, go without `allowMassRemove=true`. */
async function assertRemovalsAllowed(
  kit: RouteKit,
  request: FastifyRequest,
  removals: number,
  allowed: boolean,
  limits: ExchangeSettings,
): Promise<void> {
  if (allowed || removals <= limits.massRemoveFloor) return;
  await waitForReadModelAt(kit.deps, kit.def.collection, await kit.deps.eventStore.headPosition());
  const records = await kit.deps.readStore.count(kit.collection(), (await selectionHere(kit, [], request)) ?? checkedFilter(kit, []));
  const most = Math.max(limits.massRemoveFloor, Math.floor((records * limits.massRemovePercent) / 100));
  if (removals <= most) return;
  throw new DomainError(
    'DIFF.MASS_REMOVE',
    `This would delete ${String(removals)} of the ${String(records)} ${kit.def.path} records, more than ${String(most)} ` +
      `(${String(limits.massRemovePercent)}% of them, at least ${String(limits.massRemoveFloor)}): send allowMassRemove=true to apply it`,
    [`allowMassRemove: true is required to delete ${String(removals)} records at once`],
  );
}

const JOB_TEXT = (limits: ExchangeSettings) =>
  `More than ${String(limits.applyJobThreshold)} entries (DIFF_APPLY_JOB_THRESHOLD) are applied as a job instead: 202 with the job's id and its ` +
  '`Location` (`GET /api/v1/jobs/{id}`, admin): jobType DIFF_APPLY, progress in `data.progress`, the outcome in `data.result` (counts of ' +
  'applied, unchanged and failed entries, and the first 100 failures as `{ index, diffType, error }`). Its caller follows it at ' +
  '`GET /api/v1/jobs/{id}/state` and may cancel it (it stops before its next window of 8 entries) and retry it (it resumes after the entries ' +
  'done) while the process that accepted it holds its entries (4 stopped jobs at most, for an hour). It runs in that process; if that process ' +
  'ends, the job is marked FAILED saying so: apply the same diff again (applying is idempotent).';

function importRoute(kit: RouteKit, limits: ExchangeSettings): void {
  const { r, def, base, tags, write, record } = kit;
  r.post(
    `${base}/import`,
    {
      config: write,
      schema: {
        tags,
        summary: `Import an export of ${def.name} records: its diff, and with save=true its application`,
        description:
          `The multipart field \`file\` holds an export object as JSON (at most ${String(limits.importFileMaxBytes)} bytes, IMPORT_FILE_MAX_BYTES: 413 beyond). ` +
          'The file is read as it arrives, one item of `data` at a time, and compared holding no record but the one at hand and an index of about 33 bytes per record (the items and the diff are kept in ' +
          'temporary files, deleted when the answer ends), so an export of any size can be imported. ' +
          'A file that is not UTF-8 JSON (400 naming the position), not an export object, or holds an item of `data` that is not a valid record is a 400 saying which ' +
          `(\`data[i].field\`). The answer is its diff: ${DIFF_DESCRIPTION} With save=true the diff is applied as by diff/apply, and an entry ` +
          `that failed carries \`error\`. ${MASS_REMOVE_TEXT(limits)} ${JOB_TEXT(limits)}`,
        consumes: ['multipart/form-data'],
        querystring: z.strictObject({
          save: bool.default(false),
          compareField: compareFieldQuery(def),
          allowMassRemove: allowMassRemoveQuery,
        }),
        // Read as it arrives by importedDiff (multipart: fastify validates no body); documented as sent.
        body: z
          .unknown()
          .meta({
            type: 'object',
            properties: { file: { type: 'string', format: 'binary', description: 'the export object as JSON' } },
            required: ['file'],
          }),
        response: { 200: z.array(diffEntrySchema(def, record)), 202: JobAckSchema, ...errors(400, 413) },
      },
    },
    async (request, reply) => {
      const diff = await importedDiff(kit, request, limits);
      if (!request.query.save) return sendItems(reply, closing(diff, diff.entries()));
      const allowed = assertRemovalsAllowed(kit, request, diff.removals, request.query.allowMassRemove, limits);
      const env = await allowed
        .then(() => applyEnv(kit, request, diff.compareField))
        .catch((error: unknown) => {
          diff.close();
          throw error;
        });
      // The job closes the import's files when it ends (or fails to start).
      if (diff.count > limits.applyJobThreshold)
        return answerJob(reply, env, { length: diff.count, items: diff.entries, close: diff.close });
      return sendItems(reply, closing(diff, appliedEntries(env, diff.entries())));
    },
  );
}

/** Each entry as applied, with `error` when it failed. */
async function* appliedEntries(env: ApplyEnv, entries: AsyncIterable<DiffEntry>): AsyncGenerator<DiffEntry & { error?: unknown }> {
  let index = 0;
  for await (const entry of entries) {
    const outcome = await applyEntry(env, entry, index);
    yield outcome.kind === 'failed' ? { ...entry, error: failureOf(env, entry, index, outcome.error).error } : entry;
    index++;
  }
}

/** The items, then the import's temporary files deleted: at their end, on an error, and when the
 * answer is cut short (its stream destroyed, even before its first item: Readable.from calls
 * `return`, which a generator not yet started would ignore). */
function closing<T>(diff: ImportedDiff, items: AsyncIterable<T>): AsyncIterable<T> {
  return {
    [Symbol.asyncIterator]: () => {
      const it = items[Symbol.asyncIterator]();
      return {
        next: async () => {
          try {
            const step = await it.next();
            if (step.done === true) diff.close();
            return step;
          } catch (error) {
            diff.close();
            throw error;
          }
        },
        return: async (value?: unknown) => {
          diff.close();
          await it.return?.();
          return { done: true, value: value as T };
        },
      };
    },
  };
}

function applyRoute(kit: RouteKit, limits: ExchangeSettings): void {
  const { r, def, base, tags, write, record } = kit;
  r.post(
    `${base}/diff/apply`,
    {
      config: { ...write, maxJsonValues: EXCHANGE_JSON_VALUES },
      bodyLimit: limits.importMaxBytes,
      schema: {
        tags,
        summary: `Apply a diff of ${def.name} records`,
        description:
          'NEW creates `right` (keeping its id, of any UUID version, or with one derived from the entry when it has none; a record deleted here ' +
          'under that id is made again on its stream), CHANGE replaces the record here matched by `compareField` with `right`, REMOVE deletes the ' +
          "record matched by `left`; each is an ordinary event of the caller, all under the request's correlation id. The answer holds one " +
          'item per entry, in order: the record as it now is (for REMOVE, as it was before its delete), or a DiffEntryFailure ' +
          '`{ index, diffType, error }` for an entry that failed (an invalid record, a missing one, a conflict, no access); the others are ' +
          'applied regardless. Idempotent: an entry whose record is already as it would leave it writes nothing (NEW of an equal record, ' +
          'CHANGE to equal fields, REMOVE of a record that is gone), and each write carries an idempotency key derived from the entry and ' +
          'the version it changes, so the same diff applied twice, even at once, writes one set of events. A NEW whose record exists here ' +
          'with other fields is 409 DIFF.ALREADY_EXISTS for that entry. An entry naming a record the caller may not read answers what the ' +
          'plain create, replace or delete of it would answer that caller (a create: 409 for its taken id or code; a replace or delete: 404 ' +
          `naming what the entry named), never with the record. ${MASS_REMOVE_TEXT(limits)} ${JOB_TEXT(limits)}`,
        querystring: z.strictObject({ compareField: compareFieldQuery(def), allowMassRemove: allowMassRemoveQuery }),
        body: z.array(diffEntryInput),
        response: { 200: z.array(z.union([record, DiffEntryFailureSchema])), 202: JobAckSchema, ...errors(400, 413) },
      },
    },
    async (request, reply) => {
      const compareField = checkCompareField(def, request.query.compareField ?? 'id');
      const entries = request.body as DiffEntry[];
      await assertRemovalsAllowed(
        kit,
        request,
        entries.filter((e) => e.diffType === 'DIFF_TYPE_REMOVE').length,
        request.query.allowMassRemove,
        limits,
      );
      const env = await applyEnv(kit, request, compareField);
      if (entries.length > limits.applyJobThreshold) return answerJob(reply, env, entries);
      return sendItems(reply, appliedItems(env, entries));
    },
  );
}

/** The four routes, for each that the resource offers; a large apply's job is awaited when the app closes. */
export function exchangeRoutes(kit: RouteKit): void {
  const limits = exchangeSettings(kit.deps);
  if (kit.offers('export')) exportRoute(kit);
  if (kit.offers('exportDiff')) exportDiffRoute(kit, limits);
  // multipart/form-data only where a file is taken (other routes still answer it 415): one file,
  // at most IMPORT_FILE_MAX_BYTES (413 beyond).
  if (kit.offers('import')) {
    void kit.app.register(async (scope) => {
      await scope.register(fastifyMultipart, { limits: { fileSize: limits.importFileMaxBytes, ...IMPORT_FORM } });
      importRoute({ ...kit, app: scope, r: scope.withTypeProvider<ZodTypeProvider>() }, limits);
    });
  }
  if (kit.offers('applyDiff')) {
    applyRoute(kit, limits);
    kit.app.addHook('onClose', async () => {
      await Promise.all([...runningApplies(kit.deps)]);
      closeStoppedApplies(kit.deps);
    });
  }
}
