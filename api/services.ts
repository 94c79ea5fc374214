// The resource services of an app: one per resource, with what the HTTP layer gives them beyond
// the log: a lookup in read models (references by a non-unique field, and the records that
// restrict a delete) and the references every module's resources hold to each resource.

import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { referrersOf, resourceService, type ReferenceCount, type ReferenceLookup, type ResourceService } from '../domain/resource/service.ts';
import { narrowed, toQuery, type Alternatives, type FilterItem, type Query } from '../domain/shared/filtering.ts';
import type { AppDeps } from './module.ts';
import { waitForReadModelAt } from './readModelWait.ts';

type LookupDeps = Pick<AppDeps, 'eventStore' | 'readStore' | 'readModels'>;

/** The physical collection of a resource's read model caught up with the log's head (bounded like
 * minPosition: 503 after 5 s), and the query of filter items there (narrowed `within`, if given). */
async function caughtUpQuery(deps: LookupDeps, def: ResourceDefinition, filter: readonly FilterItem[], within: Alternatives | undefined): Promise<{ collection: string; query: Query }> {
  await waitForReadModelAt(deps, def.collection, await deps.eventStore.headPosition());
  return { collection: deps.readModels.collectionOf(def.collection), query: narrowed(toQuery({ filter: [...filter], sort: [] }, def.columns, def.defaultSort), within) };
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

const services = new WeakMap<AppDeps, Map<ResourceDefinition, ResourceService>>();

/** The service of a resource in this app (made once). */
export function serviceOf(deps: AppDeps, def: ResourceDefinition): ResourceService {
  let byDef = services.get(deps);
  if (byDef === undefined) {
    byDef = new Map();
    services.set(deps, byDef);
  }
  let service = byDef.get(def);
  if (service === undefined) {
    const all = deps.modules.flatMap((m) => m.resources ?? []).map((r) => r.definition);
    service = resourceService(def, deps.eventStore, { lookup: readModelLookup(deps), count: readModelCount(deps), referrers: referrersOf(def, all) });
    byDef.set(def, service);
  }
  return service;
}
