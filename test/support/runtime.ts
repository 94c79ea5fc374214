// A runtime over a log, outside a composed service: what a test of the command handler, a
// resource service or a worker builds, with every module's resources (so that every service
// checks the references that restrict its deletes, as in the service).

import { Runtime } from '../../application/runtime.ts';
import type { EventStore } from '../../domain/ports.ts';
import type { ResourceDefinition } from '../../domain/resource/defineResource.ts';
import { modules } from '../../modules/index.ts';

/** Every resource the modules serve. */
export const allResources: readonly ResourceDefinition[] = modules.flatMap((m) => m.resources ?? []).map((r) => r.definition);

/** A fresh runtime over a log: its own folds, queues, locks and services. */
export const runtimeOver = (eventStore: EventStore, extra: readonly ResourceDefinition[] = []): Runtime =>
  new Runtime({ eventStore, resources: [...allResources, ...extra] });

const runtimes = new WeakMap<EventStore, Runtime>();

/** One runtime per log object of a test (the command handler's tests, which wrap a log to watch
 * it, and expect commands over one wrapper to share folds and queues, as one service's do). */
export function runtimeOf(eventStore: EventStore): Runtime {
  let runtime = runtimes.get(eventStore);
  if (runtime === undefined) {
    runtime = runtimeOver(eventStore);
    runtimes.set(eventStore, runtime);
  }
  return runtime;
}
