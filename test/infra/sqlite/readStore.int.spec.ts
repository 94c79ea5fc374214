import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
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
    await store.applyBatch(
      c,
      fixtureDocuments.map((d) => upsert(d, 1)),
      1n,
    );
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

    const like = (column: string, value: string, operator = 'LIKE'): Query => fixtureQuery({ filter: [{ column, operator, value }] });

    it('narrows a LIKE contains to the rows of the trigram index, then checks it', () => {
      for (const value of ['%one%', 'émile', "%o'brien%", 'ALPHA ONE', '%n \\ c%']) {
        const p = plan(like('name', value));
        expect(p).toMatch(/SEARCH .* USING INTEGER PRIMARY KEY \(rowid=\?\)/);
        expect(p).toMatch(/SCAN rm_fixtures__name_\w+_trigram VIRTUAL TABLE INDEX/);
      }
      expect(plan(like('chars.region', 'ort'))).toMatch(/SCAN rm_fixtures__chars_region_\w+_trigram VIRTUAL TABLE/);
    });

    it('reads the whole table for a LIKE with no run of three characters, or on a path without the index', () => {
      for (const p of [plan(like('name', '%o_e%')), plan(like('name', '%\u0000%')), plan(like('chars.note', 'inside'))]) {
        expect(p).not.toContain('VIRTUAL TABLE');
        expect(p).not.toMatch(/_lower/);
      }
    });

    it('searches a range of the lowercase index for a LIKE starting with ASCII text', () => {
      for (const value of ['alpha%', 'Eta S%', '2024-01%', 'a\\_b%']) {
        const column = value.startsWith('2024') ? 'createdAt' : 'name';
        const p = plan(like(column, value));
        expect(p).toMatch(new RegExp(`SEARCH .* USING INDEX rm_fixtures__${column}_\\w+_lower \\(<expr>>\\? AND <expr><\\?\\)`));
      }
      expect(plan(like('chars.region', 'nor%'))).toMatch(/USING INDEX rm_fixtures__chars_region_\w+_lower \(<expr>>\? AND <expr><\?\)/);
      // Not ASCII: JavaScript folds it, where lower() cannot say; the trigram index narrows it.
      expect(plan(like('name', 'émile%'))).toMatch(/VIRTUAL TABLE/);
    });

    it('walks the lowercase index for the values an autocomplete starts with, in its order', () => {
      const p = store.explainAutocomplete(c, 'name', 'alp').join('\n');
      expect(p).toMatch(/SEARCH .* USING INDEX rm_fixtures__name_\w+_lower \(<expr>>\? AND <expr><\?\)/);
      expect(p).not.toContain('TEMP B-TREE');
      expect(store.explainAutocomplete(c, 'name', '').join('\n')).toMatch(/USING INDEX rm_fixtures__name_\w+_lower \(<expr>>\?\)/);
    });
  });

  describe('injection', () => {
    const hostile = ["x' OR '1'='1", '\'); DROP TABLE "rm_fixtures"; --', "%' OR 1=1 --", '\\', '"', '$.code'];

    it('binds values as data', async () => {
      for (const value of hostile) {
        for (const operator of ['EQ', 'LIKE', 'IN']) {
          const query = fixtureQuery({
            filter: [
              { column: 'code', operator, value },
              { column: 'chars.region', operator, value },
            ],
          });
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

  it('builds the search indexes of a database written without them, and a bulk load keeps them', async () => {
    const path = join(tmpdir(), `read-store-${randomUUID()}.sqlite`);
    const named = fixtureQuery({ filter: [{ column: 'name', operator: 'LIKE', value: '%two%' }] });
    try {
      const first = openSqliteReadStore({ path });
      await first.ensureCollection('things', ['code', 'name'], { textPaths: [] });
      await first.applyBatch(
        'things',
        fixtureDocuments.map((d) => upsert(d, 1)),
        1n,
      );
      expect(first.explain('things', named, page).join('\n')).not.toContain('VIRTUAL TABLE');
      await first.close();
      const second = openSqliteReadStore({ path });
      await second.ensureCollection('things', ['code', 'name']);
      expect(second.explain('things', named, page).join('\n')).toContain('VIRTUAL TABLE');
      expect(idsOf(await second.find('things', named, page))).toEqual(['00000000-0000-4000-8000-000000000002']);
      await second.bulkLoad(
        'things',
        fixtureDocuments.map((d) => ({ id: d.id, version: 1, doc: d })),
        2n,
      );
      expect(second.explain('things', named, page).join('\n')).toContain('VIRTUAL TABLE');
      await expect(
        second.bulkLoad(
          'things',
          [
            { id: 'x', version: 1, doc: { id: 'x' } },
            { id: 'x', version: 2, doc: null },
          ],
          3n,
        ),
      ).rejects.toThrow();
      expect(second.explain('things', named, page).join('\n')).toContain('VIRTUAL TABLE');
      await second.close();
    } finally {
      await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(`${path}${suffix}`, { force: true })));
    }
  });

  describe('the search indexes change no answer', () => {
    // Characters where folding differs: JavaScript lowercases the Kelvin sign to k and İ to i plus a
    // dot, SQLite's LIKE folds ASCII only, a sigma lowercases by what follows it, NUL ends C strings.
    const alphabet = [
      'a',
      'b',
      'k',
      'K',
      '\u212a',
      'i',
      'I',
      '\u0130',
      '\u0131',
      's',
      'S',
      '\u017f',
      'σ',
      'ς',
      'Σ',
      'é',
      'É',
      '\0',
      '"',
      ' ',
      '.',
    ];
    const text = (maxLength: number) => fc.array(fc.constantFrom(...alphabet), { maxLength }).map((cs) => cs.join(''));
    const indexed = 'searched';
    const plain = 'unsearched';

    beforeAll(async () => {
      const values = fc.sample(text(9), { numRuns: 400, seed: 7 });
      const docs: Document[] = values.map((v, i) => ({
        id: randomUUID(),
        code: `C${String(i)}`,
        name: v,
        chars: { note: values[(i * 7) % values.length] ?? '' },
      }));
      // Values a string column may still hold: LIKE reads a number as its text, an array as JSON.
      docs.push({ id: randomUUID(), code: 'N', name: 12345 }, { id: randomUUID(), code: 'J', name: ['kab', 'aKi"s'] });
      docs.push({ id: randomUUID(), code: 'O', name: { x: 'Kab\\s' } }, { id: randomUUID(), code: 'Z', name: null });
      for (const [collection, textPaths] of [
        [indexed, undefined],
        [plain, []],
      ] as const) {
        await store.ensureCollection(collection, ['code', 'name', 'chars.note'], textPaths === undefined ? {} : { textPaths });
        await store.applyBatch(
          collection,
          docs.map((d) => upsert(d, 1)),
          1n,
        );
      }
    });

    it('LIKE and NOT_LIKE select the same documents', async () => {
      const codes = (docs: readonly Document[]): unknown[] => docs.map((d) => d.code);
      await fc.assert(
        fc.asyncProperty(
          text(6),
          fc.array(fc.constantFrom('', '%', '_'), { minLength: 3, maxLength: 3 }),
          fc.boolean(),
          fc.constantFrom('name', 'chars.note'),
          async (core, [before, middle, after], negated, column) => {
            const half = Math.floor(core.length / 2);
            const value = `${before ?? ''}${core.slice(0, half)}${middle ?? ''}${core.slice(half)}${after ?? ''}`;
            if (value === '') return;
            const query = fixtureQuery({ filter: [{ column, operator: negated ? 'NOT_LIKE' : 'LIKE', value }] });
            expect(codes(await store.find(indexed, query, { offset: 0, limit: 1000 }))).toEqual(
              codes(await store.find(plain, query, { offset: 0, limit: 1000 })),
            );
          },
        ),
        { numRuns: 400 },
      );
    });

    it('autocomplete answers the same values', async () => {
      await fc.assert(
        fc.asyncProperty(text(4), fc.integer({ min: 1, max: 12 }), async (term, limit) => {
          const paths = ['name', 'chars.note'];
          expect(await store.autocomplete(indexed, paths, term, limit)).toEqual(await store.autocomplete(plain, paths, term, limit));
        }),
        { numRuns: 300 },
      );
    });
  });

  it('adds the position column to a table created before documents carried one', async () => {
    const path = join(tmpdir(), `read-store-${randomUUID()}.sqlite`);
    const named = fixtureQuery({ filter: [{ column: 'name', operator: 'LIKE', value: '%two%' }] });
    const hasPosition = (): boolean => {
      const db = new DatabaseSync(path);
      try {
        return db.prepare(`SELECT 1 FROM pragma_table_info('rm_things') WHERE name = 'position'`).get() !== undefined;
      } finally {
        db.close();
      }
    };
    try {
      const gone = randomUUID();
      const first = openSqliteReadStore({ path });
      await first.ensureCollection('things', ['code', 'name']);
      await first.applyBatch('things', [...fixtureDocuments.map((d) => upsert(d, 1)), { kind: 'delete', id: gone, version: 2 }], 1n);
      await first.close();
      // The table as it was before: without the column, with its indexes and trigram triggers.
      const db = new DatabaseSync(path);
      db.exec('ALTER TABLE rm_things DROP COLUMN position');
      db.close();
      expect(hasPosition()).toBe(false);
      const second = openSqliteReadStore({ path });
      const [doc] = fixtureDocuments;
      if (doc === undefined) throw new Error('no fixture');
      expect((await second.getMany('things', [doc.id, gone])).get(gone)).toStrictEqual({ version: 2, doc: null });
      await second.ensureCollection('things', ['code', 'name']);
      await second.applyBatch('things', [{ ...upsert({ ...doc, name: 'Moved two' }, 2), position: 2n ** 100n + 7n }], 2n);
      expect((await second.getMany('things', [doc.id])).get(doc.id)).toStrictEqual({
        version: 2,
        doc: { ...doc, name: 'Moved two' },
        position: 2n ** 100n + 7n,
      });
      expect(second.explain('things', named, page).join('\n')).toContain('VIRTUAL TABLE');
      expect(idsOf(await second.find('things', named, page)).sort()).toEqual(['00000000-0000-4000-8000-000000000002', doc.id].sort());
      await second.close();
      expect(hasPosition()).toBe(true);
      const third = openSqliteReadStore({ path });
      expect((await third.getMany('things', [doc.id])).get(doc.id)?.position).toBe(2n ** 100n + 7n);
      await third.close();
    } finally {
      await Promise.all(['', '-wal', '-shm'].map((suffix) => rm(`${path}${suffix}`, { force: true })));
    }
  });

  it('keeps documents, tombstones and checkpoints across a reopen', async () => {
    const path = join(tmpdir(), `read-store-${randomUUID()}.sqlite`);
    try {
      const id = randomUUID();
      const gone = randomUUID();
      const first = openSqliteReadStore({ path });
      await first.applyBatch(
        'things',
        [upsert({ id, code: 'KEPT' }, 2), upsert({ id: gone, code: 'GONE' }, 1), { kind: 'delete', id: gone, version: 2 }],
        42n,
      );
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
