// The BlobStore contract, written against the port only so that every adapter runs it unchanged
// (SQLite here; MongoDB GridFS through testcontainers where a container engine exists). Content is
// random in every test, so tests never meet each other's blobs in a shared store.

import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BlobStore } from '../../domain/ports.ts';
import { MAX_BLOB_BYTES } from '../../domain/shared/blobs.ts';
import { DomainError } from '../../domain/shared/errors.ts';

export type BlobStoreTarget = {
  /** A new handle on the same storage at every call: what one handle stored, the next one reads. */
  open: () => Promise<BlobStore>;
  /** How many copies of a blob the storage holds, counted beside the port. */
  copies: (sha256: string) => Promise<number>;
};

const MiB = 1024 * 1024;
const sha256Of = (bytes: Uint8Array): string => createHash('sha256').update(bytes).digest('hex');
/** Plain Uint8Arrays, not Buffers: the port promises nothing more to its callers. */
const randomContent = (size: number): Uint8Array => new Uint8Array(randomBytes(size));
const bytesOf = (content: Uint8Array): Buffer => Buffer.from(content.buffer, content.byteOffset, content.byteLength);
const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => bytesOf(a).equals(bytesOf(b));

export function blobStoreContract(name: string, target: BlobStoreTarget): void {
  describe(`BlobStore contract: ${name}`, () => {
    let store: BlobStore;

    beforeAll(async () => {
      store = await target.open();
    });

    afterAll(async () => {
      await store.close();
    });

    it.each([
      ['empty', 0],
      ['one byte', 1],
      ['a few KiB', 5000],
      ['1 MiB', MiB],
    ])('stores %s content under its SHA-256 and reads the same bytes back', async (_, size) => {
      const content = randomContent(size);
      const ref = await store.put(content, 'application/octet-stream');
      expect(ref).toEqual({ sha256: sha256Of(content), size, contentType: 'application/octet-stream' });
      expect(ref.sha256).toMatch(/^[0-9a-f]{64}$/);
      const blob = await store.get(ref.sha256);
      expect(blob?.ref).toEqual(ref);
      expect(blob?.content).toBeInstanceOf(Uint8Array);
      expect(blob?.content.byteLength).toBe(size);
      expect(sameBytes(blob?.content ?? new Uint8Array(1), content)).toBe(true);
      expect(await store.has(ref.sha256)).toBe(true);
    });

    it('stores only the bytes a view shows, not the rest of its buffer', async () => {
      const whole = randomContent(4096);
      const view = whole.subarray(100, 1100);
      const ref = await store.put(view, 'image/png');
      expect(ref).toEqual({ sha256: sha256Of(view), size: 1000, contentType: 'image/png' });
      const blob = await store.get(ref.sha256);
      expect(sameBytes(blob?.content ?? new Uint8Array(1), view)).toBe(true);
    });

    it('keeps the same bytes stored twice as one blob with one ref', async () => {
      const content = randomContent(2048);
      const first = await store.put(content, 'text/plain');
      const again = await store.put(Uint8Array.from(content), 'text/plain');
      expect(again).toEqual(first);
      expect(await target.copies(first.sha256)).toBe(1);
    });

    it('keeps the content type of the first put of some bytes, and says so to a later one', async () => {
      const content = randomContent(300);
      const first = await store.put(content, 'image/jpeg');
      const later = await store.put(content, 'application/octet-stream');
      expect(later).toEqual({ ...first, contentType: 'image/jpeg' });
      expect((await store.get(first.sha256))?.ref.contentType).toBe('image/jpeg');
      expect(await target.copies(first.sha256)).toBe(1);
    });

    it('answers undefined and false for a hash it does not hold', async () => {
      const unknown = sha256Of(randomContent(32));
      expect(await store.get(unknown)).toBeUndefined();
      expect(await store.has(unknown)).toBe(false);
    });

    it('refuses a hash that is not 64 lowercase hex digits with a RangeError', async () => {
      const valid = sha256Of(randomContent(8));
      const invalid = [
        '',
        'abc',
        valid.toUpperCase(),
        valid.slice(1),
        `${valid}0`,
        `${valid.slice(1)}g`,
        ` ${valid.slice(1)}`,
        `${valid.slice(2)}/.`,
      ];
      for (const sha of invalid) {
        await expect(store.get(sha), sha).rejects.toBeInstanceOf(RangeError);
        await expect(store.has(sha), sha).rejects.toBeInstanceOf(RangeError);
      }
    });

    it('refuses an empty or overlong content type with a RangeError and stores nothing', async () => {
      const content = randomContent(64);
      await expect(store.put(content, '')).rejects.toBeInstanceOf(RangeError);
      await expect(store.put(content, `text/${'x'.repeat(300)}`)).rejects.toBeInstanceOf(RangeError);
      expect(await store.has(sha256Of(content))).toBe(false);
    });

    it('stores content of exactly MAX_BLOB_BYTES and refuses one byte more with BLOB.TOO_LARGE', async () => {
      const largest = randomContent(MAX_BLOB_BYTES);
      const ref = await store.put(largest, 'application/pdf');
      expect(ref.size).toBe(MAX_BLOB_BYTES);
      expect(sameBytes((await store.get(ref.sha256))?.content ?? new Uint8Array(1), largest)).toBe(true);

      const tooLarge = randomContent(MAX_BLOB_BYTES + 1);
      const refused = await store.put(tooLarge, 'application/pdf').then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(refused).toBeInstanceOf(DomainError);
      expect(refused).toMatchObject({ code: 'BLOB.TOO_LARGE', status: 'PAYLOAD_TOO_LARGE' });
      expect(await store.has(sha256Of(tooLarge))).toBe(false);
    }, 60_000);

    it('answers concurrent puts of the same bytes with one blob', async () => {
      const content = randomContent(300 * 1024);
      const refs = await Promise.all(Array.from({ length: 8 }, () => store.put(Uint8Array.from(content), 'application/zip')));
      const expected = { sha256: sha256Of(content), size: content.byteLength, contentType: 'application/zip' };
      for (const ref of refs) expect(ref).toEqual(expected);
      const blob = await store.get(expected.sha256);
      expect(blob?.ref).toEqual(expected);
      expect(sameBytes(blob?.content ?? new Uint8Array(1), content)).toBe(true);
      // No count of copies here: an adapter without a unique name (GridFS) may keep a spare copy
      // of a race it could not see, which costs space and never changes what a reader gets.
      expect(await target.copies(expected.sha256)).toBeGreaterThanOrEqual(1);
    });

    it('keeps content across closing and reopening the store', async () => {
      const content = randomContent(70_000);
      const writer = await target.open();
      const ref = await writer.put(content, 'application/octet-stream');
      await writer.close();
      const reader = await target.open();
      try {
        expect(await reader.has(ref.sha256)).toBe(true);
        const blob = await reader.get(ref.sha256);
        expect(blob?.ref).toEqual(ref);
        expect(sameBytes(blob?.content ?? new Uint8Array(1), content)).toBe(true);
      } finally {
        await reader.close();
      }
    });
  });
}
