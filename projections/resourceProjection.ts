// The read model of a resource: one document per live record, as the API returns it.

import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { evolve, fromRecord, initialState, kindOf, streamOf, toRecord } from '../domain/resource/decider.ts';
import { idIn } from '../domain/shared/streams.ts';
import type { Projection } from './projection.ts';

export function resourceProjection(def: ResourceDefinition): Projection {
  return {
    name: def.collection,
    collection: def.collection,
    categories: [def.category],
    indexedPaths: def.indexed,
    textPaths: def.autocomplete,
    documentIds: (event) => {
      const id = kindOf(def, event.type) === undefined ? undefined : idIn(def.category, event.stream);
      return id === undefined ? [] : [id];
    },
    sourcesOf: (doc) => [streamOf(def, doc.id)],
    evolve(current, event) {
      const id = idIn(def.category, event.stream);
      if (id === undefined) return undefined;
      // Replays are harmless: an event at or below the stored version changes nothing.
      if (current !== undefined && event.revision <= current.version) return undefined;
      const before = current?.doc ? fromRecord(current.doc) : initialState();
      const after = evolve(def, before, event);
      if (after.status === 'absent') return undefined;
      if (after.status === 'deleted') return { kind: 'delete', id, version: event.revision };
      return { kind: 'upsert', id, version: event.revision, doc: toRecord(after) };
    },
  };
}
