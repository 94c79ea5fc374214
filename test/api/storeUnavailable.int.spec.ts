// The production adapters' clients failing for real (a closed local port, no mock): every request
// that needs the failing store answers 503 with the error body, never 500, and the service keeps
// serving what does not need it.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KurrentDBClient } from '@kurrent/kurrentdb-client';
import { MongoClient } from 'mongodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KurrentEventStore } from '../../infra/kurrentdb/eventStore.ts';
import { MongoReadStore } from '../../infra/mongodb/readStore.ts';
import { openSqliteEventStore } from '../../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../../infra/sqlite/readStore.ts';
import { sampleBody, uniqueCode } from '../support/samples.ts';
import { startTestApp, type TestApp, type TestResponse } from '../support/testApp.ts';
import { registries } from '../../modules/registries/domain/index.ts';

const def = registries[0];
if (def === undefined) throw new Error('no registry');
const base = `/api/v1/${def.path}`;

type ErrorBody = { status: string; message: string; traceId: string; errors: string[] };

function expectUnavailable(res: TestResponse, code: RegExp): void {
  expect(res.statusCode).toBe(503);
  const body = res.json<ErrorBody>();
  expect(body).toMatchObject({ status: 'SERVICE_UNAVAILABLE', message: expect.stringMatching(code) as unknown });
  expect(body.traceId).toEqual(expect.any(String));
}

describe('with the KurrentDB log unreachable', () => {
  let t: TestApp;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'unreachable-log-'));
    const eventStore = new KurrentEventStore(KurrentDBClient.connectionString('kurrentdb://127.0.0.1:1?tls=false'), { resubscribeMs: 200 });
    t = await startTestApp({ dataDir: dir, stores: { eventStore, readStore: openSqliteReadStore({ path: join(dir, 'rm.db') }) } });
  });
  afterAll(() => t.close());

  it('answers writes and single-record reads with 503 and the error body', async () => {
    expectUnavailable(
      await t.call({ method: 'POST', url: base, payload: sampleBody(def, uniqueCode('DOWN')) }),
      /event store is unavailable/,
    );
    expectUnavailable(await t.call({ method: 'GET', url: `${base}/${crypto.randomUUID()}` }), /event store is unavailable/);
    expectUnavailable(await t.call({ method: 'GET', url: '/health/ready' }), /Event store unreachable/);
  });

  it('still serves searches from the read models', async () => {
    const res = await t.call({ method: 'POST', url: `${base}/search`, payload: { filter: [] } });
    expect(res.statusCode).toBe(200);
  });
});

describe('with the MongoDB read models unreachable', () => {
  let t: TestApp;
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'unreachable-reads-'));
    const client = new MongoClient('mongodb://127.0.0.1:1/x', { serverSelectionTimeoutMS: 300, connectTimeoutMS: 300 });
    t = await startTestApp({
      dataDir: dir,
      stores: { eventStore: openSqliteEventStore(join(dir, 'events.db')), readStore: new MongoReadStore(client, client.db()) },
    });
  });
  afterAll(() => t.close());

  it('answers searches and counts with 503 and the error body', async () => {
    expectUnavailable(await t.call({ method: 'POST', url: `${base}/search`, payload: { filter: [] } }), /read store is unavailable/);
    expectUnavailable(await t.call({ method: 'POST', url: `${base}/count`, payload: { filter: [] } }), /read store is unavailable/);
    expectUnavailable(await t.call({ method: 'GET', url: '/health/ready' }), /Read store unreachable/);
  });

  it('still takes writes into the log and reads records back from it', async () => {
    const created = await t.call({ method: 'POST', url: base, payload: sampleBody(def, uniqueCode('UP')) });
    expect(created.statusCode).toBe(201);
    const id = created.json<{ id: string }>().id;
    expect((await t.call({ method: 'GET', url: `${base}/${id}` })).statusCode).toBe(200);
  });
});
