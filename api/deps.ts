// What the application is built from: ports, the clock, ids, the token verifier and the
// resource descriptors. main.ts (and the tests) choose the adapters.

import type { FastifyServerOptions } from 'fastify';
import type { BlobStore, Clock, EventStore, IdGenerator, ReadStore } from '../domain/ports.ts';
import type { RegistryDefinition } from '../domain/registry/defineRegistry.ts';
import type { ReadModels } from '../projections/projection.ts';
import type { TokenVerifier } from './auth.ts';

export type AppDeps = {
  eventStore: EventStore;
  readStore: ReadStore;
  /** Large binary content; events hold only its BlobRef. */
  blobStore: BlobStore;
  readModels: ReadModels;
  clock: Clock;
  newId: IdGenerator;
  verifyToken: TokenVerifier;
  registries: readonly RegistryDefinition[];
  logger?: FastifyServerOptions['logger'];
  bodyLimit?: number;
};
