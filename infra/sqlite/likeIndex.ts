// How a LIKE pattern is checked on the embedded store, and what an index may narrow it to first.
// The narrowing never decides: it keeps every row the exact check accepts (and some it does not),
// and the exact check runs after it, so a pattern means the same with or without the indexes.

import type { LikePattern } from '../../domain/shared/filtering.ts';

const ASCII = /^\p{ASCII}*$/u;

/** Native LIKE's work per character of a value is at most this many comparisons. */
const NATIVE_LIKE_MAX_RUN = 16;

const escapeLiteral = (s: string): string => s.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * A parsed pattern as the text of `LIKE … ESCAPE '\'`. That escape is the API's own for `\`, `%`
 * and `_`, and a parsed pattern always holds a wildcard, so the text is also a LIKE value that
 * likePattern reads back to the same pattern: rm_like rebuilds its matcher from it.
 */
export function likeSql(pattern: LikePattern): string {
  return pattern.map((t) => (t.kind === 'text' ? escapeLiteral(t.text) : t.kind === 'any' ? '%' : '_')).join('');
}

/** The longest run of characters a pattern compares after a `%` (where LIKE tries every position). */
function longestFloatingRun(pattern: LikePattern): number {
  let longest = 0;
  let run = 0;
  let floating = false;
  for (const t of pattern) {
    if (t.kind === 'any') {
      floating = true;
      run = 0;
    } else if (floating) {
      run += t.kind === 'text' ? t.text.length : 1;
      longest = Math.max(longest, run);
    }
  }
  return longest;
}

/**
 * Which check decides a pattern. SQLite's LIKE folds ASCII case only; an ASCII pattern can match
 * other characters only through wildcards, so `native` LIKE is exact for it. Any other pattern
 * compares the Unicode-lowercased value with the lowercased pattern (`folded`). SQLite's LIKE reads
 * its pattern as a C string, so a NUL would end it early; and after each `%` it tries the rest at
 * every position, so a long run there costs the value's length times the run's (a 250-character
 * run: 50 ms per 100,000-character value): the linear `matcher` (rm_like) takes both.
 */
export function likeCheck(pattern: LikePattern): 'native' | 'folded' | 'matcher' {
  const sql = likeSql(pattern);
  if (sql.includes('\0') || longestFloatingRun(pattern) > NATIVE_LIKE_MAX_RUN) return 'matcher';
  return ASCII.test(sql) ? 'native' : 'folded';
}

/** The text a string compares just above every string starting with `prefix` (code point order,
 * which is SQLite's binary order of UTF-8). */
function successor(prefix: string): string {
  const points = Array.from(prefix);
  const last = points.pop()?.codePointAt(0) ?? 0;
  return `${points.join('')}${String.fromCodePoint(last + 1)}`;
}

/**
 * The range of lower(value) that holds every value a pattern starting with literal text accepts:
 * `[lower(text), successor)`. Only for the native check, where the literal is ASCII and compared
 * ASCII-case-insensitively, exactly as lower() folds; the other checks fold with JavaScript, where
 * other characters lowercase into ASCII letters (the Kelvin sign into `k`).
 */
export function prefixRange(pattern: LikePattern): { from: string; to: string } | undefined {
  if (likeCheck(pattern) !== 'native') return undefined;
  let literal = '';
  for (const token of pattern) {
    if (token.kind !== 'text') break;
    literal += token.text;
  }
  if (literal === '') return undefined;
  const from = literal.toLowerCase();
  return { from, to: successor(from) };
}

/** Runs of literal text between wildcards. */
function literalRuns(pattern: LikePattern): string[] {
  const runs: string[] = [];
  let run = '';
  for (const token of pattern) {
    if (token.kind === 'text') {
      run += token.text;
    } else {
      runs.push(run);
      run = '';
    }
  }
  runs.push(run);
  return runs;
}

/** Most trigrams one query asks the index for; more narrow little further. */
const MAX_TRIGRAMS = 16;

/** Trigrams that together cover a piece of text: every third one, and the last. */
function coveringTrigrams(text: string): string[] {
  const points = Array.from(text);
  if (points.length < 3) return [];
  const starts: number[] = [];
  for (let i = 0; i + 3 <= points.length; i += 3) starts.push(i);
  if (starts.at(-1) !== points.length - 3) starts.push(points.length - 3);
  return starts.map((i) => points.slice(i, i + 3).join(''));
}

/**
 * An FTS5 query (every trigram, ANDed, each a quoted string) matching every row whose lowercased
 * text holds the pattern's literal runs; undefined when no run has three characters. A run is
 * lowercased on its own while the exact checks lowercase the value whole and the pattern whole or
 * token by token: all the same but for the Greek capital sigma, which lowercases by what follows
 * it, so runs are cut there, and at NUL, which FTS5's query syntax cannot carry.
 */
export function trigramMatch(pattern: LikePattern): string | undefined {
  const trigrams = new Set<string>();
  for (const run of literalRuns(pattern)) {
    for (const piece of run.split(/[\0\u03a3]/u)) {
      for (const trigram of coveringTrigrams(piece.toLowerCase())) trigrams.add(trigram);
    }
  }
  if (trigrams.size === 0) return undefined;
  return [...trigrams]
    .slice(0, MAX_TRIGRAMS)
    .map((t) => `"${t.replaceAll('"', '""')}"`)
    .join(' AND ');
}
