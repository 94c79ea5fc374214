// What one running service holds in memory besides its stores: the folds kept of streams, the
// queues of commands per stream, the locks of this process, and the resource services. Made once
// by the composition root (api/compose.ts) and handed to the HTTP app, the modules and the workers
// as an argument; nothing of it lives in a module-level variable, so two services of one process
// (tests make several) share nothing.

import type { EventStore } from '../domain/ports.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { referrersOf } from '../domain/resource/service.ts';
import { KeyedLocks } from '../domain/shared/keyedLocks.ts';
import { StreamQueues } from './commands.ts';
import { resourceService, type ReferenceCount, type ReferenceLookup, type ResourceLog, type ResourceService } from './resourceService.ts';
import { FoldCache } from './streamFold.ts';

export type RuntimeOptions = {
  eventStore: EventStore;
  /** Every resource the service serves (all modules'): the references among them restrict deletes,
   * and an access rule's `entityName` names one of them by path. */
  resources: readonly ResourceDefinition[];
  /** Live records of a resource from its read model (references by a non-unique field, and the
   * records a 409 names); absent where no read model runs, and then a change that needs it fails. */
  lookup?: ReferenceLookup;
  /** How many records restrict a delete; absent as `lookup` is. */
  count?: ReferenceCount;
};

export class Runtime implements ResourceLog {
  readonly events: EventStore;
  readonly folds = new FoldCache();
  readonly queues = new StreamQueues();
  /** Locks of this process by name (references and their writes, a module's own checks). */
  readonly locks = new KeyedLocks();
  readonly resources: readonly ResourceDefinition[];
  readonly #lookup: ReferenceLookup | undefined;
  readonly #count: ReferenceCount | undefined;
  readonly #byPath: ReadonlyMap<string, ResourceDefinition>;
  readonly #services = new Map<ResourceDefinition, ResourceService>();
  readonly #owned = new Map<Slot<unknown>, unknown>();

  constructor(options: RuntimeOptions) {
    this.events = options.eventStore;
    this.resources = options.resources;
    this.#lookup = options.lookup;
    this.#count = options.count;
    this.#byPath = new Map(options.resources.map((r) => [r.path, r]));
  }

  /** The service of a resource (made once): the only way to get one, so every service knows the
   * references of every resource to its records, and checks them before a delete. */
  service(def: ResourceDefinition): ResourceService {
    let service = this.#services.get(def);
    if (service === undefined) {
      const options = {
        referrers: referrersOf(def, this.resources),
        resourceAt: (path: string) => this.resourceAt(path),
        ...(this.#lookup === undefined ? {} : { lookup: this.#lookup }),
        ...(this.#count === undefined ? {} : { count: this.#count }),
      };
      service = resourceService(def, this, options);
      this.#services.set(def, service);
    }
    return service;
  }

  /** The resource served at a path (`users`, `user-groups`), if the service serves one. */
  resourceAt(path: string): ResourceDefinition | undefined {
    return this.#byPath.get(path);
  }

  /** What a module keeps in memory for this service (see Slot), made on first use. */
  own<T>(slot: Slot<T>): T {
    if (this.#owned.has(slot)) return this.#owned.get(slot) as T;
    const made = slot.make(this);
    this.#owned.set(slot, made);
    return made;
  }
}

/** A kind of state a module keeps in memory for as long as a service runs (its locks, what its
 * worker shares with its routes): declared once, made once per runtime (Runtime.own). */
export class Slot<T> {
  readonly make: (runtime: Runtime) => T;
  constructor(make: (runtime: Runtime) => T) {
    this.make = make;
  }
}
