// Autocomplete on the embedded store: distinct string values of some paths containing a term,
// those starting with it first, then in NOCASE order, then binary. On paths with the search
// indexes it reads index ranges instead of every document:
//   - values starting with an ASCII term: a walk of the lowercase index from the term, stopped
//     once `limit` distinct values are found (lower() order is NOCASE order);
//   - only when fewer start with it, values containing it, through the trigram index when the
//     term has three characters (else by reading the path of every document);
//   - arrays and objects at a path (their string elements count, as json_each reads them): their
//     JSON text starts with `[` or `{`, two short ranges of the lowercase index.
// The candidates are then ranked by the one statement that also ranks the full scan.

import type { SQLInputValue } from 'node:sqlite';
import { prefixRange, trigramMatch } from './likeIndex.ts';
import { Compiler, containing, startingWith } from './readQuery.ts';
import { fieldValue, jsonPath, loweredValue, quoted } from './readSchema.ts';

export type Statement = { sql: string; params: SQLInputValue[] };

/**
 * Text values at a path that start with the term, in lower() order (each row with that lowercase
 * form as `folded`); undefined when the term is not ASCII, where the lowercase index cannot tell.
 */
export function startingValues(table: string, path: string, term: string): Statement | undefined {
  const pattern = startingWith(term);
  const range = term === '' ? { from: '', to: undefined } : prefixRange(pattern);
  if (range === undefined) return undefined;
  const lowered = loweredValue(path);
  const params: SQLInputValue[] = [range.from];
  const upper = range.to === undefined ? '' : ` AND ${lowered} < ?`;
  if (range.to !== undefined) params.push(range.to);
  const compiler = new Compiler();
  const check = compiler.like(fieldValue(path), pattern);
  return {
    sql: `SELECT ${fieldValue(path)} AS value, ${lowered} AS folded FROM ${quoted(table)}
          WHERE deleted = 0 AND ${lowered} >= ?${upper} AND json_type(doc, ${jsonPath(path)}) = 'text' AND ${check}
          ORDER BY ${lowered}`,
    params: [...params, ...compiler.params],
  };
}

/** String elements containing the term of the arrays (`[`) or objects (`{`) at a path. */
export function containerValues(table: string, path: string, term: string, opening: '[' | '{'): Statement {
  const lowered = loweredValue(path);
  const compiler = new Compiler();
  const check = compiler.like('e.value', containing(term));
  return {
    sql: `SELECT DISTINCT e.value AS value FROM ${quoted(table)} AS d, json_each(d.doc, ${jsonPath(path)}) AS e
          WHERE d.deleted = 0 AND ${lowered} >= ? AND ${lowered} < ?
            AND json_type(d.doc, ${jsonPath(path)}) IN ('array', 'object') AND e.type = 'text' AND ${check}`,
    params: [opening, String.fromCharCode(opening.charCodeAt(0) + 1), ...compiler.params],
  };
}

/**
 * Text values at a path containing the term. The trigram index holds the JSON text of arrays and
 * objects, where a quote or a backslash reads escaped, so it narrows only the plain text values
 * asked for here; containerValues reads the others.
 */
export function containingValues(table: string, path: string, term: string, trigram: string | undefined): Statement {
  const pattern = containing(term);
  const compiler = new Compiler();
  const match = trigram === undefined ? undefined : trigramMatch(pattern);
  const narrowing =
    trigram === undefined || match === undefined
      ? ''
      : ` AND rowid IN (SELECT rowid FROM ${quoted(trigram)} WHERE ${quoted(trigram)} MATCH ${compiler.bind(match)})`;
  const check = compiler.like(fieldValue(path), pattern);
  return {
    sql: `SELECT DISTINCT ${fieldValue(path)} AS value FROM ${quoted(table)}
          WHERE deleted = 0${narrowing} AND json_type(doc, ${jsonPath(path)}) = 'text' AND ${check}`,
    params: compiler.params,
  };
}

/** Values starting with the term first, then NOCASE, then binary; at most `limit`. */
function ranking(source: string, compiler: Compiler, term: string, limit: number): Statement {
  const prefix = compiler.like('value', startingWith(term));
  return {
    sql: `SELECT value FROM (${source}) ORDER BY (${prefix}) DESC, value COLLATE NOCASE, value LIMIT ${compiler.bind(limit)}`,
    params: compiler.params,
  };
}

/** The candidates found through the indexes, ranked. */
export function ranked(candidates: ReadonlySet<string>, term: string, limit: number): Statement {
  const compiler = new Compiler();
  return ranking(`SELECT value FROM json_each(${compiler.bind(JSON.stringify([...candidates]))})`, compiler, term, limit);
}

/** Every document's values at the paths, for paths without the search indexes. */
export function scanned(table: string, paths: readonly string[], term: string, limit: number): Statement {
  const compiler = new Compiler();
  // json_each reads a scalar as a single element, so array columns are searched the same way.
  const sources = paths.map(
    (path) =>
      `SELECT e.value AS value FROM ${quoted(table)} AS d, json_each(d.doc, ${jsonPath(path)}) AS e
       WHERE d.deleted = 0 AND e.type = 'text' AND ${compiler.like('e.value', containing(term))}`,
  );
  return ranking(sources.join(' UNION '), compiler, term, limit);
}
