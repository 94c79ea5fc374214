// The embedded read store's schema: one table per collection, an expression index per indexed
// path, and for the paths searched as text a case-insensitive index and a trigram index (FTS5)
// that triggers keep, in the writing transaction, equal to the documents. Every name derives from
// the collection and the path, so the database itself says what exists: a database written before
// an index existed just has fewer, and queries use only what is there.

import { createHash } from 'node:crypto';

const COLLECTION = /^[A-Za-z][A-Za-z0-9_]{0,62}$/;
const SEGMENT = /^[A-Za-z0-9_-]+$/;
const BARE_SEGMENT = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** The FTS column of a path is the path behind this prefix: FTS5 reserves some column names
 * (`rank`), and the column name is how a rebuild finds the path of a trigram table again. */
const TRIGRAM_COLUMN_PREFIX = 'doc.';
const INSERT_TRIGGER = '_insert';

/** The collection's table name, unquoted (as sqlite_master spells it). */
export function tableOf(collection: string): string {
  if (!COLLECTION.test(collection)) throw new RangeError(`invalid collection name ${JSON.stringify(collection)}`);
  return `rm_${collection}`;
}

export const quoted = (name: string): string => `"${name}"`;

/** The path as a SQL string literal of a JSON path; safe because segments cannot hold quotes. */
export function jsonPath(path: string): string {
  const segments = path.split('.');
  if (!segments.every((s) => SEGMENT.test(s))) throw new RangeError(`invalid document path ${JSON.stringify(path)}`);
  return `'$${segments.map((s) => (BARE_SEGMENT.test(s) ? `.${s}` : `."${s}"`)).join('')}'`;
}

/**
 * The one spelling of a document field used by indexes and queries alike: SQLite matches an
 * expression index only against the same expression. `id` is the primary key column itself.
 */
export function fieldValue(path: string): string {
  return path === 'id' ? 'id' : `json_extract(doc, ${jsonPath(path)})`;
}

/** SQLite's own lower() folds ASCII only, as its LIKE and NOCASE do: an index on it serves
 * case-insensitive prefixes of ASCII patterns exactly. */
export const loweredValue = (path: string): string => `lower(${fieldValue(path)})`;

/** Names of what a path of a collection may have, unquoted (letters, digits and `_` only). */
export type PathNames = { index: string; lower: string; trigram: string };

export function namesOf(collection: string, path: string): PathNames {
  const hash = createHash('sha256').update(path).digest('hex').slice(0, 10);
  const base = `${tableOf(collection)}__${path.replace(/[^A-Za-z0-9_]/g, '_')}_${hash}`;
  return { index: base, lower: `${base}_lower`, trigram: `${base}_trigram` };
}

export function indexSql(collection: string, path: string): string {
  return `CREATE INDEX IF NOT EXISTS ${quoted(namesOf(collection, path).index)} ON ${quoted(tableOf(collection))} (${fieldValue(path)}, id) WHERE deleted = 0`;
}

export function lowerIndexSql(collection: string, path: string): string {
  return `CREATE INDEX IF NOT EXISTS ${quoted(namesOf(collection, path).lower)} ON ${quoted(tableOf(collection))} (${loweredValue(path)}) WHERE deleted = 0`;
}

/**
 * What the trigram index holds for a value: its text as LIKE reads it (a number as its text, an
 * array or object as its JSON), lowercased as JavaScript lowercases (rm_fold), which is what every
 * exact LIKE check compares (see likeIndex.ts). lower() is the same for ASCII text and saves the
 * call into JavaScript; length() stops at a NUL, so text holding one takes rm_fold too.
 */
function foldedText(doc: string, path: string): string {
  const text = `CAST(json_extract(${doc}, ${jsonPath(path)}) AS TEXT)`;
  return `CASE WHEN octet_length(${text}) = length(${text}) THEN lower(${text}) ELSE rm_fold(${text}) END`;
}

/**
 * The trigram index of a path, filled from the live documents, and the triggers that keep it. It
 * is contentless (the documents hold the text) with deletes by rowid, and `detail=none`: it keeps
 * only which rows hold each trigram, no positions, so it costs a fraction of a full index; a query
 * therefore asks for each trigram rather than for a phrase, and the exact LIKE check that follows
 * removes rows holding them elsewhere. The tokenizer folds nothing: the text is folded already.
 */
export function trigramSql(collection: string, path: string): string[] {
  const table = quoted(tableOf(collection));
  const fts = namesOf(collection, path).trigram;
  const column = quoted(`${TRIGRAM_COLUMN_PREFIX}${path}`);
  const value = (row: string): string => `json_extract(${row}.doc, ${jsonPath(path)})`;
  const add = (row: string): string =>
    `INSERT INTO ${quoted(fts)} (rowid, ${column}) SELECT ${row}.rowid, ${foldedText(`${row}.doc`, path)} WHERE ${row}.deleted = 0 AND ${value(row)} IS NOT NULL;`;
  const drop = `DELETE FROM ${quoted(fts)} WHERE rowid = old.rowid;`;
  return [
    `CREATE VIRTUAL TABLE ${quoted(fts)} USING fts5(${column}, content = '', contentless_delete = 1, detail = none, tokenize = 'trigram case_sensitive 1')`,
    // In rowid order, not the order of the path's index (which the planner would pick for IS NOT
    // NULL): FTS5 writes a segment each time a rowid comes below the last, and rereads them all.
    `INSERT INTO ${quoted(fts)} (rowid, ${column}) SELECT rowid, ${foldedText('doc', path)} FROM ${table} WHERE deleted = 0 AND ${fieldValue(path)} IS NOT NULL ORDER BY rowid`,
    `CREATE TRIGGER ${quoted(`${fts}${INSERT_TRIGGER}`)} AFTER INSERT ON ${table} BEGIN ${add('new')} END`,
    // Most writes leave a path's value as it was (a description edited): no index work for them.
    `CREATE TRIGGER ${quoted(`${fts}_update`)} AFTER UPDATE OF deleted, doc ON ${table}
       WHEN old.deleted IS NOT new.deleted OR ${value('old')} IS NOT ${value('new')} BEGIN ${drop} ${add('new')} END`,
    `CREATE TRIGGER ${quoted(`${fts}_delete`)} AFTER DELETE ON ${table} BEGIN ${drop} END`,
  ];
}

/** Drops a trigram index and its triggers (the triggers first: without them nothing writes it). */
export function dropTrigramSql(trigram: string): string[] {
  return [
    ...[INSERT_TRIGGER, '_update', '_delete'].map((suffix) => `DROP TRIGGER IF EXISTS ${quoted(`${trigram}${suffix}`)}`),
    `DROP TABLE IF EXISTS ${quoted(trigram)}`,
  ];
}

/** The trigram table an insert trigger belongs to, if the name is one. */
export function trigramOfTrigger(trigger: string): string | undefined {
  return trigger.endsWith(`_trigram${INSERT_TRIGGER}`) ? trigger.slice(0, -INSERT_TRIGGER.length) : undefined;
}

/** The path a trigram table's column names. */
export function pathOfTrigramColumn(column: string): string | undefined {
  return column.startsWith(TRIGRAM_COLUMN_PREFIX) ? column.slice(TRIGRAM_COLUMN_PREFIX.length) : undefined;
}

/** What queries of a collection may use, read from its schema. */
export type SearchIndexes = {
  /** Whether the path has the index of lower(value). */
  lower(path: string): boolean;
  /** The path's trigram table when the triggers keep it. */
  trigram(path: string): string | undefined;
};

export const NO_SEARCH_INDEXES: SearchIndexes = { lower: () => false, trigram: () => undefined };

/** The search indexes of a collection whose indexes and triggers are `names`. */
export function searchIndexes(collection: string, names: ReadonlySet<string>): SearchIndexes {
  return {
    lower: (path) => path !== 'id' && names.has(namesOf(collection, path).lower),
    trigram: (path) => {
      if (path === 'id') return undefined;
      const { trigram } = namesOf(collection, path);
      return names.has(`${trigram}${INSERT_TRIGGER}`) ? trigram : undefined;
    },
  };
}
