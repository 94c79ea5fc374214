// The EventStore contract on the KurrentDB adapter, through the real @kurrent/kurrentdb-client
// (its batch-append path and its Rust reader), against the gRPC stand-in of the server
// (grpcStandIn.ts): the adapter's I/O as the client performs it, on every `npm test`. Not a test of
// the server: eventStore.containers.spec.ts runs the same contract on a real KurrentDB.

import { KurrentDBClient } from '@kurrent/kurrentdb-client';
import { afterAll } from 'vitest';
import { KurrentEventStore } from '../../../infra/kurrentdb/eventStore.ts';
import { eventStoreContract } from '../../support/eventStoreContract.ts';
import { startGrpcStandIn, type GrpcStandIn } from './grpcStandIn.ts';

let opened: Promise<{ standIn: GrpcStandIn; store: KurrentEventStore }> | undefined;

afterAll(async () => {
  const { standIn, store } = (await opened) ?? {};
  await store?.close();
  await standIn?.close();
});

eventStoreContract('KurrentDB adapter against the gRPC stand-in', async () => {
  opened ??= startGrpcStandIn().then((standIn) => ({
    standIn,
    store: new KurrentEventStore(KurrentDBClient.connectionString(standIn.url())),
  }));
  return (await opened).store;
});
