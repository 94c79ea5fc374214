// The production blob store: the BlobStore port over MongoDB GridFS (bucket `blobs`, in the read
// models' database), so every instance sharing MongoDB serves the same blobs. A file is named by
// the SHA-256 of its content and carries `{ contentType, size }` as metadata.
//
// GridFS writes a file's chunks first and its files document last, so a file whose document
// exists is complete; an upload cut short leaves only chunks no lookup finds. Nothing makes a
// filename unique: a put looks for the name first, and two puts of the same bytes racing past that
// look both upload. The earliest complete file (uploadDate, then _id) is then the blob for every
// reader, and a put that finds its own upload is not the earliest deletes it again.

import { finished } from 'node:stream/promises';
import { createHash } from 'node:crypto';
import {
  GridFSBucket,
  MongoGridFSChunkError,
  MongoRuntimeError,
  ReadPreference,
  type Db,
  type GridFSFile,
  type MongoClient,
  type ObjectId,
} from 'mongodb';
import type { BlobRef, BlobStore } from '../../domain/ports.ts';
import { checkBlob, checkSha256 } from '../../domain/shared/blobs.ts';
import { connectMongo, translateError } from './readStore.ts';

export const BLOB_BUCKET = 'blobs';

type Found = { id: ObjectId; ref: BlobRef };

/** The file was deleted while it was read: a spare copy of a raced put, removed by its writer. The
 * driver ends a download whose chunks vanish early without an error, hence the length check too. */
class FileGone extends Error {}

function isGone(error: unknown): boolean {
  if (error instanceof FileGone || error instanceof MongoGridFSChunkError) return true;
  return error instanceof MongoRuntimeError && (error as MongoRuntimeError & { code?: unknown }).code === 'ENOENT';
}

function refOf(file: GridFSFile): BlobRef {
  const contentType: unknown = file.metadata?.contentType;
  if (typeof contentType !== 'string') throw new Error(`GridFS file ${file.filename} in bucket ${BLOB_BUCKET} has no metadata.contentType`);
  return { sha256: file.filename, size: file.length, contentType };
}

export class MongoBlobStore implements BlobStore {
  readonly #client: MongoClient;
  readonly #bucket: GridFSBucket;

  constructor(client: MongoClient, db: Db) {
    this.#client = client;
    // Majority and journaled, whatever the URL says: the event naming a blob is appended once put
    // answers, and must not outlive the blob through a failover or a crash. Read from the primary
    // likewise (the bucket's file lookups and index checks read through its database's setting): a
    // put reads back the file it just wrote, which a secondary may not have yet.
    const primary = client.db(db.databaseName, { readPreference: ReadPreference.primary });
    this.#bucket = new GridFSBucket(primary, { bucketName: BLOB_BUCKET, writeConcern: { w: 'majority', journal: true } });
  }

  async #run<T>(work: () => Promise<T>): Promise<T> {
    try {
      return await work();
    } catch (error) {
      throw translateError(error, 'BLOB_STORE');
    }
  }

  /** The earliest complete file of that content, the one every reader takes. */
  async #first(sha256: string): Promise<Found | undefined> {
    const [file] = await this.#bucket.find({ filename: { $eq: sha256 } }, { sort: { uploadDate: 1, _id: 1 }, limit: 1 }).toArray();
    return file === undefined ? undefined : { id: file._id, ref: refOf(file) };
  }

  async #upload(sha256: string, content: Uint8Array, contentType: string): Promise<ObjectId> {
    const upload = this.#bucket.openUploadStream(sha256, { metadata: { contentType, size: content.byteLength } });
    upload.end(Buffer.from(content.buffer, content.byteOffset, content.byteLength));
    await finished(upload);
    return upload.id;
  }

  async #download(found: Found): Promise<Uint8Array> {
    const chunks: Buffer[] = [];
    for await (const chunk of this.#bucket.openDownloadStream(found.id)) chunks.push(chunk as Buffer);
    const content = Buffer.concat(chunks);
    if (content.byteLength !== found.ref.size)
      throw new FileGone(`blob ${found.ref.sha256}: read ${String(content.byteLength)} of ${String(found.ref.size)} bytes`);
    return content;
  }

  async put(content: Uint8Array, contentType: string): Promise<BlobRef> {
    checkBlob(content, contentType);
    const sha256 = createHash('sha256').update(content).digest('hex');
    return await this.#run(async () => {
      const existing = await this.#first(sha256);
      if (existing) return existing.ref;
      const id = await this.#upload(sha256, content, contentType);
      const first = await this.#first(sha256);
      if (first === undefined) throw new Error(`blob ${sha256} is missing right after its upload`);
      if (!first.id.equals(id)) {
        // A spare copy costs only space, so failing to remove it must not fail a put that stored
        // the blob.
        await this.#bucket.delete(id).catch(() => undefined);
      }
      return first.ref;
    });
  }

  async get(sha256: string): Promise<{ ref: BlobRef; content: Uint8Array } | undefined> {
    checkSha256(sha256);
    return await this.#run(async () => {
      // Once more at most: the file read first can only have been a spare copy, and the earliest
      // one, which its writer keeps, is visible by then.
      for (let attempt = 1; ; attempt++) {
        const found = await this.#first(sha256);
        if (found === undefined) return undefined;
        try {
          return { ref: found.ref, content: await this.#download(found) };
        } catch (error) {
          if (attempt >= 2 || !isGone(error)) throw error;
        }
      }
    });
  }

  async has(sha256: string): Promise<boolean> {
    checkSha256(sha256);
    return await this.#run(async () => (await this.#first(sha256)) !== undefined);
  }

  async close(): Promise<void> {
    await this.#client.close();
  }
}

/** Opens the blob store on its own client, in the database the read models use (connectMongo). */
export async function openMongoBlobStore(url: string, options: { dbName?: string } = {}): Promise<MongoBlobStore> {
  const { client, db } = await connectMongo(url, options);
  return new MongoBlobStore(client, db);
}
