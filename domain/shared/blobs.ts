// The rules every BlobStore adapter applies before touching storage, so that both modes refuse
// the same content and the same names in the same way.

import { blobTooLarge } from './errors.ts';

/**
 * The largest blob: 16 MiB, the size of a BSON document, so that no caller is tempted to put what
 * it would rather embed, and a blob always fits in memory to be hashed and served whole. Events
 * hold only a BlobRef, never the bytes (they are bounded by MAX_EVENT_BYTES).
 */
export const MAX_BLOB_BYTES = 16 * 1024 * 1024;

/** Content types longer than this are not media types but a misuse of the field. */
export const MAX_CONTENT_TYPE_LENGTH = 255;

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** A hash is a name here: only one spelling (lowercase) may name a blob, or a lookup could miss
 * what is stored. Not a client error: routes validate what clients send before they get here. */
export function checkSha256(sha256: string): void {
  if (!SHA256_HEX.test(sha256)) {
    throw new RangeError(`not a SHA-256 in lowercase hex (64 digits): ${JSON.stringify(sha256.slice(0, 80))}`);
  }
}

export function checkBlob(content: Uint8Array, contentType: string): void {
  if (content.byteLength > MAX_BLOB_BYTES) throw blobTooLarge(content.byteLength, MAX_BLOB_BYTES);
  if (contentType === '' || contentType.length > MAX_CONTENT_TYPE_LENGTH) {
    throw new RangeError(`a content type must be 1 to ${String(MAX_CONTENT_TYPE_LENGTH)} characters, got ${String(contentType.length)}`);
  }
}
