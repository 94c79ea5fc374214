// The resource services of an app: one per resource, with what the HTTP layer gives them beyond
// the log: a lookup in read models (references by a non-unique field, and the records that
// restrict a delete) and the references every module's resources hold to each resource.

import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { referrersOf, resourceService, type ReferenceLookup, type ResourceService } from '../domain/resource/service.ts';
import { toQuery } from '../domain/shared/filtering.ts';
import type { AppDeps } from './module.ts';
import { waitForReadModelAt } from './readModelWait.ts';

/** Live records of a resource matching filter items, from its read model once that has caught up
 * with the log's head (bounded like minPosition: 503 after 5 s). */
export function readModelLookup(deps: Pick<AppDeps, 'eventStore' | 'readStore' | 'readModels'>): ReferenceLookup {
  return async (def, filter, limit) => {
    await waitForReadModelAt(deps, def.collection, await deps.eventStore.headPosition());
    const collection = deps.readModels.collectionOf(def.collection);
    return deps.readStore.find(collection, toQuery({ filter: [...filter], sort: [] }, def.columns, def.defaultSort), { offset: 0, limit });
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
    service = resourceService(def, deps.eventStore, { lookup: readModelLookup(deps), referrers: referrersOf(def, all) });
    byDef.set(def, service);
  }
  return service;
}
