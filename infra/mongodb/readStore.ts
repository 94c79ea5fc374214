// The production read store: the ReadStore port over MongoDB. One collection per read model
// (`rm_<collection>`) of StoredDocuments, plus `checkpoints` and `leases`. What a query, a write or
// a lease means is decided in query.ts, pure and replayed through mingo by the tests; this file
// only sends it to the server and reads the answers back.

import {
  MongoBulkWriteError,
  MongoClient,
  MongoError,
  MongoErrorLabel,
  MongoNetworkError,
  MongoOperationTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  ReadPreference,
  type AnyBulkWriteOperation,
  type Collection,
  type Db,
  type Filter,
  type IndexDescription,
  type IndexDescriptionInfo,
  type UpdateFilter,
  type WriteConcernSettings,
} from 'mongodb';
import type {
  CollectionOptions,
  Document,
  DocumentWrite,
  JsonPage,
  Page,
  Position,
  ReadStore,
  VersionedDocument,
} from '../../domain/ports.ts';
import { StoreUnavailableError } from '../../domain/shared/errors.ts';
import { redactCredentials } from '../redact.ts';
import type { Query } from '../../domain/shared/filtering.ts';
import {
  CHECKPOINTS,
  LEASES,
  LIVE,
  checkpointUpdate,
  collectionName,
  compileAutocomplete,
  compileFilter,
  compileScan,
  compileSort,
  decodeDocument,
  decodePosition,
  encodePosition,
  indexSpec,
  leaseFilter,
  leaseFilterAt,
  leaseOwnedBy,
  leaseUpdate,
  leaseUpdateAt,
  storedDocument,
  versionedWrite,
  type Checkpoint,
  type Lease,
  type MongoFilter,
  type StoredDocument,
} from './query.ts';

const DUPLICATE_KEY = 11000;
const NAMESPACE_NOT_FOUND = 26;
const TYPE_MISMATCH = 14;
const NOT_IMPLEMENTED = 238;
/** Documents per insertMany of a bulk load: bounds what one batch holds in memory (the driver
 * splits a batch into messages of the server's size itself). */
const BULK_LOAD_BATCH = 10_000;

const TRANSIENT_LABELS: readonly string[] = [
  MongoErrorLabel.RetryableWriteError,
  MongoErrorLabel.RetryableError,
  MongoErrorLabel.TransientTransactionError,
  MongoErrorLabel.SystemOverloadedError,
];

/** Server errors that mean "not now" rather than "never": shutting down, a primary changing, a
 * query over its time limit. */
const TRANSIENT_CODES: ReadonlySet<number> = new Set([
  50, // MaxTimeMSExpired
  91, // ShutdownInProgress
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
]);

/** How long one search, count, size, scan or autocomplete may run on the server (a LIKE pattern such as
 * `a%a%a%…b` backtracks); beyond it the request answers 503. */
const QUERY_TIME_LIMIT_MS = 10_000;

/**
 * What leases, checkpoints and the read-model generations' compare-and-set rely on, whatever
 * MONGODB_URL asks (`readPreference=secondaryPreferred` or `w=1` there would break them silently):
 * reads from the primary, which has every acknowledged write, and writes a majority acknowledged,
 * which no failover rolls back. Searches follow the URL.
 */
const PRIMARY = ReadPreference.primary;
const MAJORITY: WriteConcernSettings = { w: 'majority' };
const COORDINATION = { readPreference: PRIMARY, writeConcern: MAJORITY };

/** The server refused an index option it does not implement (FerretDB: partial indexes). */
const refusedOption = (error: unknown, option: string): boolean =>
  error instanceof MongoServerError && error.code === NOT_IMPLEMENTED && error.message.includes(option);

/** The server refused an update given as a pipeline (FerretDB: "BSON field 'update.updates.u' is
 * the wrong type 'array', expected type 'object'"). */
const refusedPipelineUpdate = (error: unknown): boolean =>
  error instanceof MongoServerError &&
  (error.code === NOT_IMPLEMENTED || (error.code === TYPE_MISMATCH && error.message.includes('updates.u')));

function isTransient(error: unknown): boolean {
  if (error instanceof MongoServerError && typeof error.code === 'number' && TRANSIENT_CODES.has(error.code)) return true;
  if (error instanceof MongoNetworkError || error instanceof MongoServerSelectionError) return true;
  // A client whose first connection failed stays closed; the service is started only after a
  // successful connect (openMongoReadStore), so this reaches a request only in that state.
  if (error instanceof MongoTopologyClosedError) return true;
  if (error instanceof MongoOperationTimeoutError) return true;
  return error instanceof MongoError && TRANSIENT_LABELS.some((label) => error.hasErrorLabel(label));
}

/** The port's error for a driver error: transient failures become StoreUnavailableError, the
 * rest stay the driver's own errors (the projector retries either). The blob store on the same
 * server shares the classification and names itself. */
export function translateError(error: unknown, store: 'READ_STORE' | 'BLOB_STORE' = 'READ_STORE'): unknown {
  return isTransient(error) ? new StoreUnavailableError(store, error) : error;
}

export const isDuplicateKey = (error: unknown): boolean => error instanceof MongoError && error.code === DUPLICATE_KEY;

/** The indexes of the operations of an unordered bulk write that hit an existing `_id` when every
 * failure was of that kind (else undefined): the guard's filter missed because a version at least
 * as new is stored, or because another writer inserted the document at the same moment. */
export function duplicateKeyFailures(error: MongoBulkWriteError): number[] | undefined {
  const failed = error.result.getWriteErrors();
  const onlyDuplicates =
    failed.length > 0 && failed.every((w) => w.code === DUPLICATE_KEY) && error.result.getWriteConcernError() === undefined;
  return onlyDuplicates ? failed.map((w) => w.index) : undefined;
}

const asFilter = <T>(filter: MongoFilter): Filter<T> => filter as Filter<T>;

/** A StoredDocument with the log position last written with it (encodePosition's fixed-width
 * decimal string, beside the version `v`), when that write carried one. Read back by getMany only:
 * find and scan project `doc`, findIds `_id`, autocomplete the document paths, so it never appears
 * in their answers. */
type PositionedDocument = StoredDocument & { _position?: string };

/** The stored form with the write's position beside the version, or as it is when it has none:
 * a replacement without one leaves none, as the write carried none. */
function positioned<T extends object>(stored: T, position: Position | undefined): T & { _position?: string } {
  return position === undefined ? stored : { ...stored, _position: encodePosition(position) };
}

function stored(row: Pick<PositionedDocument, 'v' | 'deleted' | 'doc' | '_position'>): Omit<VersionedDocument, 'id'> {
  const found: Omit<VersionedDocument, 'id'> = { version: row.v, doc: row.deleted || row.doc === null ? null : decodeDocument(row.doc) };
  if (typeof row._position === 'string' && /^\d+$/.test(row._position)) found.position = decodePosition(row._position);
  return found;
}

export class MongoReadStore implements ReadStore {
  readonly #client: MongoClient;
  readonly #db: Db;
  /**
   * What this server refused of what MongoDB offers, learnt from its first refusal: FerretDB has
   * no partial indexes (the index then holds tombstones too) and no update pipelines (a lease then
   * reads the server's clock first instead of `$$NOW`). MongoDB never refuses either.
   */
  readonly #lacks = { partialIndexes: false, pipelineUpdates: false };
  /**
   * Whether a dropped collection can be created again at once, asked of the server once (buildInfo).
   * Not on FerretDB (1.x over SQLite): it runs each statement on one of a pool of SQLite
   * connections, and one that last read the schema before a drop still sees the dropped table and
   * its indexes, so creating them again there can fail ("index … already exists": a rebuild failed
   * so, now and then). There a collection is emptied instead of dropped.
   */
  #dropsSafely: boolean | undefined;

  constructor(client: MongoClient, db: Db) {
    this.#client = client;
    this.#db = db;
  }

  /** Drops a collection with its indexes where the server can create them again at once; else
   * deletes its documents, its indexes kept (see #dropsSafely). */
  async #drop(documents: Collection<PositionedDocument>): Promise<void> {
    if (this.#dropsSafely === undefined) {
      const info = await this.#db.command({ buildInfo: 1 });
      this.#dropsSafely = !('ferretdbVersion' in info);
    }
    if (this.#dropsSafely) await documents.drop();
    else await documents.deleteMany({});
  }

  #documents(collection: string): Collection<PositionedDocument> {
    return this.#db.collection<PositionedDocument>(collectionName(collection));
  }

  get #checkpoints(): Collection<Checkpoint> {
    return this.#db.collection<Checkpoint>(CHECKPOINTS, COORDINATION);
  }

  get #leases(): Collection<Lease> {
    return this.#db.collection<Lease>(LEASES, COORDINATION);
  }

  async #run<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw translateError(error);
    }
  }

  /** Text paths get no index of their own here: see query.ts on LIKE. */
  async ensureCollection(collection: string, indexedPaths: readonly string[], _options?: CollectionOptions): Promise<void> {
    const documents = this.#documents(collection);
    const specs = [...new Set(indexedPaths)].filter((path) => path !== 'id').map(indexSpec);
    await this.#run(async () => {
      if (specs.length > 0) await this.#createIndexes(documents, specs);
    });
  }

  /** Only the indexes the collection lacks: creating existing ones again is a no-op to MongoDB, but
   * FerretDB drops the connection when every index asked for exists. */
  async #createIndexes(documents: Collection<PositionedDocument>, wanted: IndexDescription[]): Promise<void> {
    const existing = new Set((await this.#secondaryIndexes(documents)).map((index) => index.name));
    const specs = wanted.filter((spec) => spec.name === undefined || !existing.has(spec.name));
    if (specs.length > 0) await this.#createSpecs(documents, specs);
  }

  async #createSpecs(documents: Collection<PositionedDocument>, specs: IndexDescription[]): Promise<void> {
    const whole = (): IndexDescription[] => specs.map(({ partialFilterExpression: _live, ...spec }) => spec);
    if (this.#lacks.partialIndexes) {
      await documents.createIndexes(whole());
      return;
    }
    try {
      await documents.createIndexes(specs);
    } catch (error) {
      if (!refusedOption(error, 'partialFilterExpression')) throw error;
      this.#lacks.partialIndexes = true;
      await documents.createIndexes(whole());
    }
  }

  async applyBatch(collection: string, writes: readonly DocumentWrite[], checkpoint: Position, projection = collection): Promise<void> {
    const documents = this.#documents(collection);
    // Encoded before anything is sent, so a document that cannot be stored fails the whole batch.
    const operations: AnyBulkWriteOperation<PositionedDocument>[] = writes.map((write) => {
      const { filter, replacement } = versionedWrite(write);
      return {
        replaceOne: { filter: asFilter<PositionedDocument>(filter), replacement: positioned(replacement, write.position), upsert: true },
      };
    });
    await this.#run(async () => {
      if (operations.length > 0) await this.#write(documents, operations);
      // After the writes: a crash in between replays a batch whose writes the version guard ignores.
      await this.#advance(projection, checkpoint);
    });
  }

  /** Moves a checkpoint forward (`$max`), creating it when missing. Of two first writes at once,
   * MongoDB retries the loser's upsert itself (its filter is an `_id` equality); FerretDB answers a
   * duplicate key, and the write is sent again: the checkpoint exists by then. */
  async #advance(id: string, position: Position): Promise<void> {
    const advance = checkpointUpdate(position) as UpdateFilter<Checkpoint>;
    try {
      await this.#checkpoints.updateOne({ _id: { $eq: id } }, advance, { upsert: true });
    } catch (error) {
      if (!isDuplicateKey(error)) throw error;
      await this.#checkpoints.updateOne({ _id: { $eq: id } }, advance, { upsert: true });
    }
  }

  /**
   * A duplicate key means the guard's filter missed an existing document. The server does not retry
   * an upsert whose filter is more than an `_id` equality, so when two writers inserted one new
   * document at once the loser's write is sent once more: now that the document exists, the guard
   * decides, and a second duplicate key really means a version at least as new is stored.
   *
   * A server that stops an unordered write at its first failure (FerretDB) answers for fewer
   * operations than it was sent; the ones it did not answer for are sent again rather than lost
   * (a write that did land is a no-op the second time: the guard misses).
   */
  async #write(
    documents: Collection<PositionedDocument>,
    operations: AnyBulkWriteOperation<PositionedDocument>[],
    retried = false,
  ): Promise<void> {
    const duplicates: AnyBulkWriteOperation<PositionedDocument>[] = [];
    for (let pending = operations; pending.length > 0;) {
      try {
        await documents.bulkWrite(pending, { ordered: false });
        pending = [];
      } catch (error) {
        const failed = error instanceof MongoBulkWriteError ? duplicateKeyFailures(error) : undefined;
        if (failed === undefined || !(error instanceof MongoBulkWriteError)) throw error;
        const skipped = new Set(failed);
        duplicates.push(...pending.filter((_op, i) => skipped.has(i)));
        const answered = failed.length + error.result.matchedCount + error.result.upsertedCount;
        pending = answered < pending.length ? pending.filter((_op, i) => !skipped.has(i)) : [];
      }
    }
    if (!retried && duplicates.length > 0) await this.#write(documents, duplicates, true);
  }

  async saveCheckpoint(processor: string, position: Position): Promise<void> {
    await this.#run(() => this.#advance(processor, position));
  }

  async checkpoint(projection: string): Promise<Position> {
    const row = await this.#run(() => this.#checkpoints.findOne({ _id: { $eq: projection } }));
    return decodePosition(row?.position);
  }

  async getMany(collection: string, ids: readonly string[]): Promise<Map<string, Omit<VersionedDocument, 'id'>>> {
    const documents = this.#documents(collection);
    const found = new Map<string, Omit<VersionedDocument, 'id'>>();
    if (ids.length === 0) return found;
    // From the primary: a generation record's compare-and-set reads back the write it just made.
    const rows = await this.#run(() => documents.find({ _id: { $in: [...ids] } }, { readPreference: PRIMARY }).toArray());
    for (const row of rows) found.set(row._id, stored(row));
    return found;
  }

  async find(collection: string, query: Query, page: Page): Promise<Document[]> {
    const documents = this.#documents(collection);
    const filter = asFilter<PositionedDocument>(compileFilter(query));
    const sort = compileSort(query);
    // A limit of 0 means "no limit" to MongoDB.
    if (page.limit <= 0) return [];
    const rows = await this.#run(() =>
      documents
        .find(filter, { sort, skip: Math.max(0, page.offset), limit: page.limit, projection: { doc: 1 }, maxTimeMS: QUERY_TIME_LIMIT_MS })
        .toArray(),
    );
    return rows.flatMap((row) => (row.doc === null ? [] : [decodeDocument(row.doc)]));
  }

  async findIds(collection: string, query: Query, page: Page): Promise<string[]> {
    const documents = this.#documents(collection);
    const filter = asFilter<PositionedDocument>(compileFilter(query));
    if (page.limit <= 0) return [];
    const rows = await this.#run(() =>
      documents
        .find(filter, {
          sort: compileSort(query),
          skip: Math.max(0, page.offset),
          limit: page.limit,
          projection: { _id: 1 },
          maxTimeMS: QUERY_TIME_LIMIT_MS,
        })
        .toArray(),
    );
    return rows.map((row) => row._id);
  }

  async count(collection: string, query: Query): Promise<number> {
    const documents = this.#documents(collection);
    const filter = asFilter<PositionedDocument>(compileFilter(query));
    return this.#run(() => documents.countDocuments(filter, { maxTimeMS: QUERY_TIME_LIMIT_MS }));
  }

  async autocomplete(collection: string, paths: readonly string[], term: string, limit: number): Promise<string[]> {
    const documents = this.#documents(collection);
    if (paths.length === 0 || limit <= 0) return [];
    const pipeline = compileAutocomplete(paths, term, limit);
    const rows = await this.#run(() => documents.aggregate<{ _id: unknown }>(pipeline, { maxTimeMS: QUERY_TIME_LIMIT_MS }).toArray());
    return rows.map((row) => row._id).filter((value): value is string => typeof value === 'string');
  }

  async size(collection: string): Promise<number> {
    const documents = this.#documents(collection);
    return this.#run(() => documents.countDocuments(asFilter<PositionedDocument>(LIVE), { maxTimeMS: QUERY_TIME_LIMIT_MS }));
  }

  async scan(collection: string, options: { after?: string; limit: number; query?: Query }): Promise<Document[]> {
    const documents = this.#documents(collection);
    const limit = Math.floor(options.limit);
    // A limit of 0 means "no limit" to MongoDB.
    if (!(limit > 0)) return [];
    const { filter, sort } = compileScan(options.after, options.query);
    // Along the _id index even with a filter (another index would sort all its matches per page).
    const rows = await this.#run(() =>
      documents
        .find(asFilter<PositionedDocument>(filter), {
          sort,
          limit,
          hint: { _id: 1 },
          projection: { doc: 1 },
          maxTimeMS: QUERY_TIME_LIMIT_MS,
        })
        .toArray(),
    );
    return rows.flatMap((row) => (row.doc === null ? [] : [decodeDocument(row.doc)]));
  }

  /** The driver decodes each document from BSON whatever is asked: the page is `scan`'s, serialized. */
  async scanJson(collection: string, options: { after?: string; limit: number; query?: Query }): Promise<JsonPage> {
    const docs = await this.scan(collection, options);
    return { json: docs.map((doc) => JSON.stringify(doc)).join(','), count: docs.length, last: docs.at(-1)?.id };
  }

  /**
   * Drops the collection (its indexes with it: dropping beats deleting every document), inserts
   * the documents unordered in batches, then builds the indexes it had, each once over the loaded
   * collection. The indexes come back whatever happens; the checkpoint only when every document
   * is in. (On FerretDB the collection is emptied instead, its indexes kept: see #dropsSafely.)
   */
  async bulkLoad(
    collection: string,
    documents: Iterable<VersionedDocument> | AsyncIterable<VersionedDocument>,
    checkpoint: Position,
    projection = collection,
  ): Promise<void> {
    const target = this.#documents(collection);
    await this.#run(async () => {
      const indexes = await this.#secondaryIndexes(target);
      await this.#checkpoints.deleteOne({ _id: { $eq: projection } });
      await this.#drop(target);
      try {
        let batch: PositionedDocument[] = [];
        for await (const document of documents) {
          batch.push(positioned(storedDocument(document), document.position));
          if (batch.length < BULK_LOAD_BATCH) continue;
          await target.insertMany(batch, { ordered: false });
          batch = [];
        }
        if (batch.length > 0) await target.insertMany(batch, { ordered: false });
      } finally {
        if (indexes.length > 0) await this.#createIndexes(target, indexes);
      }
      await this.#advance(projection, checkpoint);
    });
  }

  /** The collection's indexes but `_id`'s, as createIndexes takes them; none when it does not exist. */
  async #secondaryIndexes(documents: Collection<PositionedDocument>): Promise<IndexDescription[]> {
    try {
      const listed: IndexDescriptionInfo[] = await documents.indexes();
      return listed
        .filter((index) => index.name !== '_id_')
        .map(({ key, name, partialFilterExpression }) => ({
          key,
          ...(name === undefined ? {} : { name }),
          ...(partialFilterExpression === undefined ? {} : { partialFilterExpression }),
        }));
    } catch (error) {
      if (error instanceof MongoServerError && error.code === NAMESPACE_NOT_FOUND) return [];
      throw error;
    }
  }

  /** Drops the collection with its indexes: one command, where deleting every document writes one
   * oplog entry each and leaves the empty collection behind. Whoever writes it again (a rebuild
   * reusing the generation) declares its indexes first (ensureCollection). FerretDB's is emptied
   * instead (#dropsSafely). */
  async reset(collection: string, projection: string): Promise<void> {
    const documents = this.#documents(collection);
    await this.#run(async () => {
      await this.#drop(documents);
      await this.#checkpoints.deleteOne({ _id: { $eq: projection } });
    });
  }

  async tryLease(projection: string, owner: string, ttlMs: number): Promise<boolean> {
    try {
      const result = await this.#takeLease(projection, owner, ttlMs);
      return result.matchedCount + result.upsertedCount > 0;
    } catch (error) {
      // The filter missed an existing lease, so the upsert tried to create it again: another holds it.
      if (isDuplicateKey(error)) return false;
      throw translateError(error);
    }
  }

  async #takeLease(projection: string, owner: string, ttlMs: number): Promise<{ matchedCount: number; upsertedCount: number }> {
    if (!this.#lacks.pipelineUpdates) {
      try {
        return await this.#leases.updateOne(asFilter<Lease>(leaseFilter(projection, owner)), leaseUpdate(owner, ttlMs), { upsert: true });
      } catch (error) {
        if (!refusedPipelineUpdate(error)) throw error;
        this.#lacks.pipelineUpdates = true;
      }
    }
    const { localTime } = await this.#db.command({ hello: 1 }, { readPreference: PRIMARY });
    if (!(localTime instanceof Date)) throw new Error('the server answered hello without its localTime, which a lease reads as its clock');
    const update = leaseUpdateAt(owner, ttlMs, localTime) as UpdateFilter<Lease>;
    return await this.#leases.updateOne(asFilter<Lease>(leaseFilterAt(projection, owner, localTime)), update, { upsert: true });
  }

  async releaseLease(projection: string, owner: string): Promise<void> {
    await this.#run(() => this.#leases.deleteOne(asFilter<Lease>(leaseOwnedBy(projection, owner))));
  }

  /**
   * The log these read models were folded from (`log` names it, e.g. `embedded <uuid>`): recorded
   * by the first process to open the database, answered to every later one, which refuses to
   * start when it follows another log (its positions would mean other events).
   */
  async claimLog(log: string): Promise<string> {
    const claims = this.#db.collection<{ _id: string; log: string }>(FOLDED_FROM, COORDINATION);
    return await this.#run(async () => {
      const claim = async (): Promise<string | undefined> => (await claims.findOne({ _id: { $eq: 'log' } }))?.log;
      const recorded = await claim();
      if (recorded !== undefined) return recorded;
      try {
        await claims.insertOne({ _id: 'log', log });
      } catch (error) {
        // Another process recorded its log at the same moment: its claim stands.
        if (!isDuplicateKey(error)) throw error;
      }
      return (await claim()) ?? log;
    });
  }

  async close(): Promise<void> {
    await this.#client.close();
  }
}

/** Where the read models' database says which log they were folded from (claimLog). */
const FOLDED_FROM = 'folded_from';

/** The database when neither the URL's path nor the caller names one. */
export const DEFAULT_DATABASE = 'admin-read-models';
const SYSTEM_DATABASES: readonly string[] = ['admin', 'local', 'config'];

/** How long a request waits for a reachable server before it answers 503, unless the URL says
 * (`serverSelectionTimeoutMS`); the driver's own default is 30 s. */
const SERVER_SELECTION_TIMEOUT_MS = 5_000;

/** Opens the read store on its own client (see connectMongo). */
export async function openMongoReadStore(url: string, options: { dbName?: string } = {}): Promise<MongoReadStore> {
  const { client, db } = await connectMongo(url, options);
  return new MongoReadStore(client, db);
}

/** Connects and pings, so a wrong URL or a server that is down fails at start-up with a clear
 * message. The database is `dbName`, else the one the URL's path names, else DEFAULT_DATABASE:
 * the read models' and the blobs' alike. */
export async function connectMongo(url: string, options: { dbName?: string } = {}): Promise<{ client: MongoClient; db: Db }> {
  const where = redactCredentials(url);
  let client: MongoClient;
  try {
    client = new MongoClient(
      url,
      /[?&]serverSelectionTimeoutMS=/i.test(url) ? {} : { serverSelectionTimeoutMS: SERVER_SELECTION_TIMEOUT_MS },
    );
  } catch (error) {
    throw new Error(`MONGODB_URL is not a MongoDB connection string (${where}): ${(error as Error).message}`, { cause: error });
  }
  const name = options.dbName ?? client.options.dbName;
  // The driver reads a URL without a path as the database `test`.
  const unnamed = name === '' || (name === 'test' && !/\/test([?]|$)/.test(url));
  const dbName = unnamed ? DEFAULT_DATABASE : name;
  if (SYSTEM_DATABASES.includes(dbName)) {
    await client.close();
    throw new Error(
      `MONGODB_URL names the database ${JSON.stringify(dbName)}, which is MongoDB's own; name another in its path, e.g. /${DEFAULT_DATABASE}`,
    );
  }
  try {
    await client.connect();
    const db = client.db(dbName);
    await db.command({ ping: 1 });
    return { client, db };
  } catch (error) {
    await client.close();
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`MongoDB at ${where} does not answer (${reason}); start it (docker compose up -d mongodb) or unset MONGODB_URL`, {
      cause: error,
    });
  }
}
