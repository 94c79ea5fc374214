// One HTTP server for bench/http.ts, in its own process so the load generator does not share its
// core: `node bench/server.ts <mode>` with mode
//   service     the real application on the embedded stores in a temporary DATA_DIR
//   raw-insert  baseline A: a bare fastify route, one INSERT (its own transaction) per request into a
//               node:sqlite file in WAL with synchronous=FULL
//   const       baseline B: a bare fastify route returning constant JSON
// `service` under `node --import ./infra/telemetry/register.ts` (api/nodeFlags.ts's PRELOAD) traces as `npm start` does when OTEL_*
// ask for it. Prints one line `READY {"url":…,"token":…,"dataDir":…}` once listening; on SIGTERM or SIGINT it
// closes everything, removes its temporary folder and exits.

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import Fastify, { type FastifyInstance } from 'fastify';
import { hs256Verifier, signHs256 } from '../api/auth.ts';
import { composeService } from '../api/compose.ts';
import { openEmbeddedStores } from '../infra/embedded.ts';
import { flushTelemetry, instrumentPorts, instrumentService } from '../infra/telemetry/instrument.ts';
import { closeWithParent, LOG_PRAGMAS, RAW_SCHEMA } from './common.ts';

type Started = { app: FastifyInstance; token: string; close: () => Promise<void> };

async function startService(dataDir: string): Promise<Started> {
  const secret = new TextEncoder().encode(`bench-${randomUUID()}-${randomUUID()}`);
  // As api/main.ts composes it: the ports traced when the preload started traces (bench/telemetry.ts
  // runs this server with and without it), untouched otherwise.
  const service = await composeService({ ...instrumentPorts(openEmbeddedStores(dataDir)), verifyToken: hs256Verifier(secret) });
  instrumentService(service);
  await service.startProjectors();
  const token = await signHs256(secret, { sub: 'bench-admin', roles: ['admin'] });
  return {
    app: service.app,
    token,
    close: async () => {
      await service.close();
      await flushTelemetry();
    },
  };
}

function startRawInsert(dataDir: string): Started {
  const db = new DatabaseSync(join(dataDir, 'raw.db'));
  db.exec(LOG_PRAGMAS);
  db.exec(RAW_SCHEMA);
  const insert = db.prepare(
    'INSERT INTO events (id, stream, category, revision, type, schema_version, data, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  );
  const app = Fastify({ logger: false });
  app.post('/raw', (request, reply) => {
    const id = randomUUID();
    const metadata = { actor: 'bench', at: new Date().toISOString(), requestId: request.id };
    // Autocommit: this one statement is one transaction, one WAL fsync.
    insert.run(id, `raw-${id}`, 'raw', 0, 'RawCreated', 1, JSON.stringify(request.body), JSON.stringify(metadata));
    return reply.code(201).send({ id });
  });
  return {
    app,
    token: '',
    close: async () => {
      await app.close();
      db.close();
    },
  };
}

function startConst(): Started {
  const app = Fastify({ logger: false });
  app.get('/const', () => ({ hello: 'world' }));
  return { app, token: '', close: () => app.close() };
}

async function main(): Promise<void> {
  const mode = process.argv[2] ?? '';
  const dataDir = mkdtempSync(join(tmpdir(), `admin-bench-${mode}-`));
  let started: Started;
  if (mode === 'service') started = await startService(dataDir);
  else if (mode === 'raw-insert') started = startRawInsert(dataDir);
  else if (mode === 'const') started = startConst();
  else throw new Error(`unknown mode "${mode}": service, raw-insert or const`);

  closeWithParent(() => started.close(), dataDir);

  const url = await started.app.listen({ port: 0, host: '127.0.0.1' });
  console.log(`READY ${JSON.stringify({ url, token: started.token, dataDir })}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exit(1);
});
