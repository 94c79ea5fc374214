// The BlobStore contract on MongoDB GridFS, on every MongoDB peer (test/support/mongoPeers.ts:
// FerretDB in every run where Go builds it; MongoDB against MONGODB_URL or in a container), a
// missing one skipped with the reason in the title. Plus what only a real server shows: two
// instances racing one blob, and files left by a race or an upload cut short.

import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { finished } from 'node:stream/promises';
import { GridFSBucket, MongoClient, ObjectId } from 'mongodb';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import { BLOB_BUCKET, MongoBlobStore, openMongoBlobStore } from '../../../infra/mongodb/blobStore.ts';
import { blobStoreContract } from '../../support/blobStoreContract.ts';
import { eachMongoPeer, watchedClient, withOptions } from '../../support/mongoPeers.ts';
import { limitedIt } from '../../support/peerLimits.ts';

const sha256Of = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');

eachMongoPeer('MongoDB blob store', (peer, serverUrl) => {
  const it = limitedIt(peer.limits);
  // One database per file and peer; a server that outlives the run keeps nothing of it.
  const dbName = `blobstore_test_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const opened: Promise<MongoBlobStore>[] = [];
  let inspector: MongoClient | undefined;

  beforeAll(() => {
    inspector = new MongoClient(serverUrl());
  });

  afterAll(async () => {
    for (const s of await Promise.allSettled(opened)) if (s.status === 'fulfilled') await s.value.close();
    await inspector?.db(dbName).dropDatabase();
    await inspector?.close();
  }, 60_000);

  const openStore = (): Promise<MongoBlobStore> => {
    const store = openMongoBlobStore(serverUrl(), { dbName });
    opened.push(store);
    return store;
  };
  /** The bucket as another program sees it, to set up what only a race or a crash leaves. */
  const db = () => {
    if (inspector === undefined) throw new Error('MongoDB did not start');
    return inspector.db(dbName);
  };
  const files = () => db().collection<{ filename: string }>(`${BLOB_BUCKET}.files`);

  // The contract closes the stores it opens.
  blobStoreContract(`${peer.name} GridFS`, {
    open: () => openMongoBlobStore(serverUrl(), { dbName }),
    copies: (sha256) => files().countDocuments({ filename: { $eq: sha256 } }),
  });

  describe('MongoDB blob store on a real server', () => {
    let one: MongoBlobStore;
    let two: MongoBlobStore;

    beforeAll(async () => {
      [one, two] = await Promise.all([openStore(), openStore()]);
    });

    it('reads from the primary and writes with majority, whatever the URL asks', async () => {
      const { client, during } = watchedClient(withOptions(serverUrl(), 'readPreference=secondaryPreferred&w=1'));
      const store = new MongoBlobStore(client, client.db(dbName));
      try {
        const content = new Uint8Array(randomBytes(300 * 1024));
        const put = await during(() => store.put(content, 'image/png'));
        const get = await during(() => store.get(sha256Of(content)));
        const has = await during(() => store.has(sha256Of(content)));
        for (const { commands, selections } of [put, get, has]) {
          expect(selections.length).toBeGreaterThan(0);
          expect(selections.filter((selection) => selection.mode !== 'primary')).toEqual([]);
          const writes = commands.filter((command) => ['insert', 'update', 'delete'].includes(command.commandName));
          expect(writes.map((command) => command.command.writeConcern as unknown)).toEqual(writes.map(() => ({ w: 'majority', j: true })));
        }
        expect(put.commands.some((command) => command.commandName === 'insert')).toBe(true);
      } finally {
        await store.close();
      }
    });

    // Twenty rounds of racing 600 KB uploads: a few seconds on MongoDB; FerretDB over SQLite takes
    // about 1.5 s a round on a loaded 2-core machine (measured: 0.3 s the two puts, 0.5 s each read).
    it('gives two instances putting the same bytes at once the same blob, and at most one spare copy each round', async () => {
      for (let round = 0; round < 20; round++) {
        const content = new Uint8Array(randomBytes(600 * 1024));
        const [a, b] = await Promise.all([one.put(content, 'image/png'), two.put(content, 'image/png')]);
        expect(a).toEqual(b);
        expect(await files().countDocuments({ filename: { $eq: a.sha256 } })).toBeLessThanOrEqual(2);
        for (const store of [one, two]) {
          const blob = await store.get(a.sha256);
          expect(blob?.ref).toEqual(a);
          expect(Buffer.from(blob?.content ?? []).equals(Buffer.from(content))).toBe(true);
        }
      }
    }, 120_000);

    it('reads the earliest complete file when a race left two, and answers its content type to a later put', async () => {
      const content = new Uint8Array(randomBytes(1000));
      const sha256 = sha256Of(content);
      const bucket = new GridFSBucket(db(), { bucketName: BLOB_BUCKET });
      for (const contentType of ['text/first', 'text/second']) {
        const upload = bucket.openUploadStream(sha256, { metadata: { contentType, size: content.byteLength } });
        upload.end(Buffer.from(content));
        await finished(upload);
      }
      expect((await one.get(sha256))?.ref).toEqual({ sha256, size: 1000, contentType: 'text/first' });
      expect(await two.put(content, 'text/third')).toEqual({ sha256, size: 1000, contentType: 'text/first' });
    });

    it('ignores an upload cut short: chunks without their files document are no blob', async () => {
      const content = new Uint8Array(randomBytes(1000));
      const sha256 = sha256Of(content);
      // What a writer that died before its files document leaves: chunks under an id nothing names.
      await db()
        .collection(`${BLOB_BUCKET}.chunks`)
        .insertOne({ files_id: new ObjectId(), n: 0, data: Buffer.from(content) });
      expect(await one.has(sha256)).toBe(false);
      expect(await one.get(sha256)).toBeUndefined();
      const ref = await one.put(content, 'application/octet-stream');
      expect(Buffer.from((await two.get(ref.sha256))?.content ?? []).equals(Buffer.from(content))).toBe(true);
    });
  });
});
