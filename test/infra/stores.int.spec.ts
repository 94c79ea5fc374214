// Which stores the configuration opens, and the guard that keeps read models with the log they
// were folded from: embedded ones (`read-models.db.log`) and MongoDB's (on each MongoDB peer).

import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ConfigSchema } from '../../infra/config.ts';
import { openStores, type OpenedStores } from '../../infra/stores.ts';
import { eachMongoPeer, withDatabase } from '../support/mongoPeers.ts';
import { startServiceProcess, type ServiceProcess } from '../support/serviceProcess.ts';
import { startCanary } from '../support/canary.ts';

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
    // The KurrentDB named is a server that counts connections: the refusal comes before any.
    const kurrent = await startCanary();
    try {
      const EVENTSTORE_URL = `kurrentdb://${new URL(kurrent.url).host}?tls=false`;
      await expect(openStores({ DATA_DIR, EVENTSTORE_URL, MONGODB_URL: undefined })).rejects.toThrow(
        `read-models.db was folded from the embedded log, not the kurrentdb ${EVENTSTORE_URL} log: delete`,
      );
      expect(kurrent.connections()).toBe(0);
    } finally {
      await kurrent.close();
    }
  });

  it('names a KurrentDB that does not answer, and leaves nothing open', async () => {
    const DATA_DIR = freshDir();
    await expect(openStores({ DATA_DIR, EVENTSTORE_URL: 'kurrentdb://127.0.0.1:1?tls=false', MONGODB_URL: undefined })).rejects.toThrow(
      /KurrentDB at kurrentdb:\/\/127\.0\.0\.1:1\?tls=false does not answer/,
    );
  });
});

const closeAll = async (stores: OpenedStores): Promise<void> => {
  await stores.eventStore.close();
  await stores.readStore.close();
  await stores.blobStore.close();
};

describe('configuration', () => {
  it('takes MONGODB_URL without EVENTSTORE_URL: one process on the embedded log, its read models in MongoDB', () => {
    expect(ConfigSchema.safeParse({ MONGODB_URL: 'mongodb://127.0.0.1:27017/models' }).success).toBe(true);
  });
});

eachMongoPeer('openStores with the embedded log and read models', (_peer, url) => {
  const databases: string[] = [];
  /** A fresh database of the peer, dropped after the file. */
  const freshDatabase = (): string => {
    const dbName = `stores_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
    databases.push(dbName);
    return withDatabase(url(), dbName);
  };
  afterAll(async () => {
    const client = new MongoClient(url());
    try {
      for (const dbName of databases) await client.db(dbName).dropDatabase();
    } finally {
      await client.close();
    }
  });

  it('opens the embedded log with MongoDB read models and blobs, and reopens them on the same log', async () => {
    const DATA_DIR = freshDir();
    const MONGODB_URL = freshDatabase();
    const first = await openStores({ DATA_DIR, EVENTSTORE_URL: undefined, MONGODB_URL });
    expect(first.description).toEqual([
      `event log: SQLite ${join(DATA_DIR, 'events.db')}`,
      `read models: MongoDB at ${MONGODB_URL}`,
      `blobs: MongoDB GridFS at ${MONGODB_URL}`,
    ]);
    await closeAll(first);
    await closeAll(await openStores({ DATA_DIR, EVENTSTORE_URL: undefined, MONGODB_URL }));
  });

  it('refuses read models folded from another embedded log', async () => {
    const MONGODB_URL = freshDatabase();
    await closeAll(await openStores({ DATA_DIR: freshDir(), EVENTSTORE_URL: undefined, MONGODB_URL }));
    await expect(openStores({ DATA_DIR: freshDir(), EVENTSTORE_URL: undefined, MONGODB_URL })).rejects.toThrow(
      /the read models in MongoDB at .* were folded from the embedded log [0-9a-f-]{36}, not this embedded log [0-9a-f-]{36}: give MONGODB_URL another database/,
    );
  });

  it('runs the whole service (npm start) on the embedded log with its read models in MongoDB: serves writes and searches, restarts on its data, refuses another log', async () => {
    const DATA_DIR = freshDir();
    const MONGODB_URL = freshDatabase();
    const env = { ...process.env, PORT: '0', DATA_DIR, MONGODB_URL, LOG_LEVEL: 'warn', EVENTSTORE_URL: '', KAFKA_BROKERS: '', ROLE: 'all' };
    const stop = async (s: ServiceProcess): Promise<void> => {
      s.child.kill('SIGTERM');
      if (s.child.exitCode === null) await new Promise((r) => s.child.once('exit', r));
    };
    const call = (s: ServiceProcess, path: string, body?: unknown) =>
      fetch(`${s.url}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const first = await startServiceProcess(env);
    try {
      expect(first.output()).toContain(`read models: MongoDB at ${MONGODB_URL}`);
      const created = await call(first, '/api/v1/user-group-types', { code: 'OVER-MONGO', name: 'Over MongoDB', registry: {} });
      expect(created.status).toBe(201);
      const at = created.headers.get('x-event-position') ?? '';
      const found = await call(first, `/api/v1/user-group-types/search?minPosition=${at}`, {
        filter: [{ column: 'code', operator: 'LIKE', value: 'over-%' }],
      });
      expect(((await found.json()) as { code: string }[]).map((r) => r.code)).toEqual(['OVER-MONGO']);
    } finally {
      await stop(first);
    }
    const again = await startServiceProcess(env);
    try {
      const found = await call(again, '/api/v1/user-group-types/search', {});
      expect(((await found.json()) as { code: string }[]).map((r) => r.code)).toEqual(['OVER-MONGO']);
    } finally {
      await stop(again);
    }
    await expect(startServiceProcess({ ...env, DATA_DIR: freshDir() })).rejects.toThrow(
      /were folded from the embedded log [0-9a-f-]{36}, not this embedded log/,
    );
  }, 120_000);
});
