// Which stores the configuration opens, and the guard that keeps embedded read models with the log
// they were folded from.

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openStores } from '../../infra/stores.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const freshDir = (): string => {
  const d = mkdtempSync(join(tmpdir(), 'stores-'));
  dirs.push(d);
  return d;
};

describe('openStores', () => {
  it('opens the embedded stores when no URL is set, and says so', async () => {
    const DATA_DIR = freshDir();
    const stores = await openStores({ DATA_DIR, EVENTSTORE_URL: undefined, MONGODB_URL: undefined });
    expect(stores.description).toEqual([
      `event log: SQLite ${join(DATA_DIR, 'events.db')}`,
      `read models: SQLite ${join(DATA_DIR, 'read-models.db')}`,
      `blobs: SQLite ${join(DATA_DIR, 'blobs.db')}`,
    ]);
    await stores.eventStore.close();
    await stores.readStore.close();
    await stores.blobStore.close();
    expect(existsSync(join(DATA_DIR, 'read-models.db.log'))).toBe(true);
    expect(existsSync(join(DATA_DIR, 'blobs.db'))).toBe(true);
  });

  it('refuses embedded read models folded from another log, before connecting to anything', async () => {
    const DATA_DIR = freshDir();
    const first = await openStores({ DATA_DIR, EVENTSTORE_URL: undefined, MONGODB_URL: undefined });
    await first.eventStore.close();
    await first.readStore.close();
    await first.blobStore.close();
    const started = Date.now();
    await expect(openStores({ DATA_DIR, EVENTSTORE_URL: 'kurrentdb://127.0.0.1:1?tls=false', MONGODB_URL: undefined })).rejects.toThrow(
      /read-models\.db was folded from the embedded log, not the kurrentdb kurrentdb:\/\/127\.0\.0\.1:1\?tls=false log: delete/,
    );
    expect(Date.now() - started).toBeLessThan(500);
  });

  it('names a KurrentDB that does not answer, and leaves nothing open', async () => {
    const DATA_DIR = freshDir();
    await expect(openStores({ DATA_DIR, EVENTSTORE_URL: 'kurrentdb://127.0.0.1:1?tls=false', MONGODB_URL: undefined })).rejects.toThrow(
      /KurrentDB at kurrentdb:\/\/127\.0\.0\.1:1\?tls=false does not answer/,
    );
  });
});
