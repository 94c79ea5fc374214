// Identifiers. Derived ids (UUIDv5) make retries deterministic: the same Idempotency-Key and stream
// always name the same events, so a retried append is a no-op in every event store.

import { createHash } from 'node:crypto';

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (s: string): boolean => UUID_PATTERN.test(s);

/** A random UUID (version 4, RFC 9562 variant): the only kind a client may choose for a new record,
 * so its ids cannot collide with the service's derived (version 5) ids or be guessable (nil, v1). */
export const isUuidV4 = (s: string): boolean => /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i.test(s);

/** Namespace of this service's derived ids (a fixed random UUID). */
const NAMESPACE = Buffer.from('3f0d1c52a6e44c6c9a1e5b7f2d8e4a91', 'hex');

export function uuidV5(name: string): string {
  const hash = createHash('sha1').update(NAMESPACE).update(name, 'utf8').digest();
  const b = hash.subarray(0, 16);
  b[6] = ((b[6] ?? 0) & 0x0f) | 0x50;
  b[8] = ((b[8] ?? 0) & 0x3f) | 0x80;
  const h = b.toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const sha256 = (s: string): string => createHash('sha256').update(s, 'utf8').digest('base64url');
