// The MongoDB read store's query language, replayed through mingo (MongoDB's query language in
// memory) with no server: every filtering fixture, compiled by infra/mongodb/query.ts and run over
// the fixture documents in their exact stored shape (encoded keys, BSON round trip, a tombstone),
// must select the fixture's ids and what the SQLite store selects; so must autocomplete, the
// version guard, checkpoints and leases. The container suite runs the port contract on a server.

import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Aggregator, Query as Mingo, find as mingoFind, updateOne as mingoUpdateOne } from 'mingo';
import type { PipelineStage } from 'mingo/updater';
import { BSON, MongoNetworkError, MongoServerError } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Document, DocumentWrite, Page } from '../../../domain/ports.ts';
import { likePattern, type Query } from '../../../domain/shared/filtering.ts';
import {
  LIVE,
  REGEX_OPTIONS,
  caselessPrefixRange,
  checkpointUpdate,
  collectionName,
  compileAutocomplete,
  compileFilter,
  compileScan,
  compileSort,
  decodeDocument,
  decodeKey,
  decodePosition,
  encodeDocument,
  encodeKey,
  encodePosition,
  indexSpec,
  leaseFilter,
  leaseFilterAt,
  leaseOwnedBy,
  leaseUpdate,
  leaseUpdateAt,
  likeRegex,
  sortDocument,
  storedDocument,
  versionedWrite,
  type Lease,
  type StoredDocument,
} from '../../../infra/mongodb/query.ts';
import { StoreUnavailableError } from '../../../domain/shared/errors.ts';
import { matchesAll, matchesAny } from '../../../domain/shared/matchQuery.ts';
import { isDuplicateKey, translateError } from '../../../infra/mongodb/readStore.ts';
import { openSqliteReadStore, type SqliteReadStore } from '../../../infra/sqlite/readStore.ts';
import {
  deletedDocument,
  filteringFixtures,
  fixtureDocuments,
  fixtureIndexedPaths,
  fixtureQuery,
  type FilteringBody,
} from '../../support/readStoreFixtures.ts';

const upsert = (doc: Document, version: number): DocumentWrite => ({ kind: 'upsert', id: doc.id, version, doc });
const remove = (id: string, version: number): DocumentWrite => ({ kind: 'delete', id, version });
const idsOf = (docs: readonly Document[]): string[] => docs.map((d) => d.id);
const everything: Page = { offset: 0, limit: 1000 };
const pages: readonly Page[] = [everything, { offset: 1, limit: 3 }, { offset: 0, limit: 1 }, { offset: 5, limit: 10 }];

// ---------------------------------------------------------------------------------------------
// A collection in memory: documents as the server would hold them, written as applyBatch writes.

/** What the server stores and gives back: the document through BSON, with MongoDB's key rules. */
const roundTrip = <T extends object>(document: T): T => BSON.deserialize(BSON.serialize(document, { checkKeys: true })) as T;

/** One replace-with-upsert of a bulk write: the filter (run by mingo) decides; when it misses, the
 * upsert inserts the filter's `_id`, which fails with a duplicate key if the document exists. */
function applyWrite(collection: StoredDocument[], write: DocumentWrite): void {
  const { filter, replacement } = versionedWrite(write);
  const matcher = new Mingo(filter);
  const at = collection.findIndex((d) => matcher.test(d));
  if (at >= 0) collection[at] = roundTrip({ _id: write.id, ...replacement });
  else if (!collection.some((d) => d._id === write.id)) collection.push(roundTrip({ _id: write.id, ...replacement }));
}

function applyBatch(collection: StoredDocument[], writes: readonly DocumentWrite[]): void {
  for (const write of writes) applyWrite(collection, write);
}

function mingoFindDocs(collection: readonly StoredDocument[], query: Query, page: Page): Document[] {
  const rows = mingoFind<StoredDocument>(collection, compileFilter(query))
    .sort(sortDocument(compileSort(query)))
    .skip(page.offset)
    .limit(page.limit)
    .all();
  return rows.flatMap((row) => (row.doc === null ? [] : [decodeDocument(row.doc)]));
}

const mingoCount = (collection: readonly StoredDocument[], query: Query): number =>
  mingoFind(collection, compileFilter(query)).all().length;

function mingoAutocomplete(collection: readonly StoredDocument[], paths: readonly string[], term: string, limit: number): string[] {
  const rows = new Aggregator(compileAutocomplete(paths, term, limit)).run(collection);
  return rows.map((row) => row._id).filter((v): v is string => typeof v === 'string');
}

const fixtureWrites: readonly DocumentWrite[][] = [
  [upsert(deletedDocument, 1), ...fixtureDocuments.map((d) => upsert(d, 1))],
  [remove(deletedDocument.id, 2)],
];

// ---------------------------------------------------------------------------------------------

describe('MongoDB query language through mingo', () => {
  let sqlite: SqliteReadStore;
  const stored: StoredDocument[] = [];
  const c = 'fixtures';

  beforeAll(async () => {
    sqlite = openSqliteReadStore({ path: ':memory:' });
    await sqlite.ensureCollection(c, fixtureIndexedPaths);
    for (const [i, writes] of fixtureWrites.entries()) {
      await sqlite.applyBatch(c, writes, BigInt(i + 1));
      applyBatch(stored, writes);
    }
  });

  afterAll(async () => {
    await sqlite.close();
  });

  it('stores the deleted document as a tombstone and every other as written', () => {
    expect(stored).toHaveLength(fixtureDocuments.length + 1);
    expect(stored.find((d) => d._id === deletedDocument.id)).toEqual({ _id: deletedDocument.id, v: 2, deleted: true, doc: null });
    for (const doc of fixtureDocuments) {
      const row = stored.find((d) => d._id === doc.id);
      expect(row && row.doc !== null ? decodeDocument(row.doc) : undefined).toEqual(doc);
    }
  });

  it('lets a repair replace the stored version, and nothing replace a newer one (the version filters)', () => {
    const rows: StoredDocument[] = [];
    const id = 'r1';
    applyWrite(rows, { kind: 'upsert', id, version: 2, doc: { id, code: 'drifted' } });
    applyWrite(rows, { kind: 'upsert', id, version: 2, doc: { id, code: 'replayed' } });
    applyWrite(rows, { kind: 'upsert', id, version: 1, doc: { id, code: 'stale' }, repair: true });
    expect(rows.map((r) => (r.doc === null ? null : decodeDocument(r.doc)))).toEqual([{ id, code: 'drifted' }]);
    applyWrite(rows, { kind: 'upsert', id, version: 2, doc: { id, code: 'refolded' }, repair: true });
    expect(rows.map((r) => (r.doc === null ? null : decodeDocument(r.doc)))).toEqual([{ id, code: 'refolded' }]);
  });

  describe('filtering fixtures: the fixture ids, and the SQLite store, with every page', () => {
    for (const fixture of filteringFixtures) {
      it(fixture.name, async () => {
        const query = fixtureQuery(fixture.body);
        expect(idsOf(mingoFindDocs(stored, query, everything))).toEqual(fixture.ids);
        for (const page of pages) {
          const expected = await sqlite.find(c, query, page);
          expect(idsOf(mingoFindDocs(stored, query, page))).toEqual(fixture.ids.slice(page.offset, page.offset + page.limit));
          expect(mingoFindDocs(stored, query, page)).toEqual(expected);
        }
        expect(mingoCount(stored, query)).toBe(fixture.ids.length);
        expect(mingoCount(stored, query)).toBe(await sqlite.count(c, query));
      });
    }
  });

  it('scans the documents each fixture selects by _id as the SQLite store scans them by id', async () => {
    for (const fixture of filteringFixtures) {
      const query = fixtureQuery(fixture.body);
      const page = (after: string | undefined): Document[] => {
        const { filter, sort } = compileScan(after, query);
        return mingoFind<StoredDocument>(stored, filter)
          .sort(sortDocument(sort))
          .limit(3)
          .all()
          .flatMap((row) => (row.doc === null ? [] : [decodeDocument(row.doc)]));
      };
      let after: string | undefined;
      const seen: string[] = [];
      for (;;) {
        const expected = await sqlite.scan(c, after === undefined ? { limit: 3, query } : { after, limit: 3, query });
        expect(page(after), fixture.name).toEqual(expected);
        if (expected.length === 0) break;
        seen.push(...idsOf(expected));
        after = expected.at(-1)?.id;
      }
      expect(seen.sort(), fixture.name).toEqual([...fixture.ids].sort());
    }
  });

  it('evaluates every fixture in memory (domain/shared/matchQuery) as the stores do', () => {
    for (const fixture of filteringFixtures) {
      const query = fixtureQuery(fixture.body);
      const selected = fixtureDocuments.filter((d) => matchesAll(d, query.conditions)).map((d) => d.id);
      expect(selected.sort(), fixture.name).toEqual([...fixture.ids].sort());
    }
  });

  it('narrows by alternatives (anyOf, access rules): SQLite, MongoDB through mingo and memory select the same union', async () => {
    const conditionsOf = (i: number) => fixtureQuery(filteringFixtures[i % filteringFixtures.length]?.body ?? {}).conditions;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.array(fc.nat(), { maxLength: 3 }), { maxLength: 3 }), fc.nat(), async (picks, base) => {
        const alternatives = picks.map((p) => p.flatMap(conditionsOf));
        const query: Query = { ...fixtureQuery(filteringFixtures[base % filteringFixtures.length]?.body ?? {}), anyOf: [alternatives] };
        const expected = fixtureDocuments
          .filter((d) => matchesAll(d, query.conditions) && matchesAny(d, alternatives))
          .map((d) => d.id)
          .sort();
        expect(idsOf(await sqlite.find(c, query, everything)).sort()).toEqual(expected);
        expect(idsOf(mingoFindDocs(stored, query, everything)).sort()).toEqual(expected);
        expect(await sqlite.count(c, query)).toBe(expected.length);
      }),
      { numRuns: 200 },
    );
  });

  it('keeps live documents only in every filter, first, as the partial indexes require', () => {
    for (const fixture of filteringFixtures) {
      const filter = compileFilter(fixtureQuery(fixture.body));
      expect(filter === LIVE || (Array.isArray(filter.$and) && filter.$and[0] === LIVE)).toBe(true);
    }
    expect(indexSpec('auditInfo.whenEdited')).toEqual({
      name: 'doc.auditInfo.whenEdited_1__id_1',
      key: { 'doc.auditInfo.whenEdited': 1, _id: 1 },
      partialFilterExpression: LIVE,
    });
  });

  describe('injection', () => {
    const hostile = [
      '{"$gt": ""}',
      '{"$ne": null}',
      '.*',
      '^',
      '$',
      '\\',
      '\\E.*\\Q',
      '$where',
      '$.code',
      'this.code',
      "x' || '1'=='1",
      '[a-z]+',
      '(?i)alpha',
      '\0',
      'a\nALPHA',
    ];

    it('reads values as data: hostile values select nothing, as in the SQLite store', async () => {
      for (const value of hostile) {
        for (const operator of ['EQ', 'NOT_EQ', 'LIKE', 'IN', 'GT']) {
          for (const column of ['code', 'chars.region', 'tags']) {
            const query = fixtureQuery({ filter: [{ column, operator, value }] });
            const found = idsOf(mingoFindDocs(stored, query, everything));
            expect(found).toEqual(idsOf(await sqlite.find(c, query, everything)));
            if (operator === 'EQ' || operator === 'LIKE' || operator === 'IN') expect(found).toEqual([]);
          }
        }
      }
    });

    it('puts values only below operators: every key of a compiled filter is an operator or a field', () => {
      const field = /^(?:_id|deleted|doc(?:\.[A-Za-z0-9_%-]+)+|[A-Za-z0-9_%-]+(?:\.[A-Za-z0-9_%-]+)*)$/;
      const operators = new Set([
        '$and',
        '$or',
        '$nor',
        '$not',
        '$eq',
        '$ne',
        '$in',
        '$gt',
        '$gte',
        '$lt',
        '$lte',
        '$regex',
        '$options',
        '$type',
        '$elemMatch',
      ]);
      const keys = (node: unknown): string[] =>
        Array.isArray(node)
          ? node.flatMap(keys)
          : typeof node === 'object' && node !== null
            ? Object.entries(node).flatMap(([k, v]) => [k, ...keys(v)])
            : [];
      for (const value of hostile) {
        for (const operator of ['EQ', 'NOT_EQ', 'LIKE', 'NOT_LIKE', 'IN', 'NOT_IN', 'GT', 'LTE']) {
          const query = fixtureQuery({
            filter: [
              { column: 'code', operator, value },
              { column: 'chars.region', operator, value },
              { column: 'tags', operator, value },
              { isNested: true, nestedPath: 'regions', nestedProperty: 'role', operator, value },
            ],
          });
          for (const key of keys(compileFilter(query))) expect(operators.has(key) || field.test(key)).toBe(true);
        }
      }
    });

    it('escapes every regular expression character of a LIKE value', () => {
      for (const value of hostile) {
        const regex = new RegExp(likeRegex(likePattern(value)), 'is');
        expect(regex.test(value)).toBe(!value.includes('_') && !value.includes('%'));
        expect(regex.test(`x${value}x`)).toBe(true);
        expect(regex.test('ALPHA')).toBe(false);
      }
    });

    it('stores documents with hostile keys and reads them back intact', () => {
      const doc: Document = {
        id: randomUUID(),
        $where: 'sleep(1000)',
        nested: { $gt: '', 'a.b': { '%': 1, '%2E': 2, '': 3, '.': 4 }, $: [{ $ne: null }] },
        _bsontype: 'Code',
        ['__proto__']: { polluted: true },
        'x\0y': 'nul',
      };
      const row = roundTrip({ _id: doc.id, ...versionedWrite(upsert(doc, 1)).replacement });
      expect(row.doc === null ? null : decodeDocument(row.doc)).toEqual(doc);
      expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    });

    it('refuses a path that is not a plain dotted path and a collection name that is not an identifier', () => {
      const badPath: Query = {
        conditions: [{ kind: 'field', column: { path: 'code.$where', type: 'string', array: false }, op: 'EQ', value: 'x' }],
        sort: [],
      };
      expect(() => compileFilter(badPath)).toThrow(RangeError);
      expect(() => compileAutocomplete(['a b'], 'x', 10)).toThrow(RangeError);
      expect(() => indexSpec('a..b')).toThrow(RangeError);
      expect(() => collectionName('x"; db.dropDatabase()')).toThrow(RangeError);
      expect(() => collectionName('user-groups')).toThrow(RangeError);
      expect(collectionName('groups')).toBe('rm_groups');
    });
  });
});

// ---------------------------------------------------------------------------------------------

describe('values the fixtures do not hold, compared with the SQLite store', () => {
  const c = 'edges';
  let sqlite: SqliteReadStore;
  const stored: StoredDocument[] = [];
  const docs: Document[] = [
    { id: randomUUID(), code: 'A', name: 'abc\n', chars: { region: ['north'], level: 1, count: [5], flag: [true], tags: [null] } },
    { id: randomUUID(), code: 'B', name: 'a\nb', chars: { a: [{ b: 1 }], region: { nested: 'north' }, level: '7' } },
    { id: randomUUID(), code: 'C', name: 'a.c', chars: { a: { b: 1 }, region: 'north', level: 5.5 } },
    { id: randomUUID(), code: 'D', name: 'a+c (x) [y] a$b ^z', chars: { a: 'scalar', level: -3 } },
    { id: randomUUID(), code: 'E', name: 'ÀÉÎ œ ß', chars: { region: null, a: { b: null } } },
    { id: randomUUID(), code: 'F', name: 'abc', tags: ['%', '_', 'a_c'], chars: {} },
  ];
  const bodies: FilteringBody[] = [
    { filter: [{ column: 'chars.region', operator: 'EQ', value: 'north' }] },
    // an array or object in a map is not equal to its JSON text
    { filter: [{ column: 'chars.region', operator: 'EQ', value: '["north"]' }] },
    { filter: [{ column: 'chars.region', operator: 'IN', values: ['{"nested":"north"}', 'x'] }] },
    { filter: [{ column: 'chars.region', operator: 'NOT_EQ', value: 'north' }] },
    { filter: [{ column: 'chars.region', operator: 'LIKE', value: 'nor' }] },
    { filter: [{ column: 'chars.region', operator: 'NOT_LIKE', value: 'nor' }] },
    { filter: [{ column: 'chars.region', operator: 'IS_NULL' }] },
    { filter: [{ column: 'chars.region', operator: 'IS_NOT_NULL' }] },
    { filter: [{ column: 'chars.level', operator: 'EQ', value: '5' }] },
    { filter: [{ column: 'chars.level', operator: 'GT', value: '4' }] },
    { filter: [{ column: 'chars.level', operator: 'LT', value: '6' }] },
    { filter: [{ column: 'chars.level', operator: 'NOT_IN', values: ['5', '7'] }] },
    { filter: [{ column: 'chars.count', operator: 'EQ', value: '5' }] },
    { filter: [{ column: 'chars.count', operator: 'GT', value: '4' }] },
    { filter: [{ column: 'chars.count', operator: 'NOT_EQ', value: '5' }] },
    { filter: [{ column: 'chars.count', operator: 'IS_NOT_NULL' }] },
    { filter: [{ column: 'chars.flag', operator: 'EQ', value: 'true' }] },
    { filter: [{ column: 'chars.tags', operator: 'IS_NULL' }] },
    { filter: [{ column: 'chars.a.b', operator: 'EQ', value: '1' }] },
    { filter: [{ column: 'chars.a.b', operator: 'NOT_EQ', value: '1' }] },
    { filter: [{ column: 'chars.a.b', operator: 'IS_NULL' }] },
    { filter: [{ column: 'chars.a.b', operator: 'IS_NOT_NULL' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: 'abc' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: 'a_b' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: 'a%b' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: '%c' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: 'a.c' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: '(x) [y]' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: 'a$b ^z' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: 'àéî%' }] },
    { filter: [{ column: 'name', operator: 'LIKE', value: '%%' }] },
    { filter: [{ column: 'name', operator: 'NOT_LIKE', value: '_' }] },
    { filter: [{ column: 'tags', operator: 'LIKE', value: 'a_c' }] },
    { filter: [{ column: 'tags', operator: 'EQ', value: '%' }] },
    { sort: [{ column: 'chars.level' }] },
    { sort: [{ column: 'chars.level', order: 'DESC' }] },
  ];

  beforeAll(async () => {
    sqlite = openSqliteReadStore({ path: ':memory:' });
    const writes = docs.map((d) => upsert(d, 1));
    await sqlite.applyBatch(c, writes, 1n);
    applyBatch(stored, writes);
  });

  afterAll(async () => {
    await sqlite.close();
  });

  for (const body of bodies) {
    it(JSON.stringify(body), async () => {
      const query = fixtureQuery(body);
      const expected = idsOf(await sqlite.find(c, query, everything));
      expect(idsOf(mingoFindDocs(stored, query, everything))).toEqual(expected);
      expect(mingoCount(stored, query)).toBe(expected.length);
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('autocomplete through mingo, compared with the SQLite store', () => {
  const c = 'names';
  let sqlite: SqliteReadStore;
  const stored: StoredDocument[] = [];
  const values: Record<string, unknown>[] = [
    { code: 'ADMINS', name: 'Administrators' },
    { code: 'USERS', name: 'Plain users' },
    { code: 'SYSADM', name: 'System admins' },
    { code: 'adm', name: 'Admin' },
    { code: 'A_B', name: 'Administrators' },
    { code: 'EMI', name: 'Émile' },
    { code: 'emi2', name: 'émile' },
    { code: 'NONAME', name: null },
    { code: '100%', name: 'a.b+c', tags: ['(paren)', 'a.b', 'Adm tag', 7, null] },
    { code: 'ZED', name: 'Zed', tags: 'adm scalar' },
    { code: 'zed', name: 'ärger', tags: [['adm nested']] },
    { code: 'ÄRGER', name: 'line\nbreak adm' },
  ];
  const terms = ['adm', 'ADM', '_', '%', '.', '+', '(', 'ÉMI', 'é', 'är', 'e', '', 'zz', '\n'];
  const paths = [['code', 'name'], ['code'], ['name', 'tags'], ['tags']];

  beforeAll(async () => {
    sqlite = openSqliteReadStore({ path: ':memory:' });
    const gone = randomUUID();
    const writes = [
      ...values.map((fields) => upsert({ id: randomUUID(), ...fields }, 1)),
      upsert({ id: gone, code: 'ADMGONE' }, 1),
      remove(gone, 2),
    ];
    await sqlite.applyBatch(c, writes, 1n);
    applyBatch(stored, writes);
  });

  afterAll(async () => {
    await sqlite.close();
  });

  for (const term of terms) {
    it(`term ${JSON.stringify(term)}`, async () => {
      for (const p of paths) {
        for (const limit of [100, 3]) {
          expect(mingoAutocomplete(stored, p, term, limit)).toEqual(await sqlite.autocomplete(c, p, term, limit));
        }
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('scan and bulk load through mingo, compared with the SQLite store', () => {
  it('pages by _id as the SQLite store pages by id, tombstones left out', async () => {
    const sqlite = openSqliteReadStore({ path: ':memory:' });
    const stored: StoredDocument[] = [];
    const docs = Array.from({ length: 17 }, (_, i) => ({ id: randomUUID(), code: `S${String(i)}` }));
    const writes = [...docs.map((d) => upsert(d, 1)), remove(docs[3]?.id ?? '', 2)];
    await sqlite.applyBatch('scan', writes, 1n);
    applyBatch(stored, writes);
    const page = (after: string | undefined): Document[] => {
      const { filter, sort } = compileScan(after);
      return mingoFind<StoredDocument>(stored, filter)
        .sort(sortDocument(sort))
        .limit(4)
        .all()
        .flatMap((row) => (row.doc === null ? [] : [decodeDocument(row.doc)]));
    };
    let after: string | undefined;
    let pages = 0;
    for (;;) {
      const expected = await sqlite.scan('scan', after === undefined ? { limit: 4 } : { after, limit: 4 });
      expect(page(after)).toEqual(expected);
      if (expected.length === 0) break;
      after = expected.at(-1)?.id;
      pages += 1;
    }
    expect(pages).toBe(4);
    await sqlite.close();
  });

  it('stores a bulk-loaded document or tombstone as a versioned write stores it', () => {
    const doc: Document = { id: randomUUID(), code: 'X', 'a.b': { $c: [1, null] } };
    expect(roundTrip(storedDocument({ id: doc.id, version: 4, doc }))).toEqual(
      roundTrip({ _id: doc.id, ...versionedWrite(upsert(doc, 4)).replacement }),
    );
    expect(storedDocument({ id: doc.id, version: 5, doc: null })).toEqual({
      _id: doc.id,
      ...versionedWrite(remove(doc.id, 5)).replacement,
    });
  });
});

describe('LIKE starting with characters that have no case', () => {
  it('also ranges over the field, from those characters to the next string after them', () => {
    expect(caselessPrefixRange(likePattern('2024-01%'))).toEqual({ $gte: '2024-01', $lt: '2024-02' });
    expect(caselessPrefixRange(likePattern('10 k%'))).toEqual({ $gte: '10 ', $lt: '10!' });
    expect(caselessPrefixRange(likePattern('1\\%'))).toBeUndefined();
    for (const value of ['abc%', '%12%', '_12%', '\u000012%', 'É1%']) expect(caselessPrefixRange(likePattern(value))).toBeUndefined();
  });

  it('selects what the regular expression alone selects', () => {
    // (Compared with the regex rather than the SQLite matcher: JavaScript's non-Unicode regex does
    // not fold the Kelvin sign into k, where JavaScript's toLowerCase and PCRE's Unicode mode do.)
    const chars = ['1', '2', '-', ' ', '~', '\u007f', 'a', 'A', 'k', '\u212a', 'é', '%', '_', '\\'];
    const text = (maxLength: number) => fc.array(fc.constantFrom(...chars), { maxLength }).map((cs) => cs.join(''));
    fc.assert(
      fc.property(text(6), text(8), (pattern, value) => {
        fc.pre(pattern !== '');
        const row = { _id: 'x', v: 1, deleted: false, doc: encodeDocument({ id: 'x', code: value, chars: { note: value } }) };
        for (const column of ['code', 'chars.note']) {
          const query = fixtureQuery({ filter: [{ column, operator: 'LIKE', value: pattern }] });
          expect(new Mingo(compileFilter(query)).test(row)).toBe(new RegExp(likeRegex(likePattern(pattern)), REGEX_OPTIONS).test(value));
        }
      }),
      { numRuns: 3000 },
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe('key codec', () => {
  const key = fc.oneof(
    fc.string({ unit: 'binary', maxLength: 12 }),
    fc.constantFrom('', '%', '%25', '%2E', '.', '..', '$', '$where', 'a.b', '$a.b%', '\0', '_bsontype', '__proto__', 'constructor'),
  );

  it('round-trips every key, to a key MongoDB accepts', () => {
    fc.assert(
      fc.property(key, (k) => {
        const encoded = encodeKey(k);
        expect(decodeKey(encoded)).toBe(k);
        expect(encoded).not.toBe('');
        expect(encoded.startsWith('$')).toBe(false);
        expect(encoded).not.toMatch(/[.\0]/);
        expect(encoded).not.toBe('_bsontype');
      }),
    );
  });

  it('leaves path segments as they are', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[A-Za-z0-9_-]{1,20}$/), (segment) => {
        fc.pre(segment !== '_bsontype');
        expect(encodeKey(segment)).toBe(segment);
      }),
    );
  });

  it('round-trips documents through BSON with MongoDB key checks', () => {
    const json = fc.letrec((tie) => ({
      value: fc.oneof(
        { depthSize: 'small' },
        fc.constant(null),
        fc.boolean(),
        fc.integer(),
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.string({ unit: 'binary', maxLength: 8 }),
        fc.array(tie('value'), { maxLength: 3 }),
        tie('object'),
      ),
      object: fc.array(fc.tuple(key, tie('value')), { maxLength: 4 }).map((entries) => Object.fromEntries(entries)),
    }));
    fc.assert(
      fc.property(json.object, (fields) => {
        const doc: Document = { ...fields, id: 'x' };
        const asJson = JSON.parse(JSON.stringify(doc)) as Document;
        const row = roundTrip({ _id: doc.id, ...versionedWrite(upsert(doc, 1)).replacement });
        expect(row.doc === null ? null : JSON.parse(JSON.stringify(decodeDocument(row.doc)))).toEqual(asJson);
      }),
    );
  });

  it('refuses a circular document before anything is written', () => {
    const circular: Document = { id: 'x' };
    circular.self = { again: circular };
    expect(() => encodeDocument(circular)).toThrow(TypeError);
  });
});

// ---------------------------------------------------------------------------------------------

describe('version guard through mingo, compared with the SQLite store', () => {
  const a = randomUUID();
  const b = randomUUID();
  const scenarios: { name: string; batches: DocumentWrite[][] }[] = [
    {
      name: 'a replay of an older or the same version',
      batches: [[upsert({ id: a, code: 'V2' }, 2)], [upsert({ id: a, code: 'V1' }, 1), upsert({ id: a, code: 'V2 again' }, 2)]],
    },
    {
      name: 'several writes of one document in a batch',
      batches: [
        [
          upsert({ id: a, code: 'A1' }, 1),
          upsert({ id: a, code: 'A2' }, 2),
          upsert({ id: b, code: 'B3' }, 3),
          upsert({ id: b, code: 'B2' }, 2),
        ],
      ],
    },
    {
      name: 'a tombstone against replayed upserts',
      batches: [
        [upsert({ id: a, code: 'GONE' }, 1), upsert({ id: a, code: 'GONE' }, 2), remove(a, 3)],
        [upsert({ id: a, code: 'GONE' }, 1), upsert({ id: a, code: 'GONE' }, 3)],
      ],
    },
    { name: 'a replayed delete older than the stored version', batches: [[upsert({ id: a, code: 'KEPT' }, 5)], [remove(a, 4)]] },
    {
      name: 'a newer version after a delete',
      batches: [[upsert({ id: a, code: 'A' }, 1), remove(a, 2)], [upsert({ id: a, code: 'B' }, 3)]],
    },
    { name: 'a delete of a document never written', batches: [[remove(b, 4)], [upsert({ id: b, code: 'late' }, 3)]] },
  ];

  for (const scenario of scenarios) {
    it(scenario.name, async () => {
      const sqlite = openSqliteReadStore({ path: ':memory:' });
      try {
        for (const [i, batch] of scenario.batches.entries()) await sqlite.applyBatch('v', batch, BigInt(i + 1));
        const expected = await sqlite.getMany('v', [a, b]);
        // An unordered bulk write may run its writes in any order: the outcome may not depend on it.
        for (const order of [(w: DocumentWrite[]) => w, (w: DocumentWrite[]) => [...w].reverse()]) {
          const stored: StoredDocument[] = [];
          for (const batch of scenario.batches) applyBatch(stored, order(batch));
          const found = new Map(stored.map((row) => [row._id, { version: row.v, doc: row.doc === null ? null : decodeDocument(row.doc) }]));
          expect(found).toEqual(expected);
        }
      } finally {
        await sqlite.close();
      }
    });
  }
});

// ---------------------------------------------------------------------------------------------

describe('checkpoints', () => {
  it('orders encoded positions as the positions, up to 2^128', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 2n ** 128n }), fc.bigInt({ min: 0n, max: 2n ** 128n }), (x, y) => {
        const [ex, ey] = [encodePosition(x), encodePosition(y)];
        expect(ex < ey).toBe(x < y);
        expect(decodePosition(ex)).toBe(x);
      }),
    );
    expect(() => encodePosition(-1n)).toThrow(RangeError);
    expect(() => encodePosition(10n ** 40n)).toThrow(RangeError);
    expect(decodePosition(undefined)).toBe(0n);
  });

  it('never moves back under $max', () => {
    const positions = [10n, 12n, 9n, 2n ** 62n + 3n, 2n ** 100n, 5n, 2n ** 64n];
    const row: Record<string, unknown> = { _id: 'p' };
    let highest = 0n;
    for (const position of positions) {
      mingoUpdateOne([row], { _id: 'p' }, checkpointUpdate(position), { cloneMode: 'none' });
      highest = position > highest ? position : highest;
      expect(decodePosition(row.position)).toBe(highest);
    }
  });
});

// ---------------------------------------------------------------------------------------------

/** The two forms of a lease's write: with `$$NOW` in an update pipeline, and (for a server without
 * update pipelines: FerretDB) at the server's clock read just before, here the test's. */
const leaseForms = [
  {
    form: 'with $$NOW in an update pipeline',
    write: (projection: string, owner: string, ttlMs: number) => ({
      filter: leaseFilter(projection, owner),
      update: leaseUpdate(owner, ttlMs) as PipelineStage[],
    }),
  },
  {
    form: "at the server's clock read first",
    write: (projection: string, owner: string, ttlMs: number) => {
      const now = new Date();
      return { filter: leaseFilterAt(projection, owner, now), update: leaseUpdateAt(owner, ttlMs, now) };
    },
  },
];

describe.each(leaseForms)('leases through mingo, $form', ({ write }) => {
  /** tryLease as the server runs it: the update when the filter matches, else the upsert's insert,
   * which a held lease refuses with a duplicate key. */
  function tryLease(leases: Lease[], projection: string, owner: string, ttlMs: number): boolean {
    const { filter, update } = write(projection, owner, ttlMs);
    if (mingoUpdateOne(leases, filter, update).matchedCount > 0) return true;
    if (leases.some((l) => l._id === projection)) return false;
    const inserted: Record<string, unknown>[] = [{ _id: projection }];
    mingoUpdateOne(inserted, {}, update);
    leases.push(...(inserted as Lease[]));
    return true;
  }

  const release = (leases: Lease[], projection: string, owner: string): Lease[] => {
    const held = new Mingo(leaseOwnedBy(projection, owner));
    return leases.filter((l) => !held.test(l));
  };

  it('goes to one owner at a time, is renewed by its owner and passes on when it lapses or is released', () => {
    let leases: Lease[] = [];
    expect(tryLease(leases, 'p', 'one', 30_000)).toBe(true);
    const first = leases[0]?.expiresAt;
    expect(first).toBeInstanceOf(Date);
    expect((first?.getTime() ?? 0) - Date.now()).toBeGreaterThan(25_000);
    expect(tryLease(leases, 'p', 'two', 30_000)).toBe(false);
    expect(tryLease(leases, 'p', 'one', 60_000)).toBe(true);
    expect(leases[0]?.expiresAt.getTime()).toBeGreaterThan(first?.getTime() ?? 0);
    expect(tryLease(leases, 'q', 'two', 30_000)).toBe(true);

    leases = leases.map((l) => (l._id === 'p' ? { ...l, expiresAt: new Date(Date.now() - 1) } : l));
    expect(tryLease(leases, 'p', 'two', 30_000)).toBe(true);
    expect(leases.find((l) => l._id === 'p')?.owner).toBe('two');

    leases = release(leases, 'p', 'one');
    expect(tryLease(leases, 'p', 'one', 30_000)).toBe(false);
    leases = release(leases, 'p', 'two');
    expect(tryLease(leases, 'p', 'one', 30_000)).toBe(true);
  });

  it('reads an owner as data', () => {
    const leases: Lease[] = [];
    expect(tryLease(leases, 'p', '$owner', 30_000)).toBe(true);
    expect(leases[0]?.owner).toBe('$owner');
    expect(tryLease(leases, 'p', '$$NOW', 30_000)).toBe(false);
    expect(tryLease(leases, 'p', '$owner', 30_000)).toBe(true);
    expect(() => write('p', 'x', Number.NaN)).toThrow(RangeError);
  });
});

// ---------------------------------------------------------------------------------------------

describe('driver errors', () => {
  it('turns an unreachable server into StoreUnavailableError and keeps the rest', () => {
    const network = new MongoNetworkError('connection reset');
    expect(translateError(network)).toBeInstanceOf(StoreUnavailableError);
    const duplicate = new MongoServerError({ message: 'E11000 duplicate key', code: 11000 });
    expect(translateError(duplicate)).toBe(duplicate);
    expect(isDuplicateKey(duplicate)).toBe(true);
    const range = new RangeError('bad path');
    expect(translateError(range)).toBe(range);
  });

  it('reads a server shutting down, a primary stepping down or a query over its time limit as unavailable', () => {
    for (const code of [50, 91, 189, 11600, 10107]) {
      expect(translateError(new MongoServerError({ message: `code ${String(code)}`, code }))).toBeInstanceOf(StoreUnavailableError);
    }
    const unknownField = new MongoServerError({ message: 'unknown operator', code: 2 });
    expect(translateError(unknownField)).toBe(unknownField);
  });
});
