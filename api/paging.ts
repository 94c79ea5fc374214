// Every read that answers a collection answers one bounded page of it: `limit` rows (default 1000,
// at most 10000) in a fixed order, and when rows follow, a `Link: <…>; rel="next"` header naming
// the next page by an opaque cursor. Declared once here: the query parameters, the keyset read,
// the header and its OpenAPI declaration; a collection names only its order (a column, then id).
//
// A cursor rather than an offset: the next page starts after the last row sent (its sort value and
// id), so a row written or deleted between two pages neither shifts the others into a repeat nor
// out of sight, as it would under an offset; and reading page n costs one index range whatever n
// (two for a page cut short: see plainPage).

import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { Document, ReadStore } from '../domain/ports.ts';
import { DomainError } from '../domain/shared/errors.ts';
import { MAX_UNPAGED_SIZE, type Column, type Condition, type Query, type Scalar } from '../domain/shared/filtering.ts';
import { documentsOf } from './documentStream.ts';
import { queryInteger } from './schemas.ts';

export const DEFAULT_LIMIT = 1000;
/** The largest page: the most rows an unpaged read ever answered. */
export const MAX_LIMIT = MAX_UNPAGED_SIZE;
const MAX_CURSOR_LENGTH = 2048;
/** Longest sort value a cursor may carry (a code is at most 255 characters, a date-time 30). */
const MAX_CURSOR_VALUE = 1000;

/** The query parameters of every paged read. */
export const pagingQuery = {
  limit: queryInteger(1, MAX_LIMIT)
    .default(DEFAULT_LIMIT)
    .meta({
      description: `Most rows in this page (default ${String(DEFAULT_LIMIT)}, at most ${String(MAX_LIMIT)}). A page cut short says so with \`Link: <…>; rel="next"\`.`,
    }),
  cursor: z
    .string()
    .min(1)
    .max(MAX_CURSOR_LENGTH)
    .regex(/^[A-Za-z0-9_-]+$/, { error: 'expected the cursor of a Link header' })
    .optional()
    .meta({ description: 'Where the page starts: copied from the `Link` of the previous page, never made by hand (opaque).' }),
};
export type Paging = { limit: number; cursor?: string | undefined };

/** The response header of a page cut short, for the OpenAPI document (openapiProtocol.ts adds it to
 * every operation that takes `cursor`). */
export const NEXT_PAGE_HEADER = {
  description:
    'Present when rows follow this page: `<URL of the next page>; rel="next"`, the same request with `cursor` (and `limit`) set. Absent on the last page.',
  schema: { type: 'string' },
};

/** A sentence for a route's description: how its answer is paged. */
export const pagedNote = (order: string): string =>
  `Paged: \`limit\` rows (default ${String(DEFAULT_LIMIT)}, at most ${String(MAX_LIMIT)}) ${order}; when more follow, \`Link: <…>; rel="next"\` names the next page ` +
  '(a cursor: rows written or deleted between pages do not make others repeat or go missing).';

/** For a POST read: how its next page is asked for. */
export const repostNote = 'The next page is the same body posted to the URL of the Link.';

/** The order a collection is paged in: by one column (ascending), then by id; or by id alone. */
export type Keyset = { column: Column | undefined };

/** Where a page ends: the last row's sort value and id. */
export type Position = { value: Scalar | null; id: string };

export const invalidCursor = (why: string): DomainError =>
  new DomainError('REQUEST.INVALID_CURSOR', 'The cursor is not one this collection gave out', [`cursor: ${why}`]);

/** The cursor: base64url of `[sort value, id]` of the last row sent (for id order, the id twice). */
export function encodeCursor(at: Position): string {
  return Buffer.from(JSON.stringify([at.value, at.id]), 'utf8').toString('base64url');
}

const fitsColumn = (column: Column | undefined, value: unknown): value is Scalar | null => {
  if (column === undefined) return typeof value === 'string';
  if (value === null) return true;
  if (column.type === 'number' || column.type === 'integer') return typeof value === 'number' && Number.isFinite(value);
  if (column.type === 'boolean') return typeof value === 'boolean';
  return typeof value === 'string' && value.length <= MAX_CURSOR_VALUE;
};

/** A cursor as sent back: any text that is not a pair of a value of the order's type and an id is a
 * 400 (a cursor is only ever copied from a Link). */
export function decodeCursor(keyset: Keyset, cursor: string): Position {
  let body: unknown;
  try {
    body = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw invalidCursor('not a cursor');
  }
  if (!Array.isArray(body) || body.length !== 2) throw invalidCursor('not a cursor');
  const [value, id] = body as unknown[];
  if (typeof id !== 'string' || id.length === 0 || id.length > 255 || !fitsColumn(keyset.column, value))
    throw invalidCursor(`not a position in ${keyset.column?.path ?? 'id'} order`);
  return { value, id };
}

const cond = (column: Column, op: Condition['op'], value?: Scalar): Condition => ({
  kind: 'field',
  column,
  op,
  ...(value === undefined ? {} : { value }),
});

/** The query in the keyset's order, past a position: (key, id) > (value, id). */
function after(query: Query, keyset: Keyset, idColumn: Column, at: Position | undefined): Query {
  const { column } = keyset;
  const sort = [...(column === undefined ? [] : [{ column, order: 'ASC' as const }]), { column: idColumn, order: 'ASC' as const }];
  if (at === undefined) return { ...query, sort };
  if (column === undefined) return { ...query, conditions: [...query.conditions, cond(idColumn, 'GT', at.id)], sort };
  // Both stores put missing and null values first: past a null, the non-null ones follow.
  const beyond =
    at.value === null
      ? [[cond(column, 'IS_NOT_NULL')], [cond(column, 'IS_NULL'), cond(idColumn, 'GT', at.id)]]
      : [[cond(column, 'GT', at.value)], [cond(column, 'EQ', at.value), cond(idColumn, 'GT', at.id)]];
  // The range on the key alone lets its index start at the position; the alternatives decide.
  const range = at.value === null ? [] : [cond(column, 'GTE', at.value)];
  return { ...query, conditions: [...query.conditions, ...range], anyOf: [...(query.anyOf ?? []), beyond], sort };
}

const positionOf = (keyset: Keyset, doc: Document): Position => {
  if (keyset.column === undefined) return { value: doc.id, id: doc.id };
  // A dotted path (auditInfo.whenInserted) reads through the objects above it.
  const raw = keyset.column.path
    .split('.')
    .reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined), doc);
  return { value: typeof raw === 'string' || typeof raw === 'number' || typeof raw === 'boolean' ? raw : null, id: doc.id };
};

export type PageRead = {
  readStore: ReadStore;
  collection: string;
  /** The selection (conditions and narrowing); its sort is replaced by the keyset's. */
  query: Query;
  keyset: Keyset;
  /** The catalogue's `id` column. */
  idColumn: Column;
  paging: Paging;
  /** Rows the answer keeps of those the query selects, judged on the record (e.g. valid now). */
  keep?: (doc: Document) => boolean | Promise<boolean>;
};

type PageIds = { ids: string[]; next: string | undefined };
type IdsAfter = (at: Position | undefined, limit?: number) => Promise<string[]>;

/** One page: the ids of its rows in order, and the cursor of the next page when rows follow. */
export async function readPage(read: PageRead): Promise<PageIds> {
  const start = read.paging.cursor === undefined ? undefined : decodeCursor(read.keyset, read.paging.cursor);
  const idsAfter = (at: Position | undefined, limit = read.paging.limit + 1): Promise<string[]> =>
    read.readStore.findIds(read.collection, after(read.query, read.keyset, read.idColumn, at), { offset: 0, limit });
  return read.keep === undefined ? plainPage(read, idsAfter, start) : keptPage(read, read.keep, idsAfter, start);
}

/** The first `limit` rows the query selects; one more read tells whether a next page exists. */
async function plainPage(
  { readStore, collection, keyset, paging }: PageRead,
  idsAfter: IdsAfter,
  start: Position | undefined,
): Promise<PageIds> {
  for (let round = 1; ; round++) {
    const ids = await idsAfter(start);
    if (ids.length <= paging.limit) return { ids, next: undefined };
    const page = ids.slice(0, paging.limit);
    // The next page starts after the last row of this one; a row deleted since the ids were read
    // is left out of the answer, so the one before it serves (all gone: read again).
    const tail = page.slice(-50);
    const found = await readStore.getMany(collection, tail);
    const lastId = tail.findLast((id) => found.get(id)?.doc != null);
    const last = lastId === undefined ? undefined : found.get(lastId);
    if (lastId === undefined || last?.doc == null) continue;
    const next = encodeCursor(positionOf(keyset, last.doc));
    // Its sort value is read after the ids were: had the row moved in between, the cursor would
    // skip or repeat rows no one touched. So the cursor is taken only where it ends this page in
    // one state of the model: read again, the page runs to that row, which has not changed since.
    const cut = page.indexOf(lastId) + 1;
    const again = await idsAfter(start);
    const still = (await readStore.getMany(collection, [lastId])).get(lastId);
    const settled = again.slice(0, cut).every((id, i) => id === page[i]) && still?.version === last.version;
    if (settled || round >= SETTLE_ROUNDS) return { ids: page, next };
  }
}

/** Ids read at a time when rows are judged one by one (`keep`). */
const KEPT_BATCH = 1000;

/** Reads of a page while its last row keeps moving under it, before the cursor is taken as it is. */
const SETTLE_ROUNDS = 20;

/** The first `limit` rows the query selects that `keep` keeps, judged on their records, read a
 * batch at a time until the page is full (only ids are held). */
async function keptPage(
  { readStore, collection, keyset, paging }: PageRead,
  keep: NonNullable<PageRead['keep']>,
  idsAfter: IdsAfter,
  start: Position | undefined,
): Promise<PageIds> {
  const kept: string[] = [];
  let end: Position | undefined;
  // Rows `keep` refuses cost nothing to the client: read in batches of at least KEPT_BATCH, so a
  // small `limit` over many refused rows is not one round trip per row.
  const batch = Math.max(paging.limit + 1, KEPT_BATCH);
  for (let at = start; kept.length <= paging.limit;) {
    const ids = await idsAfter(at, batch);
    for await (const doc of documentsOf(readStore, collection, ids)) {
      at = positionOf(keyset, doc);
      if (!(await keep(doc))) continue;
      kept.push(doc.id);
      if (kept.length === paging.limit) end = at;
      if (kept.length > paging.limit) break;
    }
    if (ids.length < batch) break;
  }
  const next = kept.length > paging.limit && end !== undefined ? encodeCursor(end) : undefined;
  return { ids: kept.slice(0, paging.limit), next };
}

/** A character a URI may not hold as it is (RFC 3986), percent-encoded: what the request sent stays
 * as it was sent (`%FF` too), and nothing in it can end the Link's `<…>`. */
const uriSafe = (text: string): string => text.replace(/[^A-Za-z0-9\-._~!$&'()*+,;=:@/?%]/gu, encodeURIComponent);

/** Sets `Link: <this request with cursor=next>; rel="next"` when a next page exists: the request's
 * path and query as it sent them (not re-encoded, which could change what a parameter means), its
 * cursor replaced. */
export function linkNext(request: FastifyRequest, reply: FastifyReply, next: string | undefined): void {
  if (next === undefined) return;
  const at = request.url.indexOf('?');
  const path = at < 0 ? request.url : request.url.slice(0, at);
  const query = at < 0 ? [] : request.url.slice(at + 1).split('&');
  const kept = query.filter((part) => part !== '' && !/^cursor(=|$)/.test(part));
  void reply.header('link', `<${uriSafe(path)}?${uriSafe([...kept, `cursor=${next}`].join('&'))}>; rel="next"`);
}
