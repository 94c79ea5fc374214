// What the HTTP layer gives the resource services beyond the log: a lookup in read models
// (references by a non-unique field, and the records that restrict a delete). The services
// themselves are the runtime's (Runtime.service).

import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import type { ReferenceCount, ReferenceLookup } from '../application/resourceService.ts';
import { narrowed, toQuery, type Alternatives, type FilterItem, type Query } from '../domain/shared/filtering.ts';
import type { AppDeps } from './module.ts';
import { waitForReadModelAt } from './readModelWait.ts';

type LookupDeps = Pick<AppDeps, 'eventStore' | 'readStore' | 'readModels'>;

/** The physical collection of a resource's read model caught up with the log's head (bounded like
 * minPosition: 503 after 5 s), and the query of filter items there (narrowed `within`, if given). */
async function caughtUpQuery(
  deps: LookupDeps,
  def: ResourceDefinition,
  filter: readonly FilterItem[],
  within: Alternatives | undefined,
): Promise<{ collection: string; query: Query }> {
  await waitForReadModelAt(deps, def.collection, await deps.eventStore.headPosition());
  return {
    collection: deps.readModels.collectionOf(def.collection),
    query: narrowed(toQuery({ filter: [...filter], sort: [] }, def.columns, def.defaultSort), within),
  };
}

/** Live records of a resource matching filter items, from its read model once that has caught up
 * with the log's head. */
export function readModelLookup(deps: LookupDeps): ReferenceLookup {
  return async (def, filter, limit, within) => {
    const { collection, query } = await caughtUpQuery(deps, def, filter, within);
    return deps.readStore.find(collection, query, { offset: 0, limit });
  };
}

/** How many of them there are. */
export function readModelCount(deps: LookupDeps): ReferenceCount {
  return async (def, filter, within) => {
    const { collection, query } = await caughtUpQuery(deps, def, filter, within);
    return deps.readStore.count(collection, query);
  };
}
