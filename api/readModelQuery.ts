// Queries of a resource's read model that a module's own routes make (records by a field, the
// users of a group, ...): the same compiled filtering as search, after the same minPosition wait.

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Document } from '../domain/ports.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { MAX_UNPAGED_SIZE, narrowed, toQuery, type Alternatives, type Column, type FilterItem } from '../domain/shared/filtering.ts';
import { documentsOf, sendDocuments } from './documentStream.ts';
import type { AppDeps } from './module.ts';
import { linkNext, readPage, type Keyset, type PageRead, type Paging } from './paging.ts';
import { catchUpTo } from './readModelWait.ts';

export type ReadModelAnswer = { collection: string; ids: string[] };

export type QueryOptions = {
  minPosition?: string | undefined;
  limit?: number;
  /** What the caller may read (access rules): the answer holds only records it covers. */
  within?: Alternatives | undefined;
};

/** The ids of the records matching filter items (in the default sort), at most `limit`. */
export async function idsWhere(
  deps: AppDeps,
  def: ResourceDefinition,
  filter: readonly FilterItem[],
  options: QueryOptions = {},
): Promise<ReadModelAnswer> {
  await catchUpTo(deps, def.collection, options.minPosition);
  const collection = deps.readModels.collectionOf(def.collection);
  const query = narrowed(toQuery({ filter: [...filter], sort: [] }, def.columns, def.defaultSort), options.within);
  const ids = await deps.readStore.findIds(collection, query, { offset: 0, limit: options.limit ?? MAX_UNPAGED_SIZE });
  return { collection, ids };
}

/** The records matching filter items, read into memory (for joins; bounded by `limit`). */
export async function recordsWhere(
  deps: AppDeps,
  def: ResourceDefinition,
  filter: readonly FilterItem[],
  options: QueryOptions = {},
): Promise<Document[]> {
  const { collection, ids } = await idsWhere(deps, def, filter, options);
  const docs: Document[] = [];
  for await (const doc of documentsOf(deps.readStore, collection, ids)) docs.push(doc);
  return docs;
}

export type PageOptions = QueryOptions & {
  paging: Paging;
  /** The column the page is ordered by before id: the resource's default sort unless given; 'id' for id order. */
  order?: string;
  keep?: PageRead['keep'];
};

const ID_COLUMN: Column = { path: 'id', type: 'string', array: false };

/** A resource's order for paging: by `order` (default: its default sort), then id. */
export function keysetOf(def: ResourceDefinition, order: string | undefined = def.defaultSort[0]): Keyset {
  const column = order === undefined || order === 'id' ? undefined : def.columns.columns.get(order);
  if (order !== undefined && order !== 'id' && column === undefined) throw new TypeError(`${def.name} has no column ${order} to page by`);
  return { column };
}

/** One page of the records matching filter items (api/paging.ts), after the minPosition wait. */
export async function pageWhere(
  deps: AppDeps,
  def: ResourceDefinition,
  filter: readonly FilterItem[],
  options: PageOptions,
): Promise<ReadModelAnswer & { next: string | undefined }> {
  await catchUpTo(deps, def.collection, options.minPosition);
  const collection = deps.readModels.collectionOf(def.collection);
  const query = narrowed(toQuery({ filter: [...filter], sort: [] }, def.columns, def.defaultSort), options.within);
  const { ids, next } = await readPage({
    readStore: deps.readStore,
    collection,
    query,
    keyset: keysetOf(def, options.order),
    idColumn: def.columns.columns.get('id') ?? ID_COLUMN,
    paging: options.paging,
    ...(options.keep === undefined ? {} : { keep: options.keep }),
  });
  return { collection, ids, next };
}

/** Answers one page of the records matching filter items: the records, and Link when more follow. */
export async function sendPageWhere(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: AppDeps,
  def: ResourceDefinition,
  filter: readonly FilterItem[],
  options: PageOptions,
): Promise<FastifyReply> {
  const { collection, ids, next } = await pageWhere(deps, def, filter, options);
  linkNext(request, reply, next);
  return sendDocuments(reply, deps.readStore, collection, ids);
}

export const eq = (column: string, value: string): FilterItem => ({ column, operator: 'EQ', value });
export const isIn = (column: string, values: readonly string[]): FilterItem => ({ column, operator: 'IN', values: [...values] });
