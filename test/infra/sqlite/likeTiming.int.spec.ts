// LIKE patterns that made a backtracking matcher run for minutes (one count of `%a%a%a%a%\0` over a
// 255-character name took 54 s) must answer at once, and rightly, on the longest values a document
// can hold: a NUL sends a pattern to rm_like, any other to SQLite's own LIKE. What a query costs is
// measured in CPU time of this thread (the store runs on it), so a loaded machine cannot fail it.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Document } from '../../../domain/ports.ts';
import { LIKE_WINDOW } from '../../../infra/sqlite/readQuery.ts';
import { openSqliteReadStore, type SqliteReadStore } from '../../../infra/sqlite/readStore.ts';
import { cpuTimed } from '../../support/cpuTime.ts';
import { fixtureQuery } from '../../support/readStoreFixtures.ts';

/** CPU milliseconds: generous for a slow machine; the old matcher needed seconds to hours. */
const BOUND_MS = 250;

const NAME = 'a'.repeat(255);
/** As long as a LIKE reads (LIKE_WINDOW); what lies beyond is the window test's below. */
const LONG = 'a'.repeat(LIKE_WINDOW);
const ALL_A = '00000000-0000-4000-8000-00000000000a';
const NUL_END = '00000000-0000-4000-8000-00000000000b';
const OTHER = '00000000-0000-4000-8000-00000000000c';

const documents: Document[] = [
  { id: ALL_A, name: NAME, code: LONG, chars: { blob: LONG } },
  { id: NUL_END, name: `${NAME.slice(1)}\0`, code: `${LONG.slice(1)}\0`, chars: { blob: `${LONG.slice(1)}\0` } },
  { id: OTHER, name: 'b', code: 'b', chars: { blob: 'b' } },
];

const repeat = (piece: string, times: number): string => piece.repeat(times);

/** Worst cases for a backtracking matcher, with the documents each selects (the same on every column). */
const cases: readonly { pattern: string; ids: readonly string[] }[] = [
  { pattern: '%a%a%a%a%\0', ids: [NUL_END] },
  { pattern: `${repeat('%a', 16)}%\0`, ids: [NUL_END] },
  { pattern: `${repeat('%_', 15)}%\0`, ids: [NUL_END] },
  { pattern: `%${repeat('a_', 15)}a%\0`, ids: [NUL_END] },
  { pattern: `${repeat('%a', 16)}%\0%`, ids: [NUL_END] },
  { pattern: `${repeat('%a', 16)}%\0b`, ids: [] },
  { pattern: `${repeat('%a', 16)}%b`, ids: [] },
  { pattern: `${repeat('%a', 31)}%`, ids: [ALL_A, NUL_END] },
  { pattern: `%${repeat('a', 250)}b`, ids: [] },
  { pattern: `%${repeat('a', 250)}%\0`, ids: [NUL_END] },
  { pattern: `${repeat('%_', 15)}%${repeat('a', 200)}%b`, ids: [] },
];

describe('SQLite LIKE on worst-case patterns', () => {
  let store: SqliteReadStore;
  const c = 'likeTiming';

  beforeAll(async () => {
    store = openSqliteReadStore({ path: ':memory:' });
    await store.applyBatch(
      c,
      documents.map((doc) => ({ kind: 'upsert', id: doc.id, version: 1, doc })),
      1n,
    );
  });

  afterAll(async () => {
    await store.close();
  });

  const timed = async <T>(work: () => Promise<T>): Promise<T> => {
    const { value, cpuMs } = await cpuTimed(work);
    expect(cpuMs).toBeLessThan(BOUND_MS);
    return value;
  };

  for (const { pattern, ids } of cases) {
    for (const column of ['name', 'code', 'chars.blob']) {
      it(`${column} LIKE ${JSON.stringify(pattern).slice(0, 60)}`, async () => {
        const like = fixtureQuery({ filter: [{ column, operator: 'LIKE', value: pattern }] });
        const notLike = fixtureQuery({ filter: [{ column, operator: 'NOT_LIKE', value: pattern }] });
        const page = { offset: 0, limit: 10 };
        const found = await timed(() => store.find(c, like, page));
        expect(found.map((d) => d.id).sort()).toEqual([...ids].sort());
        expect(await timed(() => store.count(c, like))).toBe(ids.length);
        const others = documents.map((d) => d.id).filter((id) => !ids.includes(id));
        expect((await timed(() => store.find(c, notLike, page))).map((d) => d.id).sort()).toEqual(others.sort());
        expect(await timed(() => store.count(c, notLike))).toBe(others.length);
      });
    }
  }
});

describe('the LIKE window', () => {
  it('reads the first LIKE_WINDOW characters of a value, so a 500,000-character one costs no more than that', async () => {
    const store = openSqliteReadStore({ path: ':memory:' });
    const c = 'likeWindow';
    const huge = `${'a'.repeat(LIKE_WINDOW - 1)}€${'a'.repeat(500_000)}b\0`;
    await store.applyBatch(
      c,
      [{ kind: 'upsert', id: ALL_A, version: 1, doc: { id: ALL_A, name: 'n', code: huge, chars: { blob: huge } } }],
      1n,
    );
    for (const column of ['code', 'chars.blob']) {
      const count = (operator: string, value: string) => store.count(c, fixtureQuery({ filter: [{ column, operator, value }] }));
      const { cpuMs } = await cpuTimed(async () => {
        // Within the window, a multi-byte character at its last place included.
        expect(await count('LIKE', '%€')).toBe(1);
        expect(await count('LIKE', '%a€%')).toBe(1);
        // Past it: neither the b nor the NUL is read.
        expect(await count('LIKE', '%b%')).toBe(0);
        expect(await count('LIKE', '%\0%')).toBe(0);
        expect(await count('NOT_LIKE', '%b%')).toBe(1);
        for (let i = 0; i < 4; i++) await count('NOT_LIKE', `%${'a'.repeat(250)}b%`);
      });
      expect(cpuMs).toBeLessThan(BOUND_MS);
    }
    await store.close();
  });
});
