import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Document, DocumentWrite } from '../../../domain/ports.ts';
import type { Query } from '../../../domain/shared/filtering.ts';
import { openSqliteReadStore, type SqliteReadStore } from '../../../infra/sqlite/readStore.ts';
import { readStoreContract } from '../../support/readStoreContract.ts';
import { fixtureDocuments, fixtureIndexedPaths, fixtureQuery } from '../../support/readStoreFixtures.ts';

const file = join(tmpdir(), `read-store-${randomUUID()}.sqlite`);

afterAll(async () => {
  await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(`${file}${suffix}`, { force: true })));
});

readStoreContract('sqlite file', () => Promise.resolve(openSqliteReadStore({ path: file })));
readStoreContract('sqlite :memory:', () => Promise.resolve(openSqliteReadStore({ path: ':memory:' })));

const upsert = (doc: Document, version: number): DocumentWrite => ({ kind: 'upsert', id: doc.id, version, doc });
const page = { offset: 0, limit: 20 };
const idsOf = (docs: readonly Document[]): string[] => docs.map((d) => d.id);

describe('SqliteReadStore', () => {
  let store: SqliteReadStore;
  const c = 'fixtures';

  beforeAll(async () => {
    store = openSqliteReadStore({ path: ':memory:' });
    await store.ensureCollection(c, fixtureIndexedPaths);
    await store.applyBatch(c, fixtureDocuments.map((d) => upsert(d, 1)), 1n);
  });

  afterAll(async () => {
    await store.close();
  });

  const plan = (query: Query): string => store.explain(c, query, page).join('\n');

  describe('query plans', () => {
    it('searches the expression index for EQ on an indexed path, with no sort step', () => {
      const p = plan(fixtureQuery({ filter: [{ column: 'code', operator: 'EQ', value: 'ALPHA' }] }));
      expect(p).toMatch(/SEARCH .* USING INDEX rm_fixtures__code_\w+ \(<expr>=\?\)/);
      expect(p).not.toContain('TEMP B-TREE');
    });

    it('walks the index of the default sort instead of sorting', () => {
      const p = plan(fixtureQuery({}));
      expect(p).toMatch(/SCAN .* USING INDEX rm_fixtures__code_\w+/);
      expect(p).not.toContain('TEMP B-TREE');
    });

    it('searches the index for a range on a date-time path sorted by it', () => {
      const p = plan(
        fixtureQuery({
          filter: [{ column: 'createdAt', operator: 'GTE', value: '2024-01-01T00:00:00Z' }],
          sort: [{ column: 'createdAt', order: 'DESC' }],
        }),
      );
      expect(p).toMatch(/SEARCH .* USING INDEX rm_fixtures__createdAt_\w+ \(<expr>>\?\)/);
    });

    it('searches the index for IN on an indexed path', () => {
      const p = plan(fixtureQuery({ filter: [{ column: 'code', operator: 'IN', values: ['ALPHA', 'BETA'] }] }));
      expect(p).toMatch(/SEARCH .* USING INDEX rm_fixtures__code_\w+ \(<expr>=\?\)/);
    });

    it('walks the index of a path below a nested object when sorting by it', () => {
      const p = plan(fixtureQuery({ sort: [{ column: 'auditInfo.whenEdited', order: 'ASC' }] }));
      expect(p).toMatch(/SCAN .* USING INDEX rm_fixtures__auditInfo_whenEdited_\w+/);
      expect(p).not.toContain('TEMP B-TREE');
    });
  });

  describe('injection', () => {
    const hostile = ["x' OR '1'='1", "'); DROP TABLE \"rm_fixtures\"; --", '%\' OR 1=1 --', '\\', '"', '$.code'];

    it('binds values as data', async () => {
      for (const value of hostile) {
        for (const operator of ['EQ', 'LIKE', 'IN']) {
          const query = fixtureQuery({ filter: [{ column: 'code', operator, value }, { column: 'chars.region', operator, value }] });
          expect(await store.find(c, query, page)).toEqual([]);
        }
      }
      expect(await store.size(c)).toBe(fixtureDocuments.length);
    });

    it('refuses a path that is not a plain dotted path', async () => {
      const query: Query = {
        conditions: [{ kind: 'field', column: { path: "code') OR 1=1 --", type: 'string', array: false }, op: 'EQ', value: 'x' }],
        sort: [],
      };
      await expect(store.find(c, query, page)).rejects.toThrow(RangeError);
      await expect(store.ensureCollection(c, ['a b'])).rejects.toThrow(RangeError);
    });

    it('refuses a collection name that is not an identifier', async () => {
      await expect(store.size('x"; DROP TABLE checkpoints; --')).rejects.toThrow(RangeError);
      await expect(store.applyBatch('user-groups', [], 1n)).rejects.toThrow(RangeError);
    });
  });

  it('skips array elements that are not objects in a nested condition', async () => {
    const id = randomUUID();
    await store.applyBatch('mixed', [upsert({ id, regions: ['legacy', 7, null, { role: 'admin' }] }, 1)], 1n);
    for (const operator of ['EQ', 'NOT_EQ', 'IS_NULL']) {
      const query = fixtureQuery({ filter: [{ isNested: true, nestedPath: 'regions', nestedProperty: 'role', operator, value: 'admin' }] });
      expect(idsOf(await store.find('mixed', query, page))).toEqual(operator === 'EQ' ? [id] : []);
    }
  });

  it('rolls back the writes of a failed batch with its checkpoint', async () => {
    const projection = 'atomic';
    const first = { id: randomUUID(), code: 'FIRST' };
    const circular: Document = { id: randomUUID(), code: 'LOOP' };
    circular.self = circular;
    await expect(store.applyBatch(projection, [upsert(first, 1), upsert(circular, 1)], 5n)).rejects.toThrow();
    expect((await store.getMany(projection, [first.id])).size).toBe(0);
    expect(await store.checkpoint(projection)).toBe(0n);
    await store.applyBatch(projection, [upsert(first, 1)], 5n);
    expect(await store.size(projection)).toBe(1);
  });

  it('keeps documents, tombstones and checkpoints across a reopen', async () => {
    const path = join(tmpdir(), `read-store-${randomUUID()}.sqlite`);
    try {
      const id = randomUUID();
      const gone = randomUUID();
      const first = openSqliteReadStore({ path });
      await first.applyBatch('things', [upsert({ id, code: 'KEPT' }, 2), upsert({ id: gone, code: 'GONE' }, 1), { kind: 'delete', id: gone, version: 2 }], 42n);
      await first.close();
      const second = openSqliteReadStore({ path });
      expect(await second.checkpoint('things')).toBe(42n);
      expect(await second.getMany('things', [id, gone])).toEqual(
        new Map<string, { version: number; doc: Document | null }>([
          [id, { version: 2, doc: { id, code: 'KEPT' } }],
          [gone, { version: 2, doc: null }],
        ]),
      );
      await second.close();
    } finally {
      await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(`${path}${suffix}`, { force: true })));
    }
  });
});
