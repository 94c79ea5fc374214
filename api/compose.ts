// Wires a running service from opened stores and the list of modules: the read models, the
// reactors, the scheduler and the workers its ROLE runs, the HTTP app, and one close() for all of
// it; on the way, the temporary folders of imports whose process ended are deleted. Which stores
// to open is the caller's choice (main.ts, the tests, the benchmark); this module knows no adapter.
//
//   ROLE=all        everything (the default, and the only role of the embedded stores)
//   ROLE=api        the HTTP API; follows the read models' checkpoints (for minPosition) but
//                   folds nothing, runs no reactor, schedule or job
//   ROLE=projector  folds the read models (one instance at a time per model, by lease)
//   ROLE=worker     reactors, the scheduler, jobs and the modules' workers

import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyServerOptions } from 'fastify';
import type {
  BlobStore,
  Clock,
  Directory,
  DocumentRenderers,
  EventStore,
  MailSender,
  Messaging,
  OutboundClient,
  ReadStore,
  SmsSender,
} from '../domain/ports.ts';
import { resourceProjection } from '../projections/resourceProjection.ts';
import { LogProcessor } from '../workers/processor.ts';
import { reactorHandler } from '../workers/reactor.ts';
import { ReadModelJobs } from '../workers/readModelJobs.ts';
import { ReadModelSet } from '../workers/readModels.ts';
import { Scheduler, wakeHandler } from '../workers/scheduler.ts';
import { Runtime } from '../application/runtime.ts';
import { buildApp } from './app.ts';
import type { Caller, TokenVerifier } from './auth.ts';
import { sweepStaleImports } from './importDiff.ts';
import type { AppDeps, Module, ModuleContext, ModuleSettings, Worker } from './module.ts';
import { readModelCount, readModelLookup } from './services.ts';
import { modules as allModules } from '../modules/index.ts';

export const Roles = ['all', 'api', 'projector', 'worker'] as const;
export type Role = (typeof Roles)[number];

/** How long a shutdown lets requests in progress finish before it closes their connections. */
const SHUTDOWN_GRACE_MS = 10_000;

export type ComposeOptions = {
  eventStore: EventStore;
  readStore: ReadStore;
  blobStore: BlobStore;
  verifyToken: TokenVerifier;
  /** Signs login tokens (embedded HS256); absent with an OIDC issuer. */
  issueToken?: (caller: Caller) => Promise<string>;
  modules?: readonly Module[];
  role?: Role;
  clock?: Clock;
  logger?: FastifyServerOptions['logger'];
  bodyLimit?: number;
  /** Limits of export, import and diff apply. */
  exchange?: NonNullable<AppDeps['exchange']>;
  /** fastify's trustProxy: which X-Forwarded-For hops give the client's address. */
  trustProxy?: boolean | string;
  /** HTTPS, and client certificates when it asks for them (TLS_*). */
  https?: NonNullable<AppDeps['https']>;
  /** The document renderers (closed with the service). */
  documents?: DocumentRenderers;
  /** E-mail delivery for notifications (closed with the service). */
  mail?: MailSender;
  /** SMS delivery for notifications (closed with the service). */
  sms?: SmsSender;
  /** The guarded client for outbound URLs. */
  outbound?: OutboundClient;
  /** Topics (closed with the service). */
  messaging?: Messaging;
  /** The directory (LDAP_URL; closed with the service). */
  directory?: Directory;
  settings?: ModuleSettings;
  batchSize?: number;
  /** How often the scheduler looks for due work (ms); tests drive it with `scheduler.tick()`. */
  schedulerIntervalMs?: number;
  /** The scheduler runs only when a test calls `scheduler.tick()`: neither the interval nor the
   * log wakes it (tests of races between due work and clients). */
  manualScheduler?: boolean;
};

export type Service = {
  app: FastifyInstance;
  /** The read store the read models live in (for tools and tests that read them whole). */
  readStore: ReadStore;
  readModels: ReadModelSet;
  readModelJobs: ReadModelJobs;
  scheduler: Scheduler;
  /** What the service holds in memory (its resource services, locks, folds). */
  runtime: Runtime;
  /** Starts the read models, reactors, scheduler and workers of the role (after listen, so a long
   * catch-up shows as lag instead of delaying start). */
  startProjectors: () => Promise<void>;
  /** Stops HTTP, then the background work, then closes the stores. */
  close: () => Promise<void>;
};

/** Every read model of the modules: each resource's default one and the modules' own. */
export function projectionsOf(modules: readonly Module[]) {
  return modules.flatMap((m) => [
    ...(m.resources ?? []).filter((r) => r.defaultReadModel !== false).map((r) => resourceProjection(r.definition)),
    ...(m.projections ?? []),
  ]);
}

/** What the HTTP app takes of the options when they are given. */
const httpOptions = (o: ComposeOptions) =>
  Object.fromEntries(
    (['issueToken', 'logger', 'bodyLimit', 'trustProxy', 'https', 'documents', 'exchange', 'directory'] as const).flatMap((k) =>
      o[k] === undefined ? [] : [[k, o[k]]],
    ),
  ) as Pick<ComposeOptions, 'issueToken' | 'logger' | 'bodyLimit' | 'trustProxy' | 'https' | 'documents' | 'exchange' | 'directory'>;

export async function composeService(options: ComposeOptions): Promise<Service> {
  const { eventStore, readStore, blobStore } = options;
  const modules = options.modules ?? allModules;
  const role = options.role ?? 'all';
  const folds = role === 'all' || role === 'projector';
  const works = role === 'all' || role === 'worker';
  // Background work logs through the app's logger, which exists only once the app is built.
  const log: { to?: { error: (obj: object, msg: string) => void } } = {};
  const logger = { error: (obj: object, msg: string) => log.to?.error(obj, msg) };
  const clock = options.clock ?? { now: () => new Date() };
  const processorOptions = { logger, now: () => clock.now(), ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }) };
  const readModels = new ReadModelSet(projectionsOf(modules), eventStore, readStore, { ...processorOptions, followOnly: !folds });
  const catalogs = new Map(
    modules
      .flatMap((m) => m.resources ?? [])
      .map(({ definition: d }) => [d.collection, { columns: d.columns, defaultSort: d.defaultSort }] as const),
  );
  const resources = modules.flatMap((m) => m.resources ?? []).map((r) => r.definition);
  const lookupDeps = { eventStore, readStore, readModels };
  // Everything this service holds in memory, handed on as an argument from here.
  const runtime = new Runtime({ eventStore, resources, lookup: readModelLookup(lookupDeps), count: readModelCount(lookupDeps) });
  const readModelJobs = new ReadModelJobs({ eventStore, readStore, readModels, runtime, clock, logger, runs: works, catalogs });
  const ports = Object.fromEntries(
    (['mail', 'sms', 'outbound', 'documents', 'messaging', 'directory'] as const).flatMap((k) =>
      options[k] === undefined ? [] : [[k, options[k]]],
    ),
  );
  const context: ModuleContext = {
    eventStore,
    readStore,
    blobStore,
    clock,
    newId: randomUUID,
    readModels,
    readModelJobs,
    runtime,
    logger,
    resources,
    settings: options.settings ?? {},
    ...ports,
  };
  const handlers = works
    ? [
        ...modules.flatMap((m) => m.reactors?.(context) ?? []).map((r) => reactorHandler(r, readStore)),
        ...modules.flatMap((m) => m.handlers?.(context) ?? []),
      ]
    : [];
  const reactors = handlers.map((h) => new LogProcessor(h, eventStore, readStore, processorOptions));
  const schedules = works ? [readModelJobs.schedule(), ...modules.flatMap((m) => m.schedules?.(context) ?? [])] : [];
  const scheduler = new Scheduler(schedules, readStore, {
    clock,
    logger,
    ...(options.schedulerIntervalMs === undefined ? {} : { intervalMs: options.schedulerIntervalMs }),
  });
  // Schedules whose work falls due when records change are woken by the log, not only the interval.
  const wakers = schedules
    .flatMap((s) => wakeHandler(s, scheduler, readModels, readStore) ?? [])
    .map((h) => new LogProcessor(h, eventStore, readStore, processorOptions));
  const workers: Worker[] = works ? modules.flatMap((m) => m.workers?.(context) ?? []) : [];
  const app = await buildApp({
    eventStore,
    readStore,
    blobStore,
    readModels,
    readModelJobs,
    runtime,
    clock,
    newId: randomUUID,
    verifyToken: options.verifyToken,
    modules,
    settings: options.settings ?? {},
    serveApi: role === 'all' || role === 'api',
    ...httpOptions(options),
  });
  log.to = app.log;
  const swept = await sweepStaleImports();
  if (swept.length > 0) app.log.info({ folders: swept }, 'removed the temporary folders of imports whose process ended');
  return {
    app,
    readStore,
    readModels,
    readModelJobs,
    scheduler,
    runtime,
    startProjectors: async () => {
      await readModels.start();
      await Promise.all([...reactors, ...wakers].map((r) => r.start()));
      for (const w of workers) await w.start();
      if (options.manualScheduler !== true) scheduler.start();
    },
    close: async () => {
      // fastify's close waits for every open connection, and Node counts one that has not sent a
      // request yet (an HTTP client's spare connection, a slow client) as busy for ever: past the
      // grace period every connection still open is cut, so a shutdown always ends.
      const cut = setTimeout(() => {
        app.server.closeAllConnections();
      }, SHUTDOWN_GRACE_MS);
      cut.unref();
      await app.close();
      clearTimeout(cut);
      await scheduler.stop();
      await readModelJobs.stop();
      for (const w of workers) await w.stop();
      await Promise.all([...reactors, ...wakers].map((r) => r.stop()));
      await readModels.stop();
      await Promise.all([
        options.documents?.templates?.close(),
        options.documents?.pdf?.close(),
        options.documents?.office?.close(),
        options.mail?.close(),
        options.sms?.close(),
        options.messaging?.close(),
        options.directory?.close(),
      ]);
      await eventStore.close();
      await readStore.close();
      await blobStore.close();
    },
  };
}
