// The embedded stores: the SQLite event log (synchronous=FULL) and the SQLite read models
// (synchronous=NORMAL, rebuildable from the log) in two files of one data folder.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { openSqliteEventStore } from './sqlite/eventStore.ts';
import { openSqliteReadStore } from './sqlite/readStore.ts';

export const EVENT_LOG_FILE = 'events.db';
export const READ_MODELS_FILE = 'read-models.db';

export function openEmbeddedStores(dataDir: string) {
  mkdirSync(dataDir, { recursive: true });
  return {
    eventStore: openSqliteEventStore(join(dataDir, EVENT_LOG_FILE)),
    readStore: openSqliteReadStore({ path: join(dataDir, READ_MODELS_FILE) }),
  };
}
