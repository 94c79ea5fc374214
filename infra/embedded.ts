// The embedded stores: the SQLite event log (synchronous=FULL) and the SQLite read models
// (synchronous=NORMAL, rebuildable from the log) in two files of one data folder.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { openSqliteEventStore } from './sqlite/eventStore.ts';
import { openSqliteReadStore } from './sqlite/readStore.ts';

export function openEmbeddedStores(dataDir: string) {
  mkdirSync(dataDir, { recursive: true });
  return {
    eventStore: openSqliteEventStore(join(dataDir, 'events.db')),
    readStore: openSqliteReadStore({ path: join(dataDir, 'read-models.db') }),
  };
}
