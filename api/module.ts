// A module is one bounded part of the service, declared once: the resources it serves with the
// shared operation set, its read models, its own routes, and the work it does off the request
// path (reactors, schedules, workers). compose.ts builds every process from the list of modules
// (modules/index.ts) and its ROLE; nothing else lists resources or read models.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Runtime } from '../application/runtime.ts';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type {
  BlobStore,
  Clock,
  Directory,
  DocumentRenderers,
  EventStore,
  IdGenerator,
  MailSender,
  Messaging,
  OutboundClient,
  ReadStore,
  SmsSender,
} from '../domain/ports.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import type { ChangeGuard } from '../domain/shared/commandHandler.ts';
import type { Projection } from '../projections/projection.ts';
import type { Logger, ProcessorHandler } from '../workers/processor.ts';
import type { Reactor } from '../workers/reactor.ts';
import type { ReadModelJobs } from '../workers/readModelJobs.ts';
import type { ReadModelSet } from '../workers/readModels.ts';
import type { Schedule } from '../workers/scheduler.ts';
import type { FastifyServerOptions } from 'fastify';
import type { ServerOptions as HttpsServerOptions } from 'node:https';
import type { Operation } from '../domain/resource/defineResource.ts';
import type { WriteResult } from '../domain/resource/service.ts';
import type { ResourceRecord } from '../domain/resource/decider.ts';
import type { JsonObject } from '../domain/shared/json.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import type { StreamDeclaration } from '../domain/shared/streams.ts';
import type { z } from 'zod';
import type { Caller, Permission, TokenVerifier } from './auth.ts';

/** What a module's reactors, schedules and workers are built from. */
export type ModuleContext = {
  eventStore: EventStore;
  readStore: ReadStore;
  blobStore: BlobStore;
  clock: Clock;
  newId: IdGenerator;
  readModels: ReadModelSet;
  readModelJobs: ReadModelJobs;
  /** What this service holds in memory: the resource services, locks, folds (see Runtime). */
  runtime: Runtime;
  logger: Logger;
  /** Every resource the modules declare (a reactor following all of them). */
  resources: readonly ResourceDefinition[];
  /** E-mail delivery (SMTP_URL); absent: e-mail notifications fail saying so. */
  mail?: MailSender;
  /** SMS delivery (SMS_GATEWAY_URL); absent: SMS notifications fail saying so. */
  sms?: SmsSender;
  /** The one guarded client for outbound URLs (OUTBOUND_ALLOW). */
  outbound?: OutboundClient;
  /** Document renderers (the template worker renders notifications too). */
  documents?: DocumentRenderers;
  /** Topics (KAFKA_BROKERS); absent: no consumer or publisher runs. */
  messaging?: Messaging;
  /** The directory (LDAP_URL); absent: no directory login or sync. */
  directory?: Directory;
  /** Settings of the modules beyond the ports (from the configuration). */
  settings: ModuleSettings;
};

/** What the configuration tells modules. */
export type ModuleSettings = {
  notifications?: {
    /** Topic of notification triggers (KAFKA_TRIGGER_TOPIC), its dead letters and the outbound events. */
    triggerTopic?: string;
    deadLetterTopic?: string;
    eventsTopic?: string;
    /** Consumer group of the trigger topic. */
    groupId?: string;
    /** Base URLs of microservices by code, for relative evalNotificationUrl (MICROSERVICE_URLS). */
    microserviceUrls?: Readonly<Record<string, string>>;
  };
  /** The audit feed's live streams (api/modules/audit.ts). */
  audit?: {
    /** Streams (text/event-stream) open at once in this process (AUDIT_STREAMS_MAX); beyond: 503. */
    maxStreams?: number;
    /** Streams one caller (the token's subject) may hold open at once (AUDIT_STREAMS_PER_CALLER); beyond: 429. */
    maxStreamsPerCaller?: number;
    /** Longest silence on a stream before a heartbeat comment (AUDIT_HEARTBEAT_MS). */
    heartbeatMs?: number;
    /** How long a stream's socket may go without draining before it is cut (AUDIT_STALL_MS). */
    stallMs?: number;
  };
  /** Certificate login on the TLS listener (modules/identity/api/certificateLogin.ts). */
  identity?: {
    /** The listener asks for client certificates (TLS_CLIENT_CA): a request without a bearer token is the user its certificate names. */
    clientCertificates?: boolean;
    /** The certificate field whose value is the user's code (TLS_CLIENT_USER_FIELD; default CN). */
    certificateUserField?: string;
    /** The password policy (PASSWORD_MIN_LENGTH, PASSWORD_MAX_LENGTH, PASSWORD_REFUSE); absent: the defaults. */
    passwordPolicy?: {
      readonly minLength: number;
      readonly maxLength: number;
      /** Members of the user a password may not be (code, name, givenName, familyName, email). */
      readonly refuse: readonly string[];
    };
  };
  /** The directory sync (modules/directory/). */
  directory?: {
    /** How often the sync runs by itself (LDAP_SYNC_INTERVAL_MS); absent or 0: only when asked. */
    syncIntervalMs?: number;
    /** The user type of the users it creates (LDAP_SYNC_USER_TYPE). */
    userType?: string;
    /** Their authentication, LDAP or AD (LDAP_SYNC_AUTHENTICATION). */
    authentication?: string;
  };
  logs?: {
    /** Days after a "delete old logs" before the retention pass purges the deleted logs' events
     * (LOG_RETENTION_DAYS; default 30; 0: at the next tick). */
    retentionDays?: number;
  };
};

/** Something a worker process keeps running (a Kafka consumer, a dispatcher). */
export type Worker = { start(): Promise<void>; stop(): Promise<void> };

export type ServedResource = {
  definition: ResourceDefinition;
  /** Permissions and operations the module serves itself (default: read and write, all offered). */
  routes?: ResourceRouteOptions;
  /** False when one of the module's own projections serves its collection instead of the
   * record-per-document default (jobs: a job with its steps). */
  defaultReadModel?: false;
  /** The caller's standing over a record, checked on every change of one by whatever route
   * (ChangeGuard): a user's roles against the caller's. */
  guard?: (deps: AppDeps, request: FastifyRequest) => ChangeGuard;
};

export type Module = {
  readonly name: string;
  readonly resources?: readonly ServedResource[];
  /** Read models beyond each resource's default one. */
  readonly projections?: readonly Projection[];
  /** Routes beyond the shared operation set. */
  readonly routes?: (app: FastifyInstance, deps: AppDeps) => void;
  readonly reactors?: (ctx: ModuleContext) => readonly Reactor[];
  /** Other followers of the log, each with its own checkpoint (a publisher to a topic). */
  readonly handlers?: (ctx: ModuleContext) => readonly ProcessorHandler[];
  readonly schedules?: (ctx: ModuleContext) => readonly Schedule[];
  readonly workers?: (ctx: ModuleContext) => readonly Worker[];
  /** Who the caller of a request is, after its token is verified: a module may refuse it (401,
   * or 403 for this request) or restate its roles (a login session: the user as it is now).
   * `request` is absent when a caller is judged again outside a request (a long audit stream). */
  readonly authenticated?: (caller: Caller, deps: AppDeps, request?: FastifyRequest) => Promise<Caller>;
  /** Streams the module writes beside its records' (for the event catalogue). */
  readonly streams?: readonly StreamDeclaration[];
  /** Who the caller of a request without a bearer token is, from what else it presents (a TLS
   * client certificate): undefined when it presents nothing the module reads, a 401 thrown when
   * what it presents is refused. */
  readonly presented?: (request: FastifyRequest, deps: AppDeps) => Promise<Caller | undefined>;
  /** How a retry of a FAILED job of a type this module runs itself (ServiceJobTypes) resumes it,
   * by job type (POST /api/v1/jobs/{id}/retry). */
  readonly jobRetries?: Readonly<Record<string, (deps: AppDeps, id: string, ctx: CommandContext) => Promise<WriteResult>>>;
};

export type ResourceRouteOptions = {
  /** Who may read and who may write; default `read` and `write`. */
  permissions?: { read: Permission; write: Permission };
  /** Operations the module serves itself instead (a route that is not one of the shared set's). */
  except?: readonly Operation[];
  /** The shared create with a body of the module's own, holding members the record does not store
   * (a job's inline steps), and the work that makes the record and the rest from it. */
  create?: { body?: z.ZodType; run: (deps: AppDeps, body: unknown, ctx: CommandContext) => Promise<WriteResult> };
  /** Create and replace take a body of the module's own (a log names its type by `logType` or
   * `logTypeCode`), made the resource's input by `normalise` before anything else is judged. */
  write?: { body: z.ZodType; normalise: (deps: AppDeps, body: JsonObject) => Promise<JsonObject> };
  /** A record the caller may read that is nevertheless gone (a log a deletion removed): throws
   * its 404, on a get (as it was at `asOf`) and before a replace. */
  present?: (deps: AppDeps, record: ResourceRecord, asOf?: string) => Promise<void>;
  /** Replace runs inside it (logs: a lock that their "delete old logs" takes alone). */
  aroundReplace?: <T>(deps: AppDeps, replace: () => Promise<T>) => Promise<T>;
  /** Get answers the record expanded: query members of its own, the answer's schema, and the
   * answer made from the record the caller may read (its query read first: a 400 comes before
   * the record is looked up). */
  get?: {
    query: z.ZodRawShape;
    response: z.ZodType;
    /** Undefined when the query asks for nothing more: the record alone, a conditional read (304). */
    expand: (
      query: Readonly<Record<string, unknown>>,
    ) => ((deps: AppDeps, request: FastifyRequest, record: ResourceRecord) => Promise<JsonObject>) | undefined;
  };
  /** What an operation's documentation says beyond the shared text. */
  docs?: Partial<Record<Operation, OperationDocs>>;
};

/** An operation's own documentation: summary and description instead of the shared ones, error
 * statuses beside the shared ones, and the name of its record's path parameter (`idOrCode`
 * unless the contract names it otherwise). */
export type OperationDocs = { summary?: string; description?: string; errors?: readonly number[]; param?: string };

/** What the HTTP application is built from: ports, the clock, ids, the token verifier and the
 * modules. main.ts (and the tests) choose the adapters. */
export type AppDeps = {
  eventStore: EventStore;
  readStore: ReadStore;
  /** Large binary content; events hold only its BlobRef. */
  blobStore: BlobStore;
  readModels: ReadModelSet;
  readModelJobs: ReadModelJobs;
  /** What this service holds in memory: the resource services, locks, folds (see Runtime). */
  runtime: Runtime;
  clock: Clock;
  newId: IdGenerator;
  verifyToken: TokenVerifier;
  /** Signs a bearer token for a caller (the embedded HS256 secret); absent when tokens come from
   * an OIDC issuer, and then there is no login route. */
  issueToken?: (caller: Caller) => Promise<string>;
  modules: readonly Module[];
  /** Settings of the modules beyond the ports (from the configuration). */
  settings?: ModuleSettings;
  /** Chromium for PDF, LibreOffice for office formats; a format whose renderer is absent is a 503. */
  documents?: DocumentRenderers;
  /** The directory users of authentication LDAP and AD log in against (LDAP_URL). */
  directory?: Directory;
  /** False for processes whose ROLE serves no API (projector, worker): only /health and the docs. */
  serveApi?: boolean;
  logger?: FastifyServerOptions['logger'];
  bodyLimit?: number;
  trustProxy?: boolean | string;
  /** The server speaks HTTPS with these options (TLS_CERT, TLS_KEY, TLS_CLIENT_CA, TLS_CLIENT_CRL). */
  https?: HttpsServerOptions;
  /** Limits of export, import and diff apply (IMPORT_MAX_BYTES, IMPORT_FILE_MAX_BYTES, DIFF_APPLY_JOB_THRESHOLD, MASS_REMOVE_*). */
  exchange?: Partial<ExchangeSettings>;
};

export type ExchangeSettings = {
  /** The largest body of export/diff and diff/apply (read whole). */
  importMaxBytes: number;
  /** The largest import file (read as it arrives, one record at a time). */
  importFileMaxBytes: number;
  /** Entries of a diff above which its application runs as a job (202). */
  applyJobThreshold: number;
  /** REMOVE entries a save may apply without `allowMassRemove=true`: at most this percentage of
   * the records of the resource the caller may read (MASS_REMOVE_PERCENT), and always at least
   * `massRemoveFloor` (MASS_REMOVE_FLOOR), so that small data sets are not held back. */
  massRemovePercent: number;
  massRemoveFloor: number;
};

/** The app as modules declare routes on it: schemas are zod's. */
export const zodRoutes = (app: FastifyInstance) => app.withTypeProvider<ZodTypeProvider>();
export type ZodRoutes = ReturnType<typeof zodRoutes>;
