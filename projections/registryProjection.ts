// The read model of a registry resource: one document per live record, as the API returns it.

import type { RegistryDefinition } from '../domain/registry/defineRegistry.ts';
import { evolve, fromRecord, initialState, kindOf, toRecord } from '../domain/registry/registryDecider.ts';
import { idIn } from '../domain/shared/streams.ts';
import type { Projection } from './projection.ts';

export function registryProjection(def: RegistryDefinition): Projection {
  return {
    name: def.collection,
    collection: def.collection,
    categories: [def.category],
    indexedPaths: def.indexed,
    textPaths: def.autocomplete,
    documentId: (event) => (kindOf(def, event.type) === undefined ? undefined : idIn(def.category, event.stream)),
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
