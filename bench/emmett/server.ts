// The peer of bench/http.ts: Emmett's SQLite event store (@event-driven-io/emmett-sqlite, pinned in
// bench/emmett/package.json and installed there by the bench, never by the project's own install)
// behind the same fastify routes as ours, in its own process like bench/server.ts:
//
//   POST /api/v1/user-group-types      {code, name, description?, registry?}: a decider's command
//                                      handler (Emmett's DeciderCommandHandler) appends one
//                                      UserGroupTypeCreated to a new stream userGroupType-<uuid>;
//                                      201 with the record, Location, ETag and X-Event-Position
//   GET  /api/v1/user-group-types/:id  aggregateStream of that stream with the decider's evolve;
//                                      200 with the record, or 404
//
// As Emmett's docs shape it: getSQLiteEventStore({ fileName }), a Decider (decide, evolve,
// initialState) and DeciderCommandHandler with mapToStreamId. The body is checked by a fastify JSON
// schema. What ours does on top (a bearer token checked, the code reserved as a unique key, an
// idempotency key honoured, eight read models following the log) the peer does not.
//
// Concurrency. Emmett 0.38.5's store on a file does not survive concurrent operations in one
// process: every operation takes the store's one sqlite3 connection (opening it when there is none)
// and closes it when it ends, so the first to end closes it under the others ("SQLITE_MISUSE:
// Database is closed"; at 50 connections the server stops answering altogether), and concurrent
// appends share one BEGIN...COMMIT. A store per request does not rescue writes either: at 50
// connections no create completed in 5 s (probably: concurrent BEGIN IMMEDIATEs on separate connections
// wait in SQLite's busy handler, which sleeps on the threads of libuv's pool that the lock holder's
// COMMIT needs). So the peer runs as Emmett allows: creates one at a time through the one store (a
// promise queue, nothing else changed), and each read through a store of its own (a fresh
// connection per read, which is what Emmett's store does per operation anyway), so reads run in
// parallel. That is the fastest correct use of Emmett 0.38.5 found here: with reads queued too,
// get-one was about half as fast.
//
// Durability: Emmett opens its own sqlite3 connections (one per operation: it closes the database
// after each) and sets only `PRAGMA journal_mode = WAL` on each; `synchronous` is left at the
// default of the SQLite built into the sqlite3 addon. The READY line reports both as read back
// through a connection Emmett's own sqliteConnection() opens on the same file, after a first append.
//
// `node bench/emmett/server.ts` prints `READY {"url":…,"token":"","durability":{…}}` once
// listening; on SIGTERM, SIGINT or the end of stdin it closes and removes its temporary folder.

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeciderCommandHandler, IllegalStateError, type Command, type Decider, type Event } from '@event-driven-io/emmett';
import { getSQLiteEventStore, sqliteConnection } from '@event-driven-io/emmett-sqlite';
import Fastify from 'fastify';
import { closeWithParent } from '../common.ts';

const RESOURCE = '/api/v1/user-group-types';

type AuditInfo = { version: number; whoInserted: string; whenInserted: string; whoEdited: string; whenEdited: string };
type Fields = { code: string; name: string; description?: string; registry?: Record<string, unknown> };
type UserGroupType = Fields & { id: string; auditInfo: AuditInfo };

type CreateUserGroupType = Command<'CreateUserGroupType', Fields & { id: string; actor: string; now: string }>;
type UserGroupTypeCreated = Event<'UserGroupTypeCreated', Fields & { id: string; by: string; at: string }>;

type State = { status: 'empty' } | { status: 'created'; record: UserGroupType };

const decider: Decider<State, CreateUserGroupType, UserGroupTypeCreated> = {
  initialState: () => ({ status: 'empty' }),
  decide: (command, state) => {
    if (state.status !== 'empty') throw new IllegalStateError(`user group type ${command.data.id} exists already`);
    const { actor, now, ...fields } = command.data;
    return { type: 'UserGroupTypeCreated', data: { ...fields, by: actor, at: now } };
  },
  evolve: (_state, event) => {
    const { by, at, ...fields } = event.data;
    return {
      status: 'created',
      record: { ...fields, auditInfo: { version: 0, whoInserted: by, whenInserted: at, whoEdited: by, whenEdited: at } },
    };
  },
};

const streamOf = (id: string): string => `userGroupType-${id}`;
const handle = DeciderCommandHandler({ ...decider, mapToStreamId: streamOf });

const bodySchema = {
  type: 'object',
  required: ['code', 'name'],
  additionalProperties: false,
  properties: {
    code: { type: 'string', minLength: 1, maxLength: 255 },
    name: { type: 'string', minLength: 1, maxLength: 255 },
    description: { type: 'string', maxLength: 4000 },
    registry: { type: 'object' },
  },
} as const;

const SYNCHRONOUS = ['OFF', 'NORMAL', 'FULL', 'EXTRA'];

async function main(): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'admin-bench-emmett-'));
  const fileName = join(dataDir, 'emmett.db');
  const eventStore = getSQLiteEventStore({ fileName, schema: { autoMigration: 'CreateOrUpdate' } });
  // Created by the first append (below, before listening); each read's own store only reads it.
  const readStore = () => getSQLiteEventStore({ fileName, schema: { autoMigration: 'None' } });
  let writes: Promise<unknown> = Promise.resolve();
  const oneAtATime = <T>(write: () => Promise<T>): Promise<T> => {
    const done = writes.then(write);
    writes = done.catch(() => undefined);
    return done;
  };

  const app = Fastify({ logger: false });
  app.post<{ Body: Fields }>(RESOURCE, { schema: { body: bodySchema } }, async (request, reply) => {
    const id = randomUUID();
    const command: CreateUserGroupType = {
      type: 'CreateUserGroupType',
      data: { ...request.body, id, actor: 'bench-admin', now: new Date().toISOString() },
    };
    const result = await oneAtATime(() => handle(eventStore, id, command));
    if (result.newState.status !== 'created') throw new Error(`create of ${id} left no record`);
    return reply
      .code(201)
      .header('location', `${RESOURCE}/${id}`)
      .header('etag', '"0"')
      .header('x-event-position', result.lastEventGlobalPosition.toString())
      .send(result.newState.record);
  });
  app.get<{ Params: { id: string } }>(`${RESOURCE}/:id`, async (request, reply) => {
    const { state } = await readStore().aggregateStream(streamOf(request.params.id), decider);
    if (state.status !== 'created') return reply.code(404).send({ message: 'not found' });
    return state.record;
  });

  // One append creates the schema (and the file, in WAL); then read the settings back the way
  // Emmett's connections see them.
  await handle(eventStore, randomUUID(), {
    type: 'CreateUserGroupType',
    data: { id: randomUUID(), code: 'PROBE', name: 'probe', actor: 'bench', now: new Date().toISOString() },
  });
  const probe = sqliteConnection({ fileName });
  const journal = await probe.querySingle<{ journal_mode: string }>('PRAGMA journal_mode');
  const sync = await probe.querySingle<{ synchronous: number }>('PRAGMA synchronous');
  const version = await probe.querySingle<{ v: string }>('SELECT sqlite_version() AS v');
  probe.close();
  const durability = {
    journalMode: (journal?.journal_mode ?? '?').toUpperCase(),
    synchronous: SYNCHRONOUS[sync?.synchronous ?? -1] ?? String(sync?.synchronous),
    sqlite: version?.v ?? '?',
  };

  closeWithParent(() => app.close(), dataDir);

  const url = await app.listen({ port: 0, host: '127.0.0.1' });
  console.log(`READY ${JSON.stringify({ url, token: '', dataDir, durability })}`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exit(1);
});
