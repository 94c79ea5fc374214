// Identifiers. Derived ids (UUIDv5) make retries deterministic: the same Idempotency-Key and stream
// always name the same events, so a retried append is a no-op in every event store.

import { createHash } from 'node:crypto';

/** The checks below as JSON Schema patterns (no flags there: both cases spelled out). */
export const UUID_JSON_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$';
export const UUID_V4_JSON_PATTERN = '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}$';

export const UUID_PATTERN = new RegExp(UUID_JSON_PATTERN);

export const isUuid = (s: string): boolean => UUID_PATTERN.test(s);

/** A random UUID (version 4, RFC 9562 variant): the only kind a client may choose for a new record,
 * so its ids cannot collide with the service's derived (version 5) ids or be guessable (nil, v1). */
export const isUuidV4 = (s: string): boolean => new RegExp(UUID_V4_JSON_PATTERN).test(s);

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
