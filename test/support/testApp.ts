// Builds the whole application on the embedded stores in a fresh temporary folder: real SQLite
// event log and read models, real projectors, real fastify. Tokens are signed with a test secret.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import { hs256Verifier, signHs256, type Caller } from '../../api/auth.ts';
import type { BlobStore, Clock, Document, DocumentRenderers, EventStore, MailSender, ReadStore } from '../../domain/ports.ts';
import { openDocumentRenderers } from '../../infra/documentRenderers.ts';
import { job } from '../../modules/jobs/domain/jobs.ts';
import { composeService, type ComposeOptions, type Role, type Service } from '../../api/compose.ts';
import { BLOBS_FILE, openEmbeddedStores } from '../../infra/embedded.ts';
import { openSqliteBlobStore } from '../../infra/sqlite/blobStore.ts';
import { openStores } from '../../infra/stores.ts';

export const TEST_SECRET = new TextEncoder().encode('test-secret-that-is-long-enough-for-hs256-0123456789');

/** The part of a response the tests read, from inject or from real HTTP alike. */
export type TestResponse = {
  statusCode: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: string;
  /** The body's bytes (documents). */
  rawPayload: Buffer;
  // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- same signature as inject's json<T>()
  json: <T = unknown>() => T;
};

export type CallOptions = {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  url: string;
  payload?: unknown;
  headers?: Record<string, string>;
  as?: keyof TestApp['tokens'] | null;
};

export type TestApp = {
  app: FastifyInstance;
  /** The composed service: its read models, jobs and scheduler, for tests that drive them. */
  service: Service;
  dataDir: string;
  tokens: { admin: string; editor: string; viewer: string; nobody: string };
  /** A request with the admin token unless `as` names another (null: none): through inject, or
   * over a real socket after `listen()`. */
  call(options: CallOptions): Promise<TestResponse>;
  /** Listens on a free loopback port; from then on `call` goes over real HTTP. */
  listen(): Promise<string>;
  close(options?: { keepData?: boolean }): Promise<void>;
};

/** A clock that moves only when told, so tests can place writes in time without sleeping. */
export function manualClock(start = new Date('2026-01-01T00:00:00.000Z')): Clock & { advance(ms: number): Date } {
  let now = start.getTime();
  return { now: () => new Date(now), advance: (ms) => new Date((now += ms)) };
}

export async function startTestApp(
  options: {
    dataDir?: string;
    clock?: Clock;
    role?: Role;
    stores?: { eventStore: EventStore; readStore: ReadStore; blobStore?: BlobStore };
    /** A MongoDB URL naming a database: the read models and blobs there (opened as the service
     * opens them, infra/stores.ts), the log embedded. */
    readModelsOn?: string;
    /** Where the app logs (default: nowhere). */
    logger?: FastifyServerOptions['logger'];
    /** False: tokens come from an OIDC issuer, so there is no login route. */
    login?: boolean;
    /** The document renderers (default: the ones `npm start` would use, started on first use). */
    documents?: DocumentRenderers;
    /** E-mail delivery (default: none, as without SMTP_URL). */
    mail?: MailSender;
    /** The rest of the ports and settings composeService takes (SMS, outbound client, topics). */
    extra?: Pick<ComposeOptions, 'sms' | 'outbound' | 'messaging' | 'settings' | 'manualScheduler' | 'exchange' | 'https' | 'directory'>;
  } = {},
): Promise<TestApp> {
  const dataDir = options.dataDir ?? mkdtempSync(join(tmpdir(), 'admin-test-'));
  // Tests that bring their own stores to watch them fail keep the embedded blob store.
  const stores =
    options.readModelsOn !== undefined
      ? await openStores({ DATA_DIR: dataDir, EVENTSTORE_URL: undefined, MONGODB_URL: options.readModelsOn })
      : options.stores === undefined
        ? openEmbeddedStores(dataDir)
        : { blobStore: options.stores.blobStore ?? openSqliteBlobStore(join(dataDir, BLOBS_FILE)), ...options.stores };
  const service = await composeService({
    ...stores,
    verifyToken: hs256Verifier(TEST_SECRET),
    ...(options.login === false ? {} : { issueToken: (caller: Caller) => signHs256(TEST_SECRET, caller) }),
    ...(options.logger === undefined ? {} : { logger: options.logger }),
    ...(options.clock === undefined ? {} : { clock: options.clock }),
    ...(options.role === undefined ? {} : { role: options.role }),
    documents: options.documents ?? openDocumentRenderers(),
    ...(options.mail === undefined ? {} : { mail: options.mail }),
    ...options.extra,
  });
  await service.startProjectors();
  const { app } = service;
  await app.ready();
  const sign = (sub: string, roles: string[]) => signHs256(TEST_SECRET, { sub, roles });
  const tokens = {
    admin: await sign('alice-admin', ['admin']),
    editor: await sign('eddie-editor', ['editor']),
    viewer: await sign('vera-viewer', ['viewer']),
    nobody: await sign('nobody', []),
  };
  let baseUrl: string | undefined;
  const call = async ({ as = 'admin', headers = {}, method, url, payload }: CallOptions): Promise<TestResponse> => {
    const allHeaders: Record<string, string> = { ...(as === null ? {} : { authorization: `Bearer ${tokens[as]}` }), ...headers };
    const body = payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload);
    if (body !== undefined && !Object.keys(allHeaders).some((h) => h.toLowerCase() === 'content-type'))
      allHeaders['content-type'] = 'application/json';
    if (baseUrl === undefined) return app.inject({ method, url, headers: allHeaders, ...(body === undefined ? {} : { payload: body }) });
    const res = await fetch(baseUrl + url, { method, headers: allHeaders, ...(body === undefined ? {} : { body }) });
    const rawPayload = Buffer.from(await res.arrayBuffer());
    const text = rawPayload.toString('utf8');
    return {
      statusCode: res.status,
      headers: Object.fromEntries(res.headers.entries()),
      body: text,
      rawPayload,
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-parameters -- same signature as inject's json<T>()
      json: <T>() => JSON.parse(text) as T,
    };
  };
  return {
    app,
    service,
    dataDir,
    tokens,
    call,
    listen: async () => {
      const url = await app.listen({ port: 0, host: '127.0.0.1' });
      baseUrl = url;
      return url;
    },
    close: async ({ keepData = false } = {}) => {
      await service.close();
      if (!keepData) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** An app with what users and groups need first: the user type PERSON (INDIVIDUAL) and the user
 * group type TEAM. */
export async function startIdentityApp(): Promise<TestApp> {
  const t = await startTestApp();
  await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } });
  return t;
}

/** Every live document of a read model (the generation serving it), in id order: for comparing a
 * model before and after a rebuild. */
export async function readModelDocuments(t: TestApp, model: string): Promise<Document[]> {
  const name = t.service.readModels.collectionOf(model);
  const docs: Document[] = [];
  for (let after: string | undefined; ;) {
    const page = await t.service.readStore.scan(name, { ...(after === undefined ? {} : { after }), limit: 500 });
    docs.push(...page);
    if (page.length < 500) return docs;
    after = page.at(-1)?.id;
  }
}

/** A job of a type the service runs (DIFF_APPLY, DIRECTORY_SYNC), written as the service writes its
 * own (a client may not): for tests that stage one as a process that ended would have left it.
 * `failed` ends it FAILED with that reason. */
export async function stageServiceJob(
  t: TestApp,
  fields: Record<string, unknown>,
  failed?: string,
): Promise<{ id: string; position: string }> {
  const jobs = t.service.runtime.service(job);
  const ctx = { actor: 'alice-admin', now: new Date(), newId: randomUUID };
  const created = await jobs.create({ startDate: '2026-03-01T10:00:00.000Z', status: 'IN_PROGRESS', ...fields }, ctx);
  const id = String(created.record?.id);
  const last = failed === undefined ? created : await jobs.execute(id, { type: 'Fail', reason: failed }, ctx);
  return { id, position: String(last.position) };
}
