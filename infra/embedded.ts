// The embedded stores: the SQLite event log (synchronous=FULL), the SQLite read models
// (synchronous=NORMAL, rebuildable from the log) and the SQLite blob store (synchronous=FULL, as
// durable as the events that name its blobs) in three files of one data folder.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Clock } from '../domain/ports.ts';
import { openSqliteBlobStore } from './sqlite/blobStore.ts';
import { openSqliteEventStore } from './sqlite/eventStore.ts';
import { openSqliteReadStore } from './sqlite/readStore.ts';

export const EVENT_LOG_FILE = 'events.db';
export const READ_MODELS_FILE = 'read-models.db';
export const BLOBS_FILE = 'blobs.db';

/** `clock` decides when the read store's leases lapse (the system clock unless given). */
export function openEmbeddedStores(dataDir: string, options: { clock?: Clock | undefined } = {}) {
  mkdirSync(dataDir, { recursive: true });
  return {
    eventStore: openSqliteEventStore(join(dataDir, EVENT_LOG_FILE)),
    readStore: openSqliteReadStore({ path: join(dataDir, READ_MODELS_FILE), clock: options.clock }),
    blobStore: openSqliteBlobStore(join(dataDir, BLOBS_FILE)),
  };
}
