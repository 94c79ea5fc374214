// The BlobStore contract on the embedded SQLite file, plus what only this adapter promises: its
// own file in DATA_DIR, with the event log's journal.

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { afterAll, describe, expect, it } from 'vitest';
import { BLOBS_FILE, openEmbeddedStores } from '../../../infra/embedded.ts';
import { openSqliteBlobStore } from '../../../infra/sqlite/blobStore.ts';
import { blobStoreContract } from '../../support/blobStoreContract.ts';

const dir = mkdtempSync(join(tmpdir(), 'blob-store-'));
const file = join(dir, BLOBS_FILE);

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Read beside the adapter, through a connection of its own. */
function inspect<T>(read: (db: DatabaseSync) => T): T {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return read(db);
  } finally {
    db.close();
  }
}

blobStoreContract('SQLite file', {
  open: () => Promise.resolve(openSqliteBlobStore(file)),
  copies: (sha256) =>
    Promise.resolve(inspect((db) => (db.prepare('SELECT count(*) AS n FROM blobs WHERE sha256 = ?').get(sha256) as { n: number }).n)),
});

describe('SqliteBlobStore', () => {
  it('keeps its blobs in a WAL-journalled file of its own', () => {
    expect(inspect((db) => db.prepare('PRAGMA journal_mode').get())).toEqual({ journal_mode: 'wal' });
  });

  it('is opened with the embedded stores, as blobs.db in DATA_DIR', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'blob-embedded-'));
    try {
      const stores = openEmbeddedStores(dataDir);
      const ref = await stores.blobStore.put(new Uint8Array([1, 2, 3]), 'application/octet-stream');
      await Promise.all([stores.eventStore.close(), stores.readStore.close(), stores.blobStore.close()]);
      expect(existsSync(join(dataDir, 'blobs.db'))).toBe(true);
      const reopened = openSqliteBlobStore(join(dataDir, 'blobs.db'));
      expect(await reopened.has(ref.sha256)).toBe(true);
      await reopened.close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('rejects, not throws, when used after close', async () => {
    const store = openSqliteBlobStore(join(dir, 'closed.db'));
    await store.close();
    await store.close();
    const put = store.put(new Uint8Array([1]), 'text/plain');
    await expect(put).rejects.toThrow();
  });
});
