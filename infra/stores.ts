// Opens the stores the configuration names: KurrentDB and MongoDB when their URLs are set, the
// embedded SQLite files in DATA_DIR otherwise. The only place that picks an adapter; each may be
// chosen on its own (e.g. KurrentDB with SQLite read models on one machine).

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BlobStore, EventStore, ReadStore } from '../domain/ports.ts';
import type { Config } from './config.ts';
import { BLOBS_FILE, EVENT_LOG_FILE, READ_MODELS_FILE } from './embedded.ts';
import { redactCredentials } from './redact.ts';
import { openKurrentEventStore } from './kurrentdb/eventStore.ts';
import { openMongoBlobStore } from './mongodb/blobStore.ts';
import { openMongoReadStore } from './mongodb/readStore.ts';
import { openSqliteBlobStore } from './sqlite/blobStore.ts';
import { openSqliteEventStore } from './sqlite/eventStore.ts';
import { openSqliteReadStore } from './sqlite/readStore.ts';

export type OpenedStores = {
  eventStore: EventStore;
  readStore: ReadStore;
  blobStore: BlobStore;
  /** One line per store saying which adapter runs and where, for the start-up banner. */
  description: string[];
};

/** The log, what the banner says of it, and its identity for read models kept in MongoDB: the
 * embedded log's own id; `kurrentdb` for any KurrentDB (which one is not told apart: its URL may be
 * spelt many ways). */
async function openEventStore(config: StoresConfig): Promise<[EventStore, string, string]> {
  if (config.EVENTSTORE_URL !== undefined) {
    const limit = config.EVENTSTORE_MAX_APPEND_BYTES;
    const store = await openKurrentEventStore(config.EVENTSTORE_URL, limit === undefined ? {} : { maxAppendBytes: limit });
    return [store, `event log: KurrentDB at ${redactCredentials(config.EVENTSTORE_URL)}`, 'kurrentdb'];
  }
  const path = join(config.DATA_DIR, EVENT_LOG_FILE);
  const log = openSqliteEventStore(path);
  return [log, `event log: SQLite ${path}`, `embedded log ${log.logId()}`];
}

/**
 * Embedded read models hold checkpoints of one log: folded from the embedded log, their positions
 * mean nothing to KurrentDB, and the other way round. A note beside them says which log they
 * follow, and a different log refuses the start instead of freezing or mixing the models.
 */
function checkSameLog(config: Pick<Config, 'EVENTSTORE_URL' | 'DATA_DIR'>, readModels: string): void {
  const note = join(config.DATA_DIR, `${READ_MODELS_FILE}.log`);
  const log = config.EVENTSTORE_URL === undefined ? 'embedded' : `kurrentdb ${redactCredentials(config.EVENTSTORE_URL)}`;
  if (!existsSync(readModels) || !existsSync(note)) {
    writeFileSync(note, `${log}\n`);
    return;
  }
  const folded = readFileSync(note, 'utf8').trim();
  if (folded !== log) {
    throw new Error(
      `${readModels} was folded from the ${folded} log, not the ${log} log: delete ${readModels} and ${note} to rebuild the read models from it`,
    );
  }
}

/**
 * Read models in MongoDB say which log they were folded from (claimLog), as the embedded ones do in
 * `read-models.db.log`: a database folded from another log (another DATA_DIR's, or KurrentDB's)
 * refuses the start instead of serving models ahead of, or apart from, this log. So one process
 * on the embedded log may keep its read models in MongoDB; a second process on another embedded
 * log is refused the same database.
 */
async function openReadStore(config: Pick<Config, 'MONGODB_URL' | 'DATA_DIR'>, log: string): Promise<[ReadStore, string]> {
  if (config.MONGODB_URL !== undefined) {
    const where = redactCredentials(config.MONGODB_URL);
    const store = await openMongoReadStore(config.MONGODB_URL);
    const folded = await store.claimLog(log).catch(async (error: unknown) => {
      await store.close();
      throw error;
    });
    if (folded !== log) {
      await store.close();
      throw new Error(
        `the read models in MongoDB at ${where} were folded from the ${folded}, not this ${log}: give MONGODB_URL another database (its path) or drop that one to fold them from this log`,
      );
    }
    return [store, `read models: MongoDB at ${where}`];
  }
  const path = join(config.DATA_DIR, READ_MODELS_FILE);
  return [openSqliteReadStore({ path }), `read models: SQLite ${path}`];
}

/** Blobs live beside the read models: in their MongoDB database, shared by every instance, or in
 * DATA_DIR. Unlike read models they cannot be rebuilt from the log, so they follow no log. */
async function openBlobStore(config: Pick<Config, 'MONGODB_URL' | 'DATA_DIR'>): Promise<[BlobStore, string]> {
  if (config.MONGODB_URL !== undefined) {
    return [await openMongoBlobStore(config.MONGODB_URL), `blobs: MongoDB GridFS at ${redactCredentials(config.MONGODB_URL)}`];
  }
  const path = join(config.DATA_DIR, BLOBS_FILE);
  return [openSqliteBlobStore(path), `blobs: SQLite ${path}`];
}

/** What opening the stores reads of the configuration (the KurrentDB append limit its default when absent). */
type StoresConfig = Pick<Config, 'EVENTSTORE_URL' | 'MONGODB_URL' | 'DATA_DIR'> & Partial<Pick<Config, 'EVENTSTORE_MAX_APPEND_BYTES'>>;

export async function openStores(config: StoresConfig): Promise<OpenedStores> {
  mkdirSync(config.DATA_DIR, { recursive: true });
  if (config.MONGODB_URL === undefined) checkSameLog(config, join(config.DATA_DIR, READ_MODELS_FILE));
  const [eventStore, events, log] = await openEventStore(config);
  const opened: { close(): Promise<void> }[] = [eventStore];
  try {
    const [readStore, reads] = await openReadStore(config, log);
    opened.push(readStore);
    const [blobStore, blobs] = await openBlobStore(config);
    return { eventStore, readStore, blobStore, description: [events, reads, blobs] };
  } catch (error) {
    for (const store of opened.reverse()) await store.close();
    throw error;
  }
}
