// The GridFS blob store through the real driver, where no server is needed to tell: opening fails
// fast and names the server without its password, a server that went away answers
// BLOB_STORE.UNAVAILABLE (a 503 the caller may retry), and arguments are checked before any I/O.

import { MongoClient } from 'mongodb';
import { afterAll, describe, expect, it } from 'vitest';
import { MAX_BLOB_BYTES } from '../../../domain/shared/blobs.ts';
import { StoreUnavailableError } from '../../../domain/shared/errors.ts';
import { MongoBlobStore, openMongoBlobStore } from '../../../infra/mongodb/blobStore.ts';
import { startCanary } from '../../support/canary.ts';

const nowhere = 'mongodb://127.0.0.1:1/blobs?serverSelectionTimeoutMS=300';
const someSha = 'a'.repeat(64);

describe('MongoBlobStore without a server', () => {
  const client = new MongoClient(nowhere);
  const store = new MongoBlobStore(client, client.db());

  afterAll(async () => {
    await store.close();
  });

  it('fails to open fast, naming the server without the password', async () => {
    const started = Date.now();
    const opening = openMongoBlobStore('mongodb://writer:s3cret@127.0.0.1:1/models?serverSelectionTimeoutMS=300');
    await expect(opening).rejects.toThrow(
      /MongoDB at mongodb:\/\/writer:\*\*\*@127\.0\.0\.1:1\/models\?serverSelectionTimeoutMS=300 does not answer/,
    );
    await expect(opening).rejects.not.toThrow(/s3cret/);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('answers BLOB_STORE.UNAVAILABLE for every operation when the server does not answer', async () => {
    for (const operation of [() => store.put(new Uint8Array([1, 2]), 'text/plain'), () => store.get(someSha), () => store.has(someSha)]) {
      const error: unknown = await operation().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(error).toMatchObject({ code: 'BLOB_STORE.UNAVAILABLE', status: 'SERVICE_UNAVAILABLE' });
    }
  });

  it('checks its arguments before reaching for the server', async () => {
    // The server named is a canary that counts connections: the driver connects on the first
    // operation it is given, so none may reach it.
    const server = await startCanary();
    const patient = new MongoClient(`mongodb://${new URL(server.url).host}/blobs?serverSelectionTimeoutMS=2000&directConnection=true`);
    const unsent = new MongoBlobStore(patient, patient.db());
    try {
      await expect(unsent.get('A'.repeat(64))).rejects.toBeInstanceOf(RangeError);
      await expect(unsent.has('not a hash')).rejects.toBeInstanceOf(RangeError);
      await expect(unsent.put(new Uint8Array(1), '')).rejects.toBeInstanceOf(RangeError);
      await expect(unsent.put(new Uint8Array(MAX_BLOB_BYTES + 1), 'text/plain')).rejects.toMatchObject({ code: 'BLOB.TOO_LARGE' });
      expect(server.connections()).toBe(0);
    } finally {
      await unsent.close();
      await server.close();
    }
  });
});
