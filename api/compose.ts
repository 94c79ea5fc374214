// Wires a running service from opened stores: the registries' projectors and the HTTP app, and
// one close() for all of it. Which stores to open is the caller's choice (main.ts, the tests,
// the benchmark); this module knows no adapter.

import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type { BlobStore, Clock, EventStore, ReadStore } from '../domain/ports.ts';
import { registries } from '../domain/registries/index.ts';
import { registryProjection } from '../projections/registryProjection.ts';
import { projectorGroup } from '../workers/projector.ts';
import { buildApp } from './app.ts';
import type { TokenVerifier } from './auth.ts';

export type ComposeOptions = {
  eventStore: EventStore;
  readStore: ReadStore;
  blobStore: BlobStore;
  verifyToken: TokenVerifier;
  clock?: Clock;
  logger?: FastifyServerOptions['logger'];
  bodyLimit?: number;
  batchSize?: number;
};

export type Service = {
  app: FastifyInstance;
  readModels: ReturnType<typeof projectorGroup>;
  /** Starts the projectors (after listen, so a long catch-up shows as lag instead of delaying start). */
  startProjectors: () => Promise<void>;
  /** Stops HTTP, then the projectors, then closes the stores. */
  close: () => Promise<void>;
};

export async function composeService(options: ComposeOptions): Promise<Service> {
  const { eventStore, readStore, blobStore } = options;
  // The projectors log through the app's logger, which exists only once the app is built.
  const log: { to?: { error: (obj: object, msg: string) => void } } = {};
  const clock = options.clock ?? { now: () => new Date() };
  const readModels = projectorGroup(registries.map(registryProjection), eventStore, readStore, {
    logger: { error: (obj, msg) => log.to?.error(obj, msg) },
    now: () => clock.now(),
    ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
  });
  const app = await buildApp({
    eventStore,
    readStore,
    blobStore,
    readModels,
    clock,
    newId: randomUUID,
    verifyToken: options.verifyToken,
    registries,
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.bodyLimit === undefined ? {} : { bodyLimit: options.bodyLimit }),
  });
  log.to = app.log;
  return {
    app,
    readModels,
    startProjectors: () => readModels.start(),
    close: async () => {
      await app.close();
      await readModels.stop();
      await eventStore.close();
      await readStore.close();
      await blobStore.close();
    },
  };
}
