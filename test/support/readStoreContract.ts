// The ReadStore contract, written against the port only so that every adapter runs it unchanged.
// The port's writes name no collection: a projection writes the collection of its own name, so
// each test uses one fresh name for both.

import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { Document, DocumentWrite, Page, ReadStore, VersionedDocument } from '../../domain/ports.ts';
import {
  D1,
  D2,
  D3,
  D4,
  D5,
  D6,
  D7,
  deletedDocument,
  filteringFixtures,
  fixtureDocuments,
  fixtureIndexedPaths,
  fixtureQuery,
} from './readStoreFixtures.ts';
import { limitedIt, type PeerLimits } from './peerLimits.ts';

const fresh = (): string => `c${randomUUID().replaceAll('-', '')}`;
const upsert = (doc: Document, version: number): DocumentWrite => ({ kind: 'upsert', id: doc.id, version, doc });
const remove = (id: string, version: number): DocumentWrite => ({ kind: 'delete', id, version });
const idsOf = (docs: readonly Document[]): string[] => docs.map((d) => d.id);
const everything: Page = { offset: 0, limit: 1000 };
const byCode = fixtureQuery({});
const like = (column: string, value: string) => fixtureQuery({ filter: [{ column, operator: 'LIKE', value }] });
/** Code point order, as both stores order ids (JavaScript's own compares UTF-16 units). */
const binary = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** `limits`: the tests a peer is known to fail, and how (test/support/mongoPeers.ts). */
export function readStoreContract(name: string, open: () => Promise<ReadStore>, limits?: PeerLimits): void {
  const it = limitedIt(limits);
  describe(`ReadStore contract: ${name}`, () => {
    let store: ReadStore;

    beforeAll(async () => {
      store = await open();
    });

    afterAll(async () => {
      await store.close();
    });

    async function collectionWith(docs: readonly Document[]): Promise<string> {
      const c = fresh();
      await store.ensureCollection(c, ['code']);
      await store.applyBatch(
        c,
        docs.map((d) => upsert(d, 1)),
        1n,
      );
      return c;
    }

    describe('writes', () => {
      it('stores documents as written and reads them back by id', async () => {
        const doc: Document = {
          id: randomUUID(),
          code: 'X',
          text: "quote ' backslash \\ unicode Ünï 🚀",
          n: -12.5,
          big: 9007199254740991,
          nothing: null,
          empty: {},
          list: [1, 'two', true, null, { three: [3] }],
        };
        const c = await collectionWith([doc]);
        const found = await store.getMany(c, [doc.id]);
        expect(found.get(doc.id)).toEqual({ version: 1, doc });
        expect(await store.find(c, byCode, everything)).toEqual([doc]);
      });

      it('ignores a replay of an older or the same version', async () => {
        const id = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [upsert({ id, code: 'V2' }, 2)], 1n);
        await store.applyBatch(c, [upsert({ id, code: 'V1' }, 1), upsert({ id, code: 'V2 again' }, 2)], 2n);
        expect((await store.getMany(c, [id])).get(id)).toEqual({ version: 2, doc: { id, code: 'V2' } });
      });

      it('lets a repair write the stored version again, never an older one', async () => {
        const id = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [upsert({ id, code: 'drifted' }, 2)], 1n);
        await store.applyBatch(c, [{ ...upsert({ id, code: 'stale' }, 1), repair: true }], 1n);
        expect((await store.getMany(c, [id])).get(id)).toEqual({ version: 2, doc: { id, code: 'drifted' } });
        await store.applyBatch(c, [{ ...upsert({ id, code: 'refolded' }, 2), repair: true }], 1n);
        expect((await store.getMany(c, [id])).get(id)).toEqual({ version: 2, doc: { id, code: 'refolded' } });
        expect(await store.find(c, byCode, everything)).toEqual([{ id, code: 'refolded' }]);
      });

      it('keeps the highest version when a batch holds several writes of one document', async () => {
        const a = randomUUID();
        const b = randomUUID();
        const c = fresh();
        await store.applyBatch(
          c,
          [
            upsert({ id: a, code: 'A1' }, 1),
            upsert({ id: a, code: 'A2' }, 2),
            upsert({ id: b, code: 'B3' }, 3),
            upsert({ id: b, code: 'B2' }, 2),
          ],
          1n,
        );
        const found = await store.getMany(c, [a, b]);
        expect(found.get(a)).toEqual({ version: 2, doc: { id: a, code: 'A2' } });
        expect(found.get(b)).toEqual({ version: 3, doc: { id: b, code: 'B3' } });
      });

      it('keeps a tombstone so that a replayed upsert does not resurrect a deleted document', async () => {
        const id = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [upsert({ id, code: 'GONE' }, 1), upsert({ id, code: 'GONE' }, 2), remove(id, 3)], 1n);
        await store.applyBatch(c, [upsert({ id, code: 'GONE' }, 1), upsert({ id, code: 'GONE' }, 3)], 2n);
        expect((await store.getMany(c, [id])).get(id)).toEqual({ version: 3, doc: null });
        expect(await store.find(c, byCode, everything)).toEqual([]);
        expect(await store.count(c, byCode)).toBe(0);
        expect(await store.size(c)).toBe(0);
      });

      it('ignores a replayed delete older than the stored version', async () => {
        const id = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [upsert({ id, code: 'KEPT' }, 5)], 1n);
        await store.applyBatch(c, [remove(id, 4)], 2n);
        expect((await store.getMany(c, [id])).get(id)).toEqual({ version: 5, doc: { id, code: 'KEPT' } });
      });

      it('brings a deleted document back with a newer version', async () => {
        const id = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [upsert({ id, code: 'A' }, 1), remove(id, 2)], 1n);
        await store.applyBatch(c, [upsert({ id, code: 'B' }, 3)], 2n);
        expect(idsOf(await store.find(c, byCode, everything))).toEqual([id]);
        expect((await store.getMany(c, [id])).get(id)).toEqual({ version: 3, doc: { id, code: 'B' } });
      });

      it('getMany answers only the ids it holds', async () => {
        const a = randomUUID();
        const c = await collectionWith([{ id: a, code: 'A' }]);
        const found = await store.getMany(c, [randomUUID(), a]);
        expect([...found.keys()]).toEqual([a]);
        expect((await store.getMany(c, [])).size).toBe(0);
        expect((await store.getMany(fresh(), [a])).size).toBe(0);
      });

      it('size counts live documents only', async () => {
        const docs = [0, 1, 2].map((i) => ({ id: randomUUID(), code: `S${String(i)}` }));
        const c = await collectionWith(docs);
        expect(await store.size(c)).toBe(3);
        await store.applyBatch(c, [remove(docs[0]?.id ?? '', 2)], 2n);
        expect(await store.size(c)).toBe(2);
        expect(await store.size(fresh())).toBe(0);
      });
    });

    describe('log position', () => {
      const at = (write: DocumentWrite, position: bigint): DocumentWrite => ({ ...write, position });

      it('is stored with an upsert or a tombstone and read back by getMany', async () => {
        const a = randomUUID();
        const b = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [at(upsert({ id: a, code: 'A' }, 1), 11n), at(upsert({ id: b, code: 'B' }, 1), 12n)], 12n);
        await store.applyBatch(c, [at(remove(b, 2), 15n)], 15n);
        let found = await store.getMany(c, [a, b]);
        expect(found.get(a)).toStrictEqual({ version: 1, doc: { id: a, code: 'A' }, position: 11n });
        expect(found.get(b)).toStrictEqual({ version: 2, doc: null, position: 15n });
        await store.applyBatch(c, [at(upsert({ id: a, code: 'A2' }, 2), 20n), at(upsert({ id: b, code: 'B again' }, 3), 21n)], 21n);
        found = await store.getMany(c, [a, b]);
        expect(found.get(a)).toStrictEqual({ version: 2, doc: { id: a, code: 'A2' }, position: 20n });
        expect(found.get(b)).toStrictEqual({ version: 3, doc: { id: b, code: 'B again' }, position: 21n });
      });

      it('is absent when the write that landed carried none', async () => {
        const a = randomUUID();
        const b = randomUUID();
        const gone = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [upsert({ id: a, code: 'A' }, 1), at(upsert({ id: b, code: 'B' }, 1), 3n), remove(gone, 1)], 3n);
        await store.applyBatch(c, [upsert({ id: b, code: 'B2' }, 2)], 4n);
        const found = await store.getMany(c, [a, b, gone]);
        expect(found.get(a)).toStrictEqual({ version: 1, doc: { id: a, code: 'A' } });
        expect(found.get(b)).toStrictEqual({ version: 2, doc: { id: b, code: 'B2' } });
        expect(found.get(gone)).toStrictEqual({ version: 1, doc: null });
      });

      it('keeps positions up to 2^128 exactly', async () => {
        const a = randomUUID();
        const b = randomUUID();
        const c = fresh();
        const huge = 2n ** 100n + 7n;
        await store.applyBatch(c, [at(upsert({ id: a, code: 'A' }, 1), huge), at(remove(b, 1), 2n ** 128n)], 1n);
        const found = await store.getMany(c, [a, b]);
        expect(found.get(a)?.position).toBe(huge);
        expect(found.get(b)?.position).toBe(2n ** 128n);
      });

      it('is left as it was by a replay at the same or a lower version', async () => {
        const id = randomUUID();
        const gone = randomUUID();
        const c = fresh();
        await store.applyBatch(c, [at(upsert({ id, code: 'V3' }, 3), 30n), at(remove(gone, 2), 31n)], 31n);
        await store.applyBatch(
          c,
          [
            at(upsert({ id, code: 'V2' }, 2), 99n),
            at(upsert({ id, code: 'V3 again' }, 3), 98n),
            upsert({ id, code: 'V3 without' }, 3),
            at(remove(id, 1), 97n),
            at(upsert({ id: gone, code: 'BACK' }, 1), 96n),
            remove(gone, 2),
          ],
          99n,
        );
        const found = await store.getMany(c, [id, gone]);
        expect(found.get(id)).toStrictEqual({ version: 3, doc: { id, code: 'V3' }, position: 30n });
        expect(found.get(gone)).toStrictEqual({ version: 2, doc: null, position: 31n });
      });

      it('is carried by a bulk load', async () => {
        const c = fresh();
        await store.ensureCollection(c, ['code']);
        const [a, b] = [
          { id: randomUUID(), code: 'A' },
          { id: randomUUID(), code: 'B' },
        ];
        const gone = randomUUID();
        await store.bulkLoad(
          c,
          [
            { id: a.id, version: 2, doc: a, position: 2n ** 100n + 7n },
            { id: b.id, version: 1, doc: b },
            { id: gone, version: 4, doc: null, position: 40n },
          ],
          50n,
        );
        const found = await store.getMany(c, [a.id, b.id, gone]);
        expect(found.get(a.id)).toStrictEqual({ version: 2, doc: a, position: 2n ** 100n + 7n });
        expect(found.get(b.id)).toStrictEqual({ version: 1, doc: b });
        expect(found.get(gone)).toStrictEqual({ version: 4, doc: null, position: 40n });
        // The version guard still decides after the load, and the position follows the write that lands.
        await store.applyBatch(c, [at(upsert({ ...a, code: 'OLD' }, 2), 60n), at(upsert({ ...b, code: 'B2' }, 2), 61n)], 61n);
        expect((await store.getMany(c, [a.id])).get(a.id)?.position).toBe(2n ** 100n + 7n);
        expect((await store.getMany(c, [b.id])).get(b.id)).toStrictEqual({ version: 2, doc: { ...b, code: 'B2' }, position: 61n });
      });

      it('never appears in what find, findIds, scan or autocomplete answer', async () => {
        const c = fresh();
        await store.ensureCollection(c, ['code', 'name']);
        // A document's own fields of those names are its own.
        const docs: Document[] = [
          { id: randomUUID(), code: 'P1', name: 'Positioned one' },
          { id: randomUUID(), code: 'P2', name: 'Positioned two', position: 'front', _position: 3 },
          { id: randomUUID(), code: 'P3', name: 'Unpositioned' },
        ];
        const loaded = [{ id: randomUUID(), code: 'P4', name: 'Positioned load' }];
        await store.bulkLoad(
          c,
          loaded.map((d, i) => ({ id: d.id, version: 1, doc: d, position: BigInt(i + 1) })),
          1n,
        );
        await store.applyBatch(
          c,
          [at(upsert(docs[0] ?? { id: '' }, 1), 2n ** 100n), at(upsert(docs[1] ?? { id: '' }, 1), 5n), upsert(docs[2] ?? { id: '' }, 1)],
          5n,
        );
        const all = [...docs, ...loaded];
        const byId = (x: Document, y: Document): number => binary(x.id, y.id);
        expect(await store.find(c, byCode, everything)).toStrictEqual(all);
        expect(await store.findIds(c, byCode, everything)).toStrictEqual(idsOf(all));
        expect(await store.scan(c, { limit: 10 })).toStrictEqual([...all].sort(byId));
        expect(await store.find(c, fixtureQuery({ filter: [{ column: 'code', value: 'P2' }] }), everything)).toStrictEqual([docs[1]]);
        expect(await store.autocomplete(c, ['code', 'name'], 'pos', 10)).toEqual([
          'Positioned load',
          'Positioned one',
          'Positioned two',
          'Unpositioned',
        ]);
      });

      it('out of range fails the batch, leaving the checkpoint where it was', async () => {
        const c = fresh();
        await store.applyBatch(c, [], 3n);
        for (const position of [-1n, 10n ** 40n]) {
          await expect(
            store.applyBatch(
              c,
              [upsert({ id: randomUUID(), code: 'OK' }, 1), at(upsert({ id: randomUUID(), code: 'BAD' }, 1), position)],
              4n,
            ),
          ).rejects.toThrow(RangeError);
        }
        expect(await store.checkpoint(c)).toBe(3n);
        expect(await store.size(c)).toBe(0);
      });
    });

    describe('checkpoint', () => {
      it('is 0 for a projection that never applied a batch', async () => {
        expect(await store.checkpoint(fresh())).toBe(0n);
      });

      it('advances with each batch, also one without writes', async () => {
        const c = fresh();
        await store.applyBatch(c, [upsert({ id: randomUUID(), code: 'A' }, 1)], 10n);
        expect(await store.checkpoint(c)).toBe(10n);
        await store.applyBatch(c, [], 12n);
        expect(await store.checkpoint(c)).toBe(12n);
      });

      it('is saved on its own for a processor that writes no documents, forward only', async () => {
        const processor = fresh();
        await store.saveCheckpoint(processor, 7n);
        await store.saveCheckpoint(processor, 5n);
        expect(await store.checkpoint(processor)).toBe(7n);
        await store.saveCheckpoint(processor, 9n);
        expect(await store.checkpoint(processor)).toBe(9n);
      });

      it('never moves backwards', async () => {
        const c = fresh();
        await store.applyBatch(c, [], 20n);
        await store.applyBatch(c, [upsert({ id: randomUUID(), code: 'A' }, 1)], 15n);
        expect(await store.checkpoint(c)).toBe(20n);
      });

      it('keeps positions beyond 2^53 exactly', async () => {
        const c = fresh();
        const position = 2n ** 62n + 3n;
        await store.applyBatch(c, [], position);
        expect(await store.checkpoint(c)).toBe(position);
      });

      it('belongs to one projection', async () => {
        const a = fresh();
        const b = fresh();
        await store.applyBatch(a, [], 5n);
        await store.applyBatch(b, [], 9n);
        expect([await store.checkpoint(a), await store.checkpoint(b)]).toEqual([5n, 9n]);
      });

      it('does not advance when the batch fails', async () => {
        const c = fresh();
        await store.applyBatch(c, [], 3n);
        const circular: Document = { id: randomUUID(), code: 'LOOP' };
        circular.self = circular;
        await expect(store.applyBatch(c, [upsert({ id: randomUUID(), code: 'OK' }, 1), upsert(circular, 1)], 4n)).rejects.toThrow();
        expect(await store.checkpoint(c)).toBe(3n);
      });
    });

    describe('filtering', () => {
      let c: string;
      // Paging is checked over the fixtures the store runs; each one a peer fails is checked failing on its own.
      const runnable = filteringFixtures.filter((fixture) => limits?.tests[fixture.name] === undefined);

      beforeAll(async () => {
        c = fresh();
        await store.ensureCollection(c, fixtureIndexedPaths);
        await store.applyBatch(c, [upsert(deletedDocument, 1), ...fixtureDocuments.map((d) => upsert(d, 1))], 1n);
        await store.applyBatch(c, [remove(deletedDocument.id, 2)], 2n);
      });

      for (const fixture of filteringFixtures) {
        it(fixture.name, async () => {
          const query = fixtureQuery(fixture.body);
          expect(idsOf(await store.find(c, query, everything))).toEqual(fixture.ids);
          expect(await store.findIds(c, query, everything)).toEqual(fixture.ids);
          expect(await store.count(c, query)).toBe(fixture.ids.length);
        });
      }

      it('scans the documents each fixture selects in id order, a keyset page at a time', async () => {
        for (const fixture of runnable) {
          const query = fixtureQuery(fixture.body);
          const seen: Document[] = [];
          for (
            let page = await store.scan(c, { limit: 2, query });
            page.length > 0;
            page = await store.scan(c, { after: seen.at(-1)?.id ?? '', limit: 2, query })
          ) {
            expect(page.length, fixture.name).toBeLessThanOrEqual(2);
            seen.push(...page);
          }
          expect(idsOf(seen), fixture.name).toEqual([...fixture.ids].sort(binary));
          expect(seen, fixture.name).toEqual([...(await store.find(c, query, everything))].sort((a, b) => binary(a.id, b.id)));
        }
        // The query's sort is ignored: always id order.
        const descending = fixtureQuery({ sort: [{ column: 'code', order: 'DESC' }] });
        expect(idsOf(await store.scan(c, { limit: 100, query: descending }))).toEqual(idsOf(await store.scan(c, { limit: 100 })));
      });

      it("scanJson gives scan's pages as JSON text, with their count and last id", async () => {
        for (const fixture of [...runnable, undefined]) {
          const query = fixture === undefined ? undefined : fixtureQuery(fixture.body);
          const name = fixture?.name ?? 'no query';
          const asked = (after?: string) => ({
            ...(after === undefined ? {} : { after }),
            limit: 2,
            ...(query === undefined ? {} : { query }),
          });
          for (let after: string | undefined, pages = 0; pages < 100; pages++) {
            const page = await store.scan(c, asked(after));
            const text = await store.scanJson(c, asked(after));
            expect(JSON.parse(`[${text.json}]`), name).toStrictEqual(page);
            expect(text.count, name).toBe(page.length);
            expect(text.last, name).toBe(page.at(-1)?.id);
            if (page.length < 2) break;
            after = text.last;
          }
        }
      });

      it('returns whole documents', async () => {
        const found = await store.find(c, fixtureQuery({ filter: [{ column: 'id', value: D1 }] }), everything);
        expect(found).toEqual([fixtureDocuments.find((d) => d.id === D1)]);
      });

      it('pages with offset and limit over the sorted result; count ignores the page', async () => {
        expect(idsOf(await store.find(c, byCode, { offset: 0, limit: 2 }))).toEqual([D1, D2]);
        expect(idsOf(await store.find(c, byCode, { offset: 2, limit: 3 }))).toEqual([D4, D5, D3]);
        expect(idsOf(await store.find(c, byCode, { offset: 6, limit: 5 }))).toEqual([D7]);
        expect(await store.find(c, byCode, { offset: 10, limit: 5 })).toEqual([]);
        expect(await store.findIds(c, byCode, { offset: 2, limit: 3 })).toEqual([D4, D5, D3]);
        const descending = fixtureQuery({ sort: [{ column: 'code', order: 'DESC' }] });
        expect(idsOf(await store.find(c, descending, { offset: 1, limit: 2 }))).toEqual([D6, D3]);
        expect(await store.count(c, byCode)).toBe(7);
      });

      it('finds nothing in a collection that was never written', async () => {
        expect(await store.find(fresh(), byCode, everything)).toEqual([]);
        expect(await store.count(fresh(), byCode)).toBe(0);
      });
    });

    describe('autocomplete', () => {
      let c: string;

      beforeAll(async () => {
        c = fresh();
        const gone = randomUUID();
        await store.ensureCollection(c, ['code', 'name']);
        await store.applyBatch(
          c,
          [
            { code: 'ADMINS', name: 'Administrators' },
            { code: 'USERS', name: 'Plain users' },
            { code: 'SYSADM', name: 'System admins' },
            { code: 'adm', name: 'Admin' },
            { code: 'A_B', name: 'Administrators' },
            { code: 'EMI', name: 'Émile' },
            { code: 'NONAME', name: null },
          ]
            .map((fields) => upsert({ id: randomUUID(), ...fields }, 1))
            .concat([upsert({ id: gone, code: 'ADMGONE' }, 1), remove(gone, 2)]),
          1n,
        );
      });

      it('puts values starting with the term first, then values containing it, each alphabetically', async () => {
        const expected = ['adm', 'Admin', 'Administrators', 'ADMINS', 'SYSADM', 'System admins'];
        expect(await store.autocomplete(c, ['code', 'name'], 'adm', 10)).toEqual(expected);
        expect(await store.autocomplete(c, ['code', 'name'], 'ADM', 10)).toEqual(expected);
      });

      it('answers at most limit values', async () => {
        expect(await store.autocomplete(c, ['code', 'name'], 'adm', 3)).toEqual(['adm', 'Admin', 'Administrators']);
      });

      it('searches only the given paths', async () => {
        expect(await store.autocomplete(c, ['code'], 'adm', 10)).toEqual(['adm', 'ADMINS', 'SYSADM']);
      });

      it('takes the term literally and folds non-ASCII case', async () => {
        expect(await store.autocomplete(c, ['code', 'name'], '_', 10)).toEqual(['A_B']);
        expect(await store.autocomplete(c, ['code', 'name'], '%', 10)).toEqual([]);
        expect(await store.autocomplete(c, ['code', 'name'], 'ÉMI', 10)).toEqual(['Émile']);
      });

      it('lists every distinct value for an empty term', async () => {
        expect(await store.autocomplete(c, ['code', 'name'], '', 100)).toEqual([
          'A_B',
          'adm',
          'Admin',
          'Administrators',
          'ADMINS',
          'EMI',
          'NONAME',
          'Plain users',
          'SYSADM',
          'System admins',
          'USERS',
          'Émile',
        ]);
      });
    });

    describe('reset', () => {
      it('drops every document and tombstone and the checkpoint', async () => {
        const a = randomUUID();
        const b = randomUUID();
        const c = fresh();
        await store.ensureCollection(c, ['code']);
        await store.applyBatch(c, [upsert({ id: a, code: 'A' }, 4), upsert({ id: b, code: 'B' }, 1), remove(b, 2)], 7n);
        await store.reset(c, c);
        expect(await store.size(c)).toBe(0);
        expect(await store.find(c, byCode, everything)).toEqual([]);
        expect((await store.getMany(c, [a, b])).size).toBe(0);
        expect(await store.checkpoint(c)).toBe(0n);
        await store.applyBatch(c, [upsert({ id: a, code: 'A again' }, 1)], 1n);
        expect((await store.getMany(c, [a])).get(a)).toEqual({ version: 1, doc: { id: a, code: 'A again' } });
        expect(idsOf(await store.find(c, like('code', '%again%'), everything))).toEqual([a]);
        expect(await store.count(c, like('code', 'b%'))).toBe(0);
      });

      it('leaves other collections and checkpoints alone', async () => {
        const kept = await collectionWith([{ id: randomUUID(), code: 'K' }]);
        const dropped = await collectionWith([{ id: randomUUID(), code: 'D' }]);
        await store.reset(dropped, dropped);
        expect(await store.size(kept)).toBe(1);
        expect(await store.checkpoint(kept)).toBe(1n);
      });
    });

    describe('ensureCollection', () => {
      it('is idempotent and keeps the documents', async () => {
        const c = await collectionWith([{ id: randomUUID(), code: 'A', name: 'n' }]);
        await store.ensureCollection(c, ['code', 'name', 'chars.region']);
        await store.ensureCollection(c, ['code', 'name', 'chars.region']);
        expect(await store.size(c)).toBe(1);
      });

      it('indexes documents written before the paths were declared, for LIKE and autocomplete too', async () => {
        const a = { id: randomUUID(), code: 'OLD-1', name: 'Written before' };
        const c = await collectionWith([a]);
        await store.ensureCollection(c, ['code', 'name'], { textPaths: ['name'] });
        expect(idsOf(await store.find(c, like('name', '%before%'), everything))).toEqual([a.id]);
        expect(idsOf(await store.find(c, like('name', 'WRITTEN%'), everything))).toEqual([a.id]);
        expect(await store.autocomplete(c, ['name'], 'writ', 10)).toEqual(['Written before']);
      });
    });

    describe('LIKE through the search indexes', () => {
      it('sees every write: inserts, renames, deletes and documents brought back', async () => {
        const a = randomUUID();
        const b = randomUUID();
        const c = fresh();
        await store.ensureCollection(c, ['code', 'name']);
        await store.applyBatch(
          c,
          [upsert({ id: a, code: 'A', name: 'Quartz falcon' }, 1), upsert({ id: b, code: 'B', name: 'Amber' }, 1)],
          1n,
        );
        const named = async (pattern: string): Promise<string[]> => idsOf(await store.find(c, like('name', pattern), everything));
        expect(await named('%falcon%')).toEqual([a]);
        await store.applyBatch(
          c,
          [upsert({ id: a, code: 'A', name: 'Harbor ember' }, 2), upsert({ id: b, code: 'B', name: 'Amber', note: 'edited' }, 2)],
          2n,
        );
        expect(await named('%falcon%')).toEqual([]);
        expect(await named('%mber%')).toEqual([a, b]);
        expect(await named('harb%')).toEqual([a]);
        expect(await store.count(c, like('name', 'QUARTZ%'))).toBe(0);
        await store.applyBatch(c, [remove(b, 3)], 3n);
        expect(await named('%mber%')).toEqual([a]);
        expect(await store.autocomplete(c, ['name'], 'amb', 10)).toEqual([]);
        await store.applyBatch(c, [upsert({ id: b, code: 'B', name: 'Amber again' }, 4)], 4n);
        expect(await named('%er ag%')).toEqual([b]);
        expect(await store.count(c, fixtureQuery({ filter: [{ column: 'name', operator: 'NOT_LIKE', value: 'amber%' }] }))).toBe(1);
      });
    });

    describe('scan', () => {
      it('pages through live documents in id order, tombstones left out', async () => {
        const docs = Array.from({ length: 23 }, (_, i) => ({ id: randomUUID(), code: `S${String(i)}` }));
        const c = await collectionWith(docs);
        await store.applyBatch(c, [remove(docs[4]?.id ?? '', 2)], 2n);
        const live = docs
          .filter((_, i) => i !== 4)
          .map((d) => d.id)
          .sort(binary);
        const seen: string[] = [];
        for (
          let page = await store.scan(c, { limit: 5 });
          page.length > 0;
          page = await store.scan(c, { after: seen.at(-1) ?? '', limit: 5 })
        ) {
          expect(page.length).toBeLessThanOrEqual(5);
          seen.push(...idsOf(page));
        }
        expect(seen).toEqual(live);
        expect(await store.scan(c, { limit: 0 })).toEqual([]);
        expect(await store.scan(fresh(), { limit: 5 })).toEqual([]);
        expect(await store.scanJson(c, { limit: 0 })).toEqual({ json: '', count: 0, last: undefined });
        expect(await store.scanJson(fresh(), { limit: 5 })).toEqual({ json: '', count: 0, last: undefined });
        expect(JSON.parse(`[${(await store.scanJson(c, { limit: 100 })).json}]`)).toStrictEqual(await store.scan(c, { limit: 100 }));
        expect((await store.scan(c, { after: live[0] ?? '', limit: 1 }))[0]).toEqual(docs.find((d) => d.id === live[1]));
      });

      it('never repeats or skips a live document when documents are written and deleted between pages', async () => {
        const docs = Array.from({ length: 40 }, (_, i) => ({ id: randomUUID(), code: `P${String(i)}` }));
        const c = await collectionWith(docs);
        const alive = new Set<string>(docs.map((d) => d.id));
        const everLive = new Set<string>(alive);
        const deleted = new Set<string>();
        const seen: string[] = [];
        let version = 2;
        for (;;) {
          const page = await store.scan(c, seen.length === 0 ? { limit: 6 } : { after: seen.at(-1) ?? '', limit: 6 });
          if (page.length === 0) break;
          for (const d of page) expect(alive.has(d.id)).toBe(true);
          seen.push(...idsOf(page));
          // Between pages: delete one seen and one not yet seen, rewrite one not yet seen, add one.
          const cursor = seen.at(-1) ?? '';
          const ahead = [...alive].filter((id) => binary(id, cursor) > 0).sort(binary);
          const behind = seen.filter((id) => alive.has(id));
          const writes: DocumentWrite[] = [];
          for (const id of [behind[0], ahead.at(-1)]) {
            if (id === undefined) continue;
            writes.push(remove(id, version));
            alive.delete(id);
            deleted.add(id);
          }
          if (ahead[0] !== undefined) writes.push(upsert({ id: ahead[0], code: 'REWRITTEN' }, version));
          const added = randomUUID();
          writes.push(upsert({ id: added, code: 'ADDED' }, version));
          alive.add(added);
          everLive.add(added);
          await store.applyBatch(c, writes, BigInt(version));
          version += 1;
        }
        expect(seen).toEqual([...new Set(seen)].sort(binary));
        const liveThroughout = [...everLive].filter((id) => !deleted.has(id) && docs.some((d) => d.id === id));
        for (const id of liveThroughout) expect(seen).toContain(id);
        // Added after the cursor passed them or not: only ever the ones still alive when reached.
        for (const id of seen) expect(everLive.has(id)).toBe(true);
      });
    });

    describe('bulkLoad', () => {
      const versioned = (doc: Document, version: number): VersionedDocument => ({ id: doc.id, version, doc });

      it('replaces the documents, keeps tombstones, sets the checkpoint, and the indexes serve the load', async () => {
        const c = fresh();
        await store.ensureCollection(c, ['code', 'name']);
        const old = { id: randomUUID(), code: 'OLD', name: 'Old one' };
        await store.applyBatch(c, [upsert(old, 1)], 5n);
        const loaded = ['Quartz falcon', 'Amber harbor', 'quartz Ember'].map((name, i) => ({
          id: randomUUID(),
          code: `L${String(i)}`,
          name,
        }));
        const gone = randomUUID();
        await store.bulkLoad(c, [...loaded.map((d) => versioned(d, 3)), { id: gone, version: 7, doc: null }], 42n);
        expect(await store.checkpoint(c)).toBe(42n);
        expect(await store.size(c)).toBe(3);
        expect((await store.getMany(c, [old.id, gone])).get(gone)).toEqual({ version: 7, doc: null });
        expect((await store.getMany(c, [old.id])).size).toBe(0);
        expect(await store.find(c, byCode, everything)).toEqual(loaded);
        expect(idsOf(await store.find(c, like('name', 'QUARTZ%'), everything))).toEqual([loaded[0]?.id, loaded[2]?.id]);
        expect(idsOf(await store.find(c, like('name', '%harb%'), everything))).toEqual([loaded[1]?.id]);
        expect(await store.autocomplete(c, ['code', 'name'], 'quartz', 10)).toEqual(['quartz Ember', 'Quartz falcon']);
        // Writes after the load: the version guard holds for tombstones, the indexes follow.
        await store.applyBatch(
          c,
          [upsert({ id: gone, code: 'BACK' }, 6), upsert({ ...loaded[1], id: loaded[1]?.id ?? '', name: 'Harbor moved' }, 4)],
          43n,
        );
        expect((await store.getMany(c, [gone])).get(gone)).toEqual({ version: 7, doc: null });
        expect(idsOf(await store.find(c, like('name', '%moved%'), everything))).toEqual([loaded[1]?.id]);
        expect(await store.find(c, like('name', '%amber%'), everything)).toEqual([]);
      });

      it('takes an async iterable', async () => {
        const c = fresh();
        await store.ensureCollection(c, ['code']);
        const docs = Array.from({ length: 5 }, (_, i) => ({ id: randomUUID(), code: `A${String(i)}` }));
        async function* generate(): AsyncGenerator<VersionedDocument> {
          for (const d of docs) {
            await Promise.resolve();
            yield versioned(d, 1);
          }
        }
        await store.bulkLoad(c, generate(), 9n, `${c}_projection`);
        expect(await store.find(c, byCode, everything)).toEqual(docs);
        expect(await store.checkpoint(`${c}_projection`)).toBe(9n);
      });

      it('fails on a repeated id, leaving the checkpoint at 0 and the indexes working', async () => {
        const c = fresh();
        await store.ensureCollection(c, ['code', 'name']);
        await store.applyBatch(c, [], 5n);
        const a = { id: randomUUID(), code: 'A', name: 'Alpha' };
        await expect(store.bulkLoad(c, [versioned(a, 1), versioned({ ...a, name: 'Again' }, 2)], 9n)).rejects.toThrow();
        expect(await store.checkpoint(c)).toBe(0n);
        await store.applyBatch(c, [upsert({ id: randomUUID(), code: 'B', name: 'Bravo' }, 1)], 1n);
        expect(await store.count(c, like('name', '%rav%'))).toBe(1);
      });
    });

    describe('lease', () => {
      it('goes to one owner at a time: taken, refused to another, renewed by its owner', async () => {
        const p = fresh();
        expect(await store.tryLease(p, 'one', 30_000)).toBe(true);
        expect(await store.tryLease(p, 'two', 30_000)).toBe(false);
        expect(await store.tryLease(p, 'one', 30_000)).toBe(true);
        expect(await store.tryLease(fresh(), 'two', 30_000)).toBe(true);
      });

      it('of concurrent takers exactly one wins', async () => {
        const p = fresh();
        const results = await Promise.all(Array.from({ length: 8 }, (_, i) => store.tryLease(p, `owner-${String(i)}`, 30_000)));
        expect(results.filter(Boolean)).toHaveLength(1);
      });

      it('passes to another owner once it lapses or is released', async () => {
        const p = fresh();
        expect(await store.tryLease(p, 'one', 200)).toBe(true);
        await new Promise((r) => setTimeout(r, 400));
        expect(await store.tryLease(p, 'two', 30_000)).toBe(true);
        await store.releaseLease(p, 'one');
        expect(await store.tryLease(p, 'one', 30_000)).toBe(false);
        await store.releaseLease(p, 'two');
        expect(await store.tryLease(p, 'one', 30_000)).toBe(true);
      });
    });
  });
}
