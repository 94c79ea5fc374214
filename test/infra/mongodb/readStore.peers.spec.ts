// The ReadStore contract on every MongoDB peer (test/support/mongoPeers.ts: FerretDB in every run
// where Go builds it; MongoDB against MONGODB_URL or in a container), each peer's missing ones
// skipped with the reason in the title. Plus what only a real server shows: leases between
// instances by the server's clock, hostile values and keys, and the cases mingo does not model
// (PCRE anchors, `$elemMatch` over non-documents), compared with SQLite.

import { randomUUID } from 'node:crypto';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { Document, DocumentWrite, Page, ReadStore } from '../../../domain/ports.ts';
import type { Query } from '../../../domain/shared/filtering.ts';
import { MongoReadStore, openMongoReadStore } from '../../../infra/mongodb/readStore.ts';
import { openSqliteReadStore } from '../../../infra/sqlite/readStore.ts';
import { eachMongoPeer, watchedClient, withOptions } from '../../support/mongoPeers.ts';
import { limitedIt } from '../../support/peerLimits.ts';
import { readStoreContract } from '../../support/readStoreContract.ts';
import { fixtureDocuments, fixtureQuery, type FilteringBody } from '../../support/readStoreFixtures.ts';

const upsert = (doc: Document, version: number): DocumentWrite => ({ kind: 'upsert', id: doc.id, version, doc });
const idsOf = (docs: readonly Document[]): string[] => docs.map((d) => d.id);
const fresh = (): string => `c${randomUUID().replaceAll('-', '')}`;
const everything: Page = { offset: 0, limit: 1000 };
/** A store on a client that records what it sends (watchedClient). */
function watchedStore(url: string, dbName: string) {
  const { client, during } = watchedClient(url);
  return { store: new MongoReadStore(client, client.db(dbName)), during };
}

eachMongoPeer('MongoDB read store', (peer, serverUrl) => {
  const it = limitedIt(peer.limits);
  // One database per file and peer; a server that outlives the run keeps nothing of it.
  const dbName = `readstore_test_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const opened: Promise<MongoReadStore>[] = [];

  afterAll(async () => {
    for (const s of await Promise.allSettled(opened)) if (s.status === 'fulfilled') await s.value.close();
    const client = new MongoClient(serverUrl());
    try {
      await client.db(dbName).dropDatabase();
    } finally {
      await client.close();
    }
  }, 60_000);

  const openStore = (): Promise<MongoReadStore> => {
    const store = openMongoReadStore(serverUrl(), { dbName });
    opened.push(store);
    return store;
  };
  // The contract closes the store it opens.
  readStoreContract(peer.name, () => openMongoReadStore(serverUrl(), { dbName }), peer.limits);

  describe('MongoDB read store on a real server', () => {
    let one: MongoReadStore;
    let two: MongoReadStore;

    beforeAll(async () => {
      [one, two] = await Promise.all([openStore(), openStore()]);
    });

    it('keeps the newest version when two instances insert one new document at once', async () => {
      const c = fresh();
      for (let round = 0; round < 50; round++) {
        const id = randomUUID();
        await Promise.all([
          one.applyBatch(c, [upsert({ id, code: 'OLD' }, 5)], 1n),
          two.applyBatch(c, [upsert({ id, code: 'NEW' }, 6)], 1n),
        ]);
        expect((await one.getMany(c, [id])).get(id)).toEqual({ version: 6, doc: { id, code: 'NEW' } });
      }
    });

    describe('leases between instances', () => {
      it('goes to one owner, is renewed by it, and passes on when it lapses', async () => {
        const p = fresh();
        expect(await one.tryLease(p, 'one', 400)).toBe(true);
        expect(await two.tryLease(p, 'two', 30_000)).toBe(false);
        expect(await one.tryLease(p, 'one', 400)).toBe(true);
        await new Promise((r) => setTimeout(r, 800));
        expect(await two.tryLease(p, 'two', 30_000)).toBe(true);
        expect(await one.tryLease(p, 'one', 30_000)).toBe(false);
      });

      it('is given up only by its owner', async () => {
        const p = fresh();
        expect(await one.tryLease(p, 'one', 30_000)).toBe(true);
        await two.releaseLease(p, 'two');
        expect(await two.tryLease(p, 'two', 30_000)).toBe(false);
        await one.releaseLease(p, 'one');
        expect(await two.tryLease(p, 'two', 30_000)).toBe(true);
      });

      it('of concurrent takers on two instances exactly one wins', async () => {
        const p = fresh();
        const takers = Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? one : two).tryLease(p, `owner-${String(i)}`, 30_000));
        expect((await Promise.all(takers)).filter(Boolean)).toHaveLength(1);
      });

      it('reads owners as data', async () => {
        const p = fresh();
        expect(await one.tryLease(p, '$owner', 30_000)).toBe(true);
        expect(await two.tryLease(p, '$$NOW', 30_000)).toBe(false);
        expect(await one.tryLease(p, '$owner', 30_000)).toBe(true);
      });
    });

    describe('what the store sends', () => {
      it('drops a reset or bulk-loaded collection with its indexes, rather than deleting its documents one by one; empties it on FerretDB', async () => {
        // On FerretDB a create after a drop failed now and then: a SQLite connection of its pool
        // that had not read the schema since the drop took the dropped table's index for an
        // existing one ("index … already exists"), and a rebuild failed so
        // (test/workers/readModelJobs.int.spec.ts, two instances around a swap).
        const dropped = !peer.name.startsWith('FerretDB');
        const { store, during } = watchedStore(serverUrl(), dbName);
        const client = new MongoClient(serverUrl());
        try {
          const c = fresh();
          await store.ensureCollection(c, ['code', 'name']);
          await store.applyBatch(
            c,
            Array.from({ length: 20 }, (_, i) => upsert({ id: randomUUID(), code: `R${String(i)}` }, 1)),
            3n,
          );
          const exists = async () =>
            (
              await client
                .db(dbName)
                .listCollections({ name: `rm_${c}` })
                .toArray()
            ).length;
          // The drops and deletes sent to the collection (the checkpoint's delete aside).
          const emptying = async (work: () => Promise<unknown>) =>
            (await during(work)).commands
              .filter((e) => ['drop', 'delete'].includes(e.commandName) && e.command[e.commandName] !== 'checkpoints')
              .map((e) => e.commandName);
          expect(await exists()).toBe(1);
          expect(await emptying(() => store.reset(c, c))).toEqual([dropped ? 'drop' : 'delete']);
          expect(await exists()).toBe(dropped ? 0 : 1);
          expect(await store.size(c)).toBe(0);
          expect(await store.checkpoint(c)).toBe(0n);
          // Declared again by whoever writes it next, it works as before.
          await store.ensureCollection(c, ['code', 'name']);
          await store.applyBatch(c, [upsert({ id: randomUUID(), code: 'AGAIN' }, 1)], 1n);
          expect(await store.size(c)).toBe(1);
          const loaded = [{ id: 'd1', version: 1, doc: { id: 'd1', code: 'LOADED' } }];
          expect(await emptying(() => store.bulkLoad(c, loaded, 4n))).toEqual([dropped ? 'drop' : 'delete']);
          expect(await store.find(c, fixtureQuery({}), everything)).toEqual([{ id: 'd1', code: 'LOADED' }]);
        } finally {
          await client.close();
          await store.close();
        }
      });

      it('bounds every search, count and size by the query time limit', async () => {
        const { store, during } = watchedStore(serverUrl(), dbName);
        try {
          const c = fresh();
          await store.applyBatch(
            c,
            fixtureDocuments.map((d) => upsert(d, 1)),
            1n,
          );
          const query = fixtureQuery({ filter: [{ column: 'code', operator: 'LIKE', value: '%a%' }] });
          const reads: [string, () => Promise<unknown>][] = [
            ['find', () => store.find(c, query, everything)],
            ['findIds', () => store.findIds(c, query, everything)],
            ['count', () => store.count(c, query)],
            ['size', () => store.size(c)],
            ['scan', () => store.scan(c, { limit: 3, query })],
          ];
          for (const [name, read] of reads) {
            const { commands } = await during(read);
            const limits: unknown[] = commands.map((command) => [name, command.commandName, command.command.maxTimeMS as unknown]);
            expect(limits).toEqual(commands.map((command) => [name, command.commandName, 10_000]));
            expect(commands.length, name).toBeGreaterThan(0);
          }
        } finally {
          await store.close();
        }
      });

      it('reads leases, checkpoints and documents by id from the primary and writes them with majority, whatever the URL asks', async () => {
        // Against a single server every read preference reaches it; the one each operation asked
        // for is in the driver's server-selection log.
        const { store, during } = watchedStore(withOptions(serverUrl(), 'readPreference=secondaryPreferred&w=1'), dbName);
        try {
          const c = fresh();
          const id = randomUUID();
          const coordination: [string, () => Promise<unknown>][] = [
            ['applyBatch', () => store.applyBatch(c, [upsert({ id, code: 'A' }, 1)], 5n)],
            ['saveCheckpoint', () => store.saveCheckpoint(`${c}-processor`, 7n)],
            ['checkpoint', () => store.checkpoint(c)],
            ['getMany', () => store.getMany(c, [id])],
            ['tryLease', () => store.tryLease(c, 'one', 30_000)],
            ['releaseLease', () => store.releaseLease(c, 'one')],
          ];
          for (const [name, work] of coordination) {
            const { commands, selections } = await during(work);
            const onCoordination = commands.filter((command) =>
              ['checkpoints', 'leases'].includes(String(command.command[command.commandName])),
            );
            for (const command of onCoordination.filter((command) => ['update', 'delete', 'insert'].includes(command.commandName))) {
              expect([name, command.commandName, command.command.writeConcern]).toEqual([name, command.commandName, { w: 'majority' }]);
            }
            for (const selection of selections)
              expect([name, selection.operation, selection.mode]).toEqual([name, selection.operation, 'primary']);
            expect(selections.length, name).toBeGreaterThan(0);
          }
          // Searches follow the URL.
          const { selections } = await during(() => store.find(c, fixtureQuery({}), everything));
          expect(selections.map((selection) => selection.mode)).toEqual(['secondaryPreferred']);
        } finally {
          await store.close();
        }
      });
    });

    describe('injection', () => {
      let c: string;

      beforeAll(async () => {
        c = fresh();
        await one.applyBatch(
          c,
          fixtureDocuments.map((d) => upsert(d, 1)),
          1n,
        );
      });

      it('reads values as data', async () => {
        const hostile = [
          '{"$gt": ""}',
          '{"$ne": null}',
          '.*',
          '^',
          '$',
          '\\',
          '$where',
          'this.code',
          '[a-z]+',
          '(?i)alpha',
          '\0',
          '\\E.*\\Q',
        ];
        for (const value of hostile) {
          for (const operator of ['EQ', 'LIKE', 'IN']) {
            const query = fixtureQuery({
              filter: [
                { column: 'code', operator, value },
                { column: 'chars.region', operator, value },
              ],
            });
            expect(await one.find(c, query, everything)).toEqual([]);
          }
        }
        expect(await one.size(c)).toBe(fixtureDocuments.length);
      });

      it('stores documents with hostile keys and reads them back intact', async () => {
        const doc: Document = {
          id: randomUUID(),
          $where: 'sleep(1000)',
          nested: { $gt: '', 'a.b': { '%': 1, '%2E': 2, '': 3, '.': 4 }, $: [{ $ne: null }] },
          _bsontype: 'Code',
          ['__proto__']: { polluted: true },
          'x\0y': 'nul',
        };
        const k = fresh();
        await one.applyBatch(k, [upsert(doc, 1)], 1n);
        expect((await one.getMany(k, [doc.id])).get(doc.id)).toEqual({ version: 1, doc });
        expect(await one.find(k, fixtureQuery({}), everything)).toEqual([doc]);
      });

      it('refuses a path that is not a plain dotted path and a collection name that is not an identifier', async () => {
        const query: Query = {
          conditions: [{ kind: 'field', column: { path: 'code.$where', type: 'string', array: false }, op: 'EQ', value: 'x' }],
          sort: [],
        };
        await expect(one.find(c, query, everything)).rejects.toThrow(RangeError);
        await expect(one.ensureCollection(c, ['a b'])).rejects.toThrow(RangeError);
        await expect(one.size('x"; db.dropDatabase()')).rejects.toThrow(RangeError);
        await expect(one.applyBatch('user-groups', [], 1n)).rejects.toThrow(RangeError);
      });
    });

    describe('what mingo does not model, compared with the SQLite store', () => {
      const docs: Document[] = [
        { id: randomUUID(), code: 'A', name: 'abc\n', regions: ['legacy', 7, null, { role: 'admin' }] },
        { id: randomUUID(), code: 'B', name: 'abc', regions: [{ role: 'viewer' }, 'loose'] },
        { id: randomUUID(), code: 'C', name: 'a\nbc', regions: [null] },
        { id: randomUUID(), code: 'D', name: 'ABC', regions: 'not an array' },
      ];
      const bodies: FilteringBody[] = [
        ...['EQ', 'NOT_EQ', 'IS_NULL', 'IS_NOT_NULL', 'LIKE', 'NOT_LIKE'].map((operator) => ({
          filter: [{ isNested: true, nestedPath: 'regions', nestedProperty: 'role', operator, value: 'admin' }],
        })),
        ...['abc', 'abc%', '%bc', 'a_bc', 'a%c'].map((value) => ({ filter: [{ column: 'name', operator: 'LIKE', value }] })),
      ];
      let c: string;
      let sqlite: ReadStore;

      beforeAll(async () => {
        c = fresh();
        sqlite = openSqliteReadStore({ path: ':memory:' });
        await one.applyBatch(
          c,
          docs.map((d) => upsert(d, 1)),
          1n,
        );
        await sqlite.applyBatch(
          c,
          docs.map((d) => upsert(d, 1)),
          1n,
        );
      });

      afterAll(async () => {
        await sqlite.close();
      });

      for (const body of bodies) {
        it(JSON.stringify(body), async () => {
          const query = fixtureQuery(body);
          expect(idsOf(await one.find(c, query, everything))).toEqual(idsOf(await sqlite.find(c, query, everything)));
          expect(await one.count(c, query)).toBe(await sqlite.count(c, query));
        });
      }

      it('autocompletes as the SQLite store does', async () => {
        for (const term of ['', 'a', 'BC', '\n', '.']) {
          expect(await one.autocomplete(c, ['code', 'name'], term, 10)).toEqual(await sqlite.autocomplete(c, ['code', 'name'], term, 10));
        }
      });
    });
  });
});
