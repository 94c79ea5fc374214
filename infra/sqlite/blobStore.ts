// The embedded blob store: a SQLite file of its own (blobs.db), so that large content never bloats
// the event log or the read models, with the event log's durability (WAL, synchronous=FULL): an
// event that names a blob must not survive a crash that the blob does not.
// node:sqlite is synchronous, so a put holds the event loop for its hash and its fsync (tens of
// milliseconds at 16 MiB), as an append does.

import { createHash } from 'node:crypto';
import { DatabaseSync, type StatementSync } from 'node:sqlite';
import type { BlobRef, BlobStore } from '../../domain/ports.ts';
import { checkBlob, checkSha256 } from '../../domain/shared/blobs.ts';
import { EVENT_LOG_PRAGMAS } from './eventStore.ts';
import { settle } from './settle.ts';

// A rowid table, not WITHOUT ROWID: SQLite advises the latter only for small rows, and here the
// primary key's own index holds the hashes alone, so `has` and a repeated put's conflict check
// never read a page of content. Content is the last column: reading size and type stops before it.
const BLOB_SCHEMA = `
CREATE TABLE IF NOT EXISTS blobs (
  sha256 TEXT PRIMARY KEY,
  size INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  content BLOB NOT NULL
);
`;

type RefRow = { size: number; content_type: string };
type BlobRow = RefRow & { content: Uint8Array };

export class SqliteBlobStore implements BlobStore {
  readonly #db: DatabaseSync;
  readonly #insert: StatementSync;
  readonly #selectRef: StatementSync;
  readonly #selectBlob: StatementSync;

  constructor(path: string) {
    this.#db = new DatabaseSync(path);
    this.#db.exec(EVENT_LOG_PRAGMAS);
    this.#db.exec(BLOB_SCHEMA);
    // The first put of some bytes names their content type; a later one changes nothing.
    this.#insert = this.#db.prepare(
      'INSERT INTO blobs (sha256, size, content_type, content) VALUES (?, ?, ?, ?) ON CONFLICT (sha256) DO NOTHING',
    );
    this.#selectRef = this.#db.prepare('SELECT size, content_type FROM blobs WHERE sha256 = ?');
    this.#selectBlob = this.#db.prepare('SELECT size, content_type, content FROM blobs WHERE sha256 = ?');
  }

  put(content: Uint8Array, contentType: string): Promise<BlobRef> {
    return settle(() => {
      checkBlob(content, contentType);
      const sha256 = createHash('sha256').update(content).digest('hex');
      this.#insert.run(sha256, content.byteLength, contentType, content);
      const row = this.#selectRef.get(sha256) as RefRow | undefined;
      if (row === undefined) throw new Error(`blob ${sha256} is missing right after its insert`);
      return { sha256, size: row.size, contentType: row.content_type };
    });
  }

  get(sha256: string): Promise<{ ref: BlobRef; content: Uint8Array } | undefined> {
    return settle(() => {
      checkSha256(sha256);
      const row = this.#selectBlob.get(sha256) as BlobRow | undefined;
      return row === undefined ? undefined : { ref: { sha256, size: row.size, contentType: row.content_type }, content: row.content };
    });
  }

  has(sha256: string): Promise<boolean> {
    return settle(() => {
      checkSha256(sha256);
      return this.#selectRef.get(sha256) !== undefined;
    });
  }

  close(): Promise<void> {
    return settle(() => {
      if (this.#db.isOpen) this.#db.close();
    });
  }
}

export const openSqliteBlobStore = (path: string): SqliteBlobStore => new SqliteBlobStore(path);
