// Documents, a column catalogue and Filtering bodies with the ids each must select, in order. The
// read store contract runs them on every adapter; an equivalence test replays them through mingo.

import type { z } from 'zod';
import type { Document } from '../../domain/ports.ts';
import { FilteringSchema, toQuery, type Column, type ColumnCatalog, type ColumnType, type Query } from '../../domain/shared/filtering.ts';

const col = (path: string, type: ColumnType, array = false): [string, Column] => [path, { path, type, array }];

export const regionCatalog: ColumnCatalog = {
  columns: new Map([
    col('regionId', 'uuid'),
    col('role', 'string'),
    col('weight', 'number'),
    col('primary', 'boolean'),
    col('labels', 'string', true),
  ]),
  maps: new Set(),
  nested: new Map(),
};

export const fixtureCatalog: ColumnCatalog = {
  columns: new Map([
    col('id', 'uuid'),
    col('code', 'string'),
    col('name', 'string'),
    col('age', 'integer'),
    col('score', 'number'),
    col('active', 'boolean'),
    col('createdAt', 'date-time'),
    col('ownerId', 'uuid'),
    col('auditInfo.version', 'integer'),
    col('auditInfo.whenEdited', 'date-time'),
    col('tags', 'string', true),
    col('memberIds', 'uuid', true),
    col('ratings', 'number', true),
    col('answers', 'boolean', true),
    col('reviews', 'date-time', true),
  ]),
  maps: new Set(['chars']),
  nested: new Map([['regions', regionCatalog]]),
};

export const fixtureDefaultSort = ['code'] as const;

/** Paths a resource with this catalogue would declare for indexes. */
export const fixtureIndexedPaths = ['code', 'name', 'age', 'createdAt', 'auditInfo.whenEdited', 'chars.region'] as const;

const id = (n: number): string => `00000000-0000-4000-8000-00000000000${String(n)}`;
export const D1 = id(1);
export const D2 = id(2);
export const D3 = id(3);
export const D4 = id(4);
export const D5 = id(5);
export const D6 = id(6);
export const D7 = id(7);

export const U_A = 'aaaaaaaa-0000-4000-8000-000000000001';
export const U_B = 'aaaaaaaa-0000-4000-8000-000000000002';
export const U_C = 'aaaaaaaa-0000-4000-8000-000000000003';
export const R1 = 'bbbbbbbb-0000-4000-8000-000000000001';
export const R2 = 'bbbbbbbb-0000-4000-8000-000000000002';
export const R3 = 'bbbbbbbb-0000-4000-8000-000000000003';

/** A document deleted after it was written: no query may ever select its tombstone. */
export const deletedDocument: Document = {
  id: '00000000-0000-4000-8000-000000000000',
  code: 'AAA',
  name: 'beta two',
  age: 30,
  active: true,
  tags: ['red'],
  chars: { region: 'north', level: 5 },
  regions: [{ regionId: R1, role: 'admin' }],
};

/** Live documents. Default order (code ASC, binary, then id): D1 D2 D4 D5 D3 D6 D7. */
export const fixtureDocuments: readonly Document[] = [
  {
    id: D1,
    code: 'ALPHA',
    name: 'Alpha One',
    age: 30,
    score: 4.5,
    active: true,
    createdAt: '2024-01-15T10:00:00.000Z',
    ownerId: U_A,
    tags: ['red', 'blue'],
    memberIds: [U_A, U_B],
    ratings: [1, 5],
    answers: [true],
    reviews: ['2024-01-20T00:00:00.000Z'],
    auditInfo: { version: 3, whenEdited: '2024-02-01T00:00:00.000Z' },
    chars: { region: 'north', level: 5, vip: true, note: 'nul\u0000inside' },
    regions: [
      { regionId: R1, role: 'admin', weight: 1.5, primary: true, labels: ['hq'] },
      { regionId: R2, role: 'viewer', weight: 0.5, primary: false },
    ],
  },
  {
    id: D2,
    code: 'BETA',
    name: 'beta two',
    age: 25,
    score: 3,
    active: false,
    createdAt: '2023-12-31T23:59:59.999Z',
    ownerId: U_B,
    tags: ['green'],
    memberIds: [],
    ratings: [3],
    answers: [false, false],
    auditInfo: { version: 1, whenEdited: '2024-01-01T00:00:00.000Z' },
    chars: { region: 'south', level: '5', vip: 'true', note: '50%_off \\ Ünïcode' },
    regions: [{ regionId: R2, role: 'admin', weight: 2, primary: false }],
  },
  {
    id: D3,
    code: 'GAMMA',
    name: "O'Brien \\ Co",
    age: null,
    score: -1.25,
    active: true,
    createdAt: '2024-06-01T00:00:00.000Z',
    ownerId: null,
    tags: [],
    memberIds: [U_C],
    ratings: [],
    answers: [],
    auditInfo: { version: 2 },
    chars: { region: 'North', level: 10, vip: false },
    regions: [],
  },
  {
    id: D4,
    code: 'DELTA',
    name: 'Émile Zola',
    age: 40,
    score: 0,
    ownerId: U_A,
    tags: ['Red'],
    ratings: [10, 2.5],
    auditInfo: { version: 1, whenEdited: '2024-03-01T12:30:00.000Z' },
    chars: { region: null, level: 2.5 },
    regions: [{ regionId: R1, role: 'Viewer', weight: 3, primary: true }],
  },
  {
    id: D5,
    code: 'EPSILON',
    name: '100% pure_cotton',
    age: 18,
    score: 100,
    active: false,
    createdAt: '2025-01-01T00:00:00.000Z',
    ownerId: U_C,
    memberIds: [U_A],
    auditInfo: { version: 5, whenEdited: '2025-01-02T00:00:00.000Z' },
  },
  {
    id: D6,
    code: 'ZETA',
    name: null,
    age: 30,
    score: 4.5,
    active: true,
    createdAt: '2024-01-15T10:00:00.000Z',
    ownerId: U_B,
    tags: null,
    memberIds: [U_B],
    ratings: [5],
    auditInfo: { version: 1, whenEdited: '2024-02-01T00:00:00.000Z' },
    chars: { region: 'west', level: 7, vip: true, tier: 'gold' },
    regions: [{ regionId: R3, role: null, weight: 1 }],
  },
  {
    id: D7,
    code: 'eta',
    name: 'Eta Seven',
    age: 65,
    score: 2,
    active: true,
    createdAt: '2024-01-15T09:59:59.000Z',
    ownerId: U_C,
    tags: ['blue', 'yellow'],
    memberIds: [U_A, U_C],
    ratings: [2, 4],
    answers: [true, false],
    reviews: ['2023-05-01T00:00:00.000Z', '2024-07-01T00:00:00.000Z'],
    auditInfo: { version: 4, whenEdited: '2024-02-15T00:00:00.000Z' },
    chars: { region: 'south', level: 5 },
    regions: [{ regionId: R2, role: 'editor', weight: 2.5, primary: true, labels: ['x', 'y'] }],
  },
];

export type FilteringBody = z.input<typeof FilteringSchema>;

export type FilteringFixture = {
  name: string;
  body: FilteringBody;
  /** The ids selected, in the order the body's sort (or the default sort) puts them. */
  ids: readonly string[];
};

type Item = NonNullable<FilteringBody['filter']>[number];

const where = (column: string, operator: string, value?: string | number | boolean): Item =>
  value === undefined ? { column, operator } : { column, operator, value };
const whereIn = (column: string, operator: 'IN' | 'NOT_IN', values: readonly (string | number | boolean)[]): Item => ({
  column,
  operator,
  values: [...values],
});
const nested = (nestedPath: string, nestedProperty: string, operator: string, value?: string | number | boolean): Item =>
  value === undefined
    ? { isNested: true, nestedPath, nestedProperty, operator }
    : { isNested: true, nestedPath, nestedProperty, operator, value };

const one = (name: string, item: Item, ids: readonly string[]): FilteringFixture => ({ name, body: { filter: [item] }, ids });

export const filteringFixtures: readonly FilteringFixture[] = [
  { name: 'no filter: default sort by code (binary) then id', body: {}, ids: [D1, D2, D4, D5, D3, D6, D7] },

  one('string EQ', where('name', 'EQ', 'beta two'), [D2]),
  one('string EQ with a quote and a backslash', where('name', 'EQ', "O'Brien \\ Co"), [D3]),
  one('string EQ is case-sensitive', where('name', 'EQ', 'BETA TWO'), []),
  one('string EQ by key instead of column', { key: 'code', value: 'GAMMA' }, [D3]),
  one('string NOT_EQ matches null', where('name', 'NOT_EQ', 'beta two'), [D1, D4, D5, D3, D6, D7]),
  one('string LIKE without wildcard is a case-insensitive substring', where('name', 'LIKE', 'TWO'), [D2]),
  one('string LIKE % prefix', where('name', 'LIKE', 'eta%'), [D7]),
  one('string LIKE _ one character', where('name', 'LIKE', '_eta%'), [D2]),
  one('string LIKE % suffix', where('code', 'LIKE', '%TA'), [D2, D4, D6, D7]),
  one('string LIKE value holding a quote and a backslash', where('name', 'LIKE', "o'brien \\ co"), [D3]),
  one('string LIKE a lone backslash is data', where('name', 'LIKE', '\\'), [D3]),
  one('string LIKE a quote is data', where('name', 'LIKE', "'"), [D3]),
  one('string LIKE digits then %', where('name', 'LIKE', '100%'), [D5]),
  one('string LIKE folds non-ASCII case', where('name', 'LIKE', 'éMILE'), [D4]),
  one('string LIKE folds non-ASCII case, upper pattern', where('name', 'LIKE', 'ÉMILE z%'), [D4]),
  one('string NOT_LIKE matches null', where('name', 'NOT_LIKE', 'o'), [D6, D7]),
  one('string LIKE \\% is a literal %, and alone a substring', where('name', 'LIKE', '100\\%'), [D5]),
  one('string LIKE \\_ is a literal _', where('name', 'LIKE', '%E\\_C%'), [D5]),
  one('string LIKE an escaped _ is no wildcard', where('code', 'LIKE', 'AL\\_HA'), []),
  one('string LIKE \\\\ is a literal backslash', where('name', 'LIKE', '%N \\\\ C%'), [D3]),
  one('string LIKE \\\\ then a wildcard', where('name', 'LIKE', '%\\\\%'), [D3]),
  one('string LIKE a backslash before another character is a backslash', where('name', 'LIKE', '%n \\ c_'), [D3]),
  one('string LIKE a NUL in a pattern', where('name', 'LIKE', '%\u0000%'), []),
  one('string NOT_LIKE a NUL in a pattern', where('name', 'NOT_LIKE', '\u0000'), [D1, D2, D4, D5, D3, D6, D7]),
  one('string LIKE _ is one non-ASCII character', where('name', 'LIKE', '_MILE%'), [D4]),
  one('string LIKE non-ASCII between wildcards', where('name', 'LIKE', '%É%z_LA'), [D4]),
  one('string IN', whereIn('name', 'IN', ['beta two', 'Eta Seven', 'nope']), [D2, D7]),
  one('string IN as a comma-separated value', where('code', 'IN', 'ALPHA,eta'), [D1, D7]),
  one('string NOT_IN', whereIn('code', 'NOT_IN', ['ALPHA', 'BETA']), [D4, D5, D3, D6, D7]),
  one('string GT', where('code', 'GT', 'DELTA'), [D5, D3, D6, D7]),
  one('string GTE', where('code', 'GTE', 'DELTA'), [D4, D5, D3, D6, D7]),
  one('string LT', where('code', 'LT', 'BETA'), [D1]),
  one('string LTE', where('code', 'LTE', 'BETA'), [D1, D2]),
  one('string IS_NULL (null)', where('name', 'IS_NULL'), [D6]),
  one('string IS_NOT_NULL', where('name', 'IS_NOT_NULL'), [D1, D2, D4, D5, D3, D7]),

  one('uuid EQ (upper case value)', where('ownerId', 'EQ', U_A.toUpperCase()), [D1, D4]),
  one('uuid NOT_EQ matches null', where('ownerId', 'NOT_EQ', U_A), [D2, D5, D3, D6, D7]),
  one('uuid IN', whereIn('ownerId', 'IN', [U_B, U_C]), [D2, D5, D6, D7]),
  one('uuid NOT_IN matches null', whereIn('ownerId', 'NOT_IN', [U_B, U_C]), [D1, D4, D3]),
  one('uuid LIKE', where('ownerId', 'LIKE', 'AAAAAAAA%1'), [D1, D4]),
  one('uuid GT', where('ownerId', 'GT', U_A), [D2, D5, D6, D7]),
  one('uuid IS_NULL', where('ownerId', 'IS_NULL'), [D3]),
  one('id EQ', where('id', 'EQ', D3), [D3]),
  one('id IN', whereIn('id', 'IN', [D7, D1]), [D1, D7]),
  one('id NOT_IN', whereIn('id', 'NOT_IN', [D1, D2, D3, D4]), [D5, D6, D7]),

  one('integer EQ', where('age', 'EQ', 30), [D1, D6]),
  one('integer NOT_EQ matches null', where('age', 'NOT_EQ', '30'), [D2, D4, D5, D3, D7]),
  one('integer GT', where('age', 'GT', 30), [D4, D7]),
  one('integer GTE', where('age', 'GTE', 30), [D1, D4, D6, D7]),
  one('integer LT', where('age', 'LT', 25), [D5]),
  one('integer LTE', where('age', 'LTE', 25), [D2, D5]),
  one('integer IN', whereIn('age', 'IN', [18, 65]), [D5, D7]),
  one('integer NOT_IN matches null', whereIn('age', 'NOT_IN', [18, 65]), [D1, D2, D4, D3, D6]),
  one('integer IS_NULL (null)', where('age', 'IS_NULL'), [D3]),
  one('integer IS_NOT_NULL', where('age', 'IS_NOT_NULL'), [D1, D2, D4, D5, D6, D7]),
  one('integer below a nested object', where('auditInfo.version', 'GT', 2), [D1, D5, D7]),

  one('number EQ', where('score', 'EQ', '4.5'), [D1, D6]),
  one('number EQ zero', where('score', 'EQ', 0), [D4]),
  one('number NOT_EQ', where('score', 'NOT_EQ', 0), [D1, D2, D5, D3, D6, D7]),
  one('number GT', where('score', 'GT', 0), [D1, D2, D5, D6, D7]),
  one('number GTE negative', where('score', 'GTE', '-1.25'), [D1, D2, D4, D5, D3, D6, D7]),
  one('number LT', where('score', 'LT', 0), [D3]),
  one('number LTE', where('score', 'LTE', 0), [D4, D3]),
  one('number IN', whereIn('score', 'IN', [0, 100]), [D4, D5]),
  one('number NOT_IN', whereIn('score', 'NOT_IN', [4.5, 3, 2]), [D4, D5, D3]),

  one('boolean EQ true', where('active', 'EQ', true), [D1, D3, D6, D7]),
  one('boolean EQ false', where('active', 'EQ', 'false'), [D2, D5]),
  one('boolean NOT_EQ matches missing', where('active', 'NOT_EQ', true), [D2, D4, D5]),
  one('boolean IN', whereIn('active', 'IN', [true]), [D1, D3, D6, D7]),
  one('boolean NOT_IN matches missing', whereIn('active', 'NOT_IN', [false]), [D1, D4, D3, D6, D7]),
  one('boolean IS_NULL (missing)', where('active', 'IS_NULL'), [D4]),
  one('boolean IS_NOT_NULL', where('active', 'IS_NOT_NULL'), [D1, D2, D5, D3, D6, D7]),

  one('date-time EQ normalises the value', where('createdAt', 'EQ', '2024-01-15T10:00:00Z'), [D1, D6]),
  one('date-time EQ with an offset', where('createdAt', 'EQ', '2024-01-15T11:00:00+01:00'), [D1, D6]),
  one('date-time NOT_EQ matches missing', where('createdAt', 'NOT_EQ', '2024-01-15T10:00:00Z'), [D2, D4, D5, D3, D7]),
  one('date-time GT is chronological', where('createdAt', 'GT', '2024-01-15T10:00:00Z'), [D5, D3]),
  one('date-time GTE', where('createdAt', 'GTE', '2024-01-15T10:00:00Z'), [D1, D5, D3, D6]),
  one('date-time LT', where('createdAt', 'LT', '2024-01-15T10:00:00.000Z'), [D2, D7]),
  one('date-time LTE', where('createdAt', 'LTE', '2024-01-15T10:00:00.000Z'), [D1, D2, D6, D7]),
  one('date-time IN', whereIn('createdAt', 'IN', ['2025-01-01T00:00:00Z', '2024-06-01T02:00:00+02:00']), [D5, D3]),
  one('date-time NOT_IN', whereIn('createdAt', 'NOT_IN', ['2024-01-15T10:00:00Z']), [D2, D4, D5, D3, D7]),
  one('date-time LIKE', where('createdAt', 'LIKE', '2024-01%'), [D1, D6, D7]),
  one('date-time IS_NULL (missing)', where('createdAt', 'IS_NULL'), [D4]),
  one('date-time below a nested object', where('auditInfo.whenEdited', 'GTE', '2024-02-01T00:00:00Z'), [D1, D4, D5, D6, D7]),
  one('date-time below a nested object IS_NULL', where('auditInfo.whenEdited', 'IS_NULL'), [D3]),

  one('string array EQ: any element, case-sensitive', where('tags', 'EQ', 'red'), [D1]),
  one('string array NOT_EQ: no element', where('tags', 'NOT_EQ', 'red'), [D2, D4, D5, D3, D6, D7]),
  one('string array LIKE', where('tags', 'LIKE', 'RED'), [D1, D4]),
  one('string array NOT_LIKE', where('tags', 'NOT_LIKE', 're'), [D5, D3, D6, D7]),
  one('string array IN', whereIn('tags', 'IN', ['blue', 'green']), [D1, D2, D7]),
  one('string array NOT_IN', whereIn('tags', 'NOT_IN', ['blue', 'green']), [D4, D5, D3, D6]),
  one('string array GT', where('tags', 'GT', 'x'), [D7]),
  one('string array LT is binary: upper case sorts first', where('tags', 'LT', 'c'), [D1, D4, D7]),
  one('string array IS_NULL: missing, null or empty', where('tags', 'IS_NULL'), [D5, D3, D6]),
  one('string array IS_NOT_NULL', where('tags', 'IS_NOT_NULL'), [D1, D2, D4, D7]),
  one('uuid array EQ', where('memberIds', 'EQ', U_A), [D1, D5, D7]),
  one('uuid array NOT_IN', whereIn('memberIds', 'NOT_IN', [U_A]), [D2, D4, D3, D6]),
  one('uuid array IS_NULL', where('memberIds', 'IS_NULL'), [D2, D4]),
  one('number array EQ', where('ratings', 'EQ', 5), [D1, D6]),
  one('number array NOT_EQ', where('ratings', 'NOT_EQ', 5), [D2, D4, D5, D3, D7]),
  one('number array GT', where('ratings', 'GT', 4), [D1, D4, D6]),
  one('number array GTE', where('ratings', 'GTE', 10), [D4]),
  one('number array LT', where('ratings', 'LT', 2), [D1]),
  one('number array LTE', where('ratings', 'LTE', 2), [D1, D7]),
  one('number array IN', whereIn('ratings', 'IN', [2.5, 3]), [D2, D4]),
  one('boolean array EQ true', where('answers', 'EQ', true), [D1, D7]),
  one('boolean array EQ false', where('answers', 'EQ', false), [D2, D7]),
  one('boolean array NOT_EQ true', where('answers', 'NOT_EQ', true), [D2, D4, D5, D3, D6]),
  one('date-time array GT', where('reviews', 'GT', '2024-01-01T00:00:00Z'), [D1, D7]),
  one('date-time array LT', where('reviews', 'LT', '2024-01-01T00:00:00Z'), [D7]),
  one('date-time array EQ', where('reviews', 'EQ', '2023-05-01T00:00:00Z'), [D7]),

  one('any EQ string is case-sensitive', where('chars.region', 'EQ', 'north'), [D1]),
  one('any LIKE', where('chars.region', 'LIKE', 'NORTH'), [D1, D3]),
  one('any NOT_LIKE', where('chars.region', 'NOT_LIKE', 'th'), [D4, D5, D6]),
  one('any LIKE a NUL between text and a wildcard', where('chars.note', 'LIKE', 'NUL\u0000in%'), [D1]),
  one('any LIKE a NUL alone is a substring', where('chars.note', 'LIKE', '\u0000'), [D1]),
  one('any NOT_LIKE a NUL between _', where('chars.note', 'NOT_LIKE', '%_\u0000_%'), [D2, D4, D5, D3, D6, D7]),
  one('any LIKE escaped % and _ are literal', where('chars.note', 'LIKE', '0\\%\\_o'), [D2]),
  one('any LIKE an escaped % then a wildcard _', where('chars.note', 'LIKE', '50\\%_off%'), [D2]),
  one('any LIKE an escaped backslash beside non-ASCII', where('chars.note', 'LIKE', 'f \\\\ ü'), [D2]),
  one('any LIKE non-ASCII with wildcards', where('chars.note', 'LIKE', '%ÜN_CODE'), [D2]),
  one('any LIKE a NUL with non-ASCII', where('chars.note', 'LIKE', '%ü%\u0000%'), []),
  one('any IN', whereIn('chars.region', 'IN', ['south', 'west']), [D2, D6, D7]),
  one('any NOT_IN', whereIn('chars.region', 'NOT_IN', ['south', 'west']), [D1, D4, D5, D3]),
  one('any NOT_EQ matches null and missing', where('chars.region', 'NOT_EQ', 'south'), [D1, D4, D5, D3, D6]),
  one('any IS_NULL: null or missing', where('chars.region', 'IS_NULL'), [D4, D5]),
  one('any IS_NOT_NULL', where('chars.tier', 'IS_NOT_NULL'), [D6]),
  one('any EQ matches a string and a number', where('chars.level', 'EQ', '5'), [D1, D2, D7]),
  one('any EQ reads the value as a number', where('chars.level', 'EQ', '5.0'), [D1, D7]),
  one('any IN mixes readings', whereIn('chars.level', 'IN', ['10', '2.5']), [D4, D3]),
  one('any GT compares numbers numerically', where('chars.level', 'GT', '5'), [D3, D6]),
  one('any GTE', where('chars.level', 'GTE', '5'), [D1, D2, D3, D6, D7]),
  one('any LT', where('chars.level', 'LT', '5'), [D4]),
  one('any LTE', where('chars.level', 'LTE', '7'), [D1, D2, D4, D6, D7]),
  one('any EQ true matches a boolean and a string', where('chars.vip', 'EQ', 'true'), [D1, D2, D6]),
  one('any EQ false', where('chars.vip', 'EQ', false), [D3]),
  one('any EQ a number never matches a boolean', where('chars.vip', 'EQ', '1'), []),
  one('any LT a number never matches a boolean', where('chars.vip', 'LT', '2'), []),
  one('any NOT_EQ true', where('chars.vip', 'NOT_EQ', 'true'), [D4, D5, D3, D7]),

  one('nested EQ uuid', nested('regions', 'regionId', 'EQ', R1), [D1, D4]),
  one('nested EQ string', nested('regions', 'role', 'EQ', 'admin'), [D1, D2]),
  one('nested LIKE', nested('regions', 'role', 'LIKE', 'VIEW'), [D1, D4]),
  one('nested NOT_EQ: some element differs', nested('regions', 'role', 'NOT_EQ', 'admin'), [D1, D4, D6, D7]),
  one('nested IS_NULL: some element lacks it', nested('regions', 'role', 'IS_NULL'), [D6]),
  one('nested GT', nested('regions', 'weight', 'GT', 2), [D4, D7]),
  one('nested GTE', nested('regions', 'weight', 'GTE', 2), [D2, D4, D7]),
  one('nested boolean EQ true', nested('regions', 'primary', 'EQ', true), [D1, D4, D7]),
  one('nested boolean EQ false', nested('regions', 'primary', 'EQ', false), [D1, D2]),
  one('nested array property EQ', nested('regions', 'labels', 'EQ', 'y'), [D7]),
  one('nested array property IS_NULL', nested('regions', 'labels', 'IS_NULL'), [D1, D2, D4, D6]),
  {
    name: 'nested IN',
    body: { filter: [{ isNested: true, nestedPath: 'regions', nestedProperty: 'regionId', operator: 'IN', values: [R2, R3] }] },
    ids: [D1, D2, D6, D7],
  },
  {
    name: 'nested NOT_IN: some element outside',
    body: { filter: [{ isNested: true, nestedPath: 'regions', nestedProperty: 'regionId', operator: 'NOT_IN', values: [R2] }] },
    ids: [D1, D4, D6],
  },

  { name: 'conditions are ANDed', body: { filter: [where('active', 'EQ', true), where('age', 'GTE', 30)] }, ids: [D1, D6, D7] },
  {
    name: 'field and nested conditions together',
    body: { filter: [where('tags', 'EQ', 'blue'), nested('regions', 'role', 'EQ', 'editor')] },
    ids: [D7],
  },

  { name: 'sort DESC puts nulls last, then id', body: { sort: [{ column: 'age', order: 'DESC' }] }, ids: [D7, D4, D1, D6, D2, D5, D3] },
  { name: 'sort ASC puts nulls first, then id', body: { sort: [{ column: 'age', order: 'asc' }] }, ids: [D3, D5, D2, D1, D6, D4, D7] },
  {
    name: 'sort on two keys',
    body: {
      sort: [
        { column: 'score', order: 'DESC' },
        { column: 'name', order: 'ASC' },
      ],
    },
    ids: [D5, D6, D1, D2, D7, D4, D3],
  },
  {
    name: 'sort boolean then date-time DESC, id tiebreak',
    body: { sort: [{ column: 'active' }, { column: 'createdAt', order: 'DESC' }] },
    ids: [D4, D5, D2, D3, D1, D6, D7],
  },
  { name: 'sort strings in binary order', body: { sort: [{ column: 'name' }] }, ids: [D6, D5, D1, D7, D3, D2, D4] },
  { name: 'sort code DESC', body: { sort: [{ column: 'code', order: 'DESC' }] }, ids: [D7, D6, D3, D5, D4, D2, D1] },
  {
    name: 'sort by an any path: missing, numbers, then strings',
    body: { sort: [{ column: 'chars.level' }] },
    ids: [D5, D4, D1, D7, D6, D3, D2],
  },
  {
    name: 'sort below a nested object',
    body: { sort: [{ column: 'auditInfo.version', order: 'DESC' }, { column: 'code' }] },
    ids: [D5, D7, D1, D3, D2, D4, D6],
  },
  {
    name: 'sort by the field an EQ pins, id tiebreak',
    body: { filter: [where('age', 'EQ', 30)], sort: [{ column: 'age', order: 'DESC' }] },
    ids: [D1, D6],
  },
  { name: 'sort by id DESC', body: { sort: [{ column: 'id', order: 'DESC' }] }, ids: [D7, D6, D5, D4, D3, D2, D1] },
];

/** The Query the API builds from a fixture's body. */
export function fixtureQuery(body: FilteringBody): Query {
  return toQuery(FilteringSchema.parse(body), fixtureCatalog, fixtureDefaultSort);
}
