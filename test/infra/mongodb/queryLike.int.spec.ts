// LIKE as the MongoDB store's regular expression, run by JavaScript's RegExp (as mingo runs it):
// patterns that make a backtracking `.*a.*a.*a…` take exponential time must answer at once and
// rightly on a 100,000-character value, and the expression must agree with the SQLite store's
// matcher on any pattern.

import fc from 'fast-check';
import { Query as Mingo } from 'mingo';
import { describe, expect, it } from 'vitest';
import type { Document } from '../../../domain/ports.ts';
import { likePattern } from '../../../domain/shared/filtering.ts';
import { REGEX_OPTIONS, compileFilter, encodeDocument, likeRegex } from '../../../infra/mongodb/query.ts';
import { likeMatcher } from '../../../domain/shared/likeMatcher.ts';
import { cpuTimedSync } from '../../support/cpuTime.ts';
import { fixtureQuery } from '../../support/readStoreFixtures.ts';

/** CPU milliseconds of this thread (a loaded machine cannot reach them; its wall clock it can):
 * generous for a slow machine; the old expression needed minutes to hours. */
const BOUND_MS = 250;

const LONG = 'a'.repeat(100_000);
const NUL_END = `${LONG.slice(1)}\0`;

/** Worst cases for a backtracking matcher, with whether each matches LONG and NUL_END. */
const cases: readonly { pattern: string; long: boolean; nulEnd: boolean }[] = [
  { pattern: '%a%a%a%a%\0', long: false, nulEnd: true },
  { pattern: `${'%a'.repeat(16)}%\0`, long: false, nulEnd: true },
  { pattern: `${'%_'.repeat(15)}%\0`, long: false, nulEnd: true },
  { pattern: `%${'a_'.repeat(15)}a%\0`, long: false, nulEnd: true },
  { pattern: `${'%a'.repeat(16)}%\0b`, long: false, nulEnd: false },
  { pattern: `${'%a'.repeat(16)}%b`, long: false, nulEnd: false },
  { pattern: `${'%a'.repeat(31)}%`, long: true, nulEnd: true },
  { pattern: `%${'a'.repeat(250)}b`, long: false, nulEnd: false },
  { pattern: `%${'a'.repeat(250)}%\0`, long: false, nulEnd: true },
  { pattern: `${'%_'.repeat(15)}%${'a'.repeat(200)}%b`, long: false, nulEnd: false },
  { pattern: `${'%a'.repeat(15)}%b%a`, long: false, nulEnd: false },
];

const timed = <T>(work: () => T): T => {
  const { value, cpuMs } = cpuTimedSync(work);
  expect(cpuMs).toBeLessThan(BOUND_MS);
  return value;
};

describe('likeRegex on worst-case patterns', () => {
  for (const { pattern, long, nulEnd } of cases) {
    it(JSON.stringify(pattern).slice(0, 60), () => {
      const regex = new RegExp(likeRegex(likePattern(pattern)), REGEX_OPTIONS);
      expect(timed(() => regex.test(LONG))).toBe(long);
      expect(timed(() => regex.test(NUL_END))).toBe(nulEnd);
      expect(timed(() => regex.test(`${LONG}b`))).toBe(likeMatcher(likePattern(pattern))(`${LONG}b`));
    });
  }

  it('answers at once through a compiled filter, as mingo runs it', () => {
    const stored = [LONG, NUL_END].map((code, i) => {
      const doc: Document = { id: String(i), code, chars: { blob: code } };
      return { _id: doc.id, v: 1, deleted: false, doc: encodeDocument(doc) };
    });
    for (const { pattern, long, nulEnd } of cases) {
      for (const [column, operator] of [
        ['code', 'LIKE'],
        ['chars.blob', 'NOT_LIKE'],
      ] as const) {
        const filter = new Mingo(compileFilter(fixtureQuery({ filter: [{ column, operator, value: pattern }] })));
        const negated = operator === 'NOT_LIKE';
        expect(timed(() => stored.map((d) => filter.test(d)))).toEqual([long !== negated, nulEnd !== negated]);
      }
    }
  });
});

describe('likeRegex and the SQLite matcher', () => {
  const text = (chars: readonly string[], maxLength: number) => fc.array(fc.constantFrom(...chars), { maxLength }).map((cs) => cs.join(''));
  const plain = ['a', 'b', 'A', 'é', 'É', '\n', '\0', '.', '*', '(', '1'];

  it('agree on every pattern and value', () => {
    fc.assert(
      fc.property(text([...plain, '%', '_', '\\'], 10), text([...plain, '%', '_', '\\'], 12), (value, subject) => {
        const pattern = likePattern(value);
        expect(new RegExp(likeRegex(pattern), REGEX_OPTIONS).test(subject)).toBe(likeMatcher(pattern)(subject));
      }),
      { numRuns: 3000 },
    );
  });
});
