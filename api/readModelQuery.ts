// Queries of a resource's read model that a module's own routes make (records by a field, the
// users of a group, ...): the same compiled filtering as search, after the same minPosition wait.

import type { Document } from '../domain/ports.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { MAX_UNPAGED_SIZE, narrowed, toQuery, type Alternatives, type FilterItem } from '../domain/shared/filtering.ts';
import { documentsOf } from './documentStream.ts';
import type { AppDeps } from './module.ts';
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

export const eq = (column: string, value: string): FilterItem => ({ column, operator: 'EQ', value });
export const isIn = (column: string, values: readonly string[]): FilterItem => ({ column, operator: 'IN', values: [...values] });
