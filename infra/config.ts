// Configuration from the environment (and `.env` when present), validated once at start.

import { existsSync } from 'node:fs';
import { z } from 'zod';
import { CertificateUserFields } from '../modules/identity/domain/certificate.ts';
import {
  PASSWORD_LENGTH_CEILING,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
  PasswordRefusals,
} from '../modules/identity/domain/password.ts';
import { parseAttributeMapping } from '../modules/directory/domain/attributes.ts';
import { isBalancedFilter } from '../modules/directory/domain/filter.ts';

const optionalUrl = z.preprocess((v) => (v === '' ? undefined : v), z.url().optional());
const optionalString = z.preprocess((v) => (v === '' ? undefined : v), z.string().optional());

type LdapConfig = {
  LDAP_URL?: string | undefined;
  LDAP_STARTTLS: boolean;
  LDAP_CA_FILE?: string | undefined;
  LDAP_BIND_DN?: string | undefined;
  LDAP_BIND_PASSWORD?: string | undefined;
  LDAP_USER_BASE?: string | undefined;
  LDAP_USER_FILTER: string;
  LDAP_USER_DN_TEMPLATE?: string | undefined;
  LDAP_GROUP_FILTER: string;
  LDAP_SYNC_FILTER?: string | undefined;
  LDAP_ATTRIBUTES?: string | undefined;
};

/** TLS to the directory: ldaps:// or StartTLS, with the CA file checking it. */
function transportProblems(url: string, c: LdapConfig): { path: string; message: string }[] {
  const ldaps = /^ldaps:/i.test(url);
  const problems: { path: string; message: string }[] = [];
  if (c.LDAP_STARTTLS && ldaps)
    problems.push({ path: 'LDAP_STARTTLS', message: 'LDAP_STARTTLS is for ldap:// URLs; ldaps:// is TLS already' });
  if (c.LDAP_CA_FILE === undefined) return problems;
  if (!c.LDAP_STARTTLS && !ldaps)
    problems.push({
      path: 'LDAP_CA_FILE',
      message:
        'LDAP_CA_FILE checks a TLS connection: use an ldaps:// LDAP_URL or LDAP_STARTTLS=true (a plain ldap:// one sends passwords in clear)',
    });
  if (!existsSync(c.LDAP_CA_FILE)) problems.push({ path: 'LDAP_CA_FILE', message: `LDAP_CA_FILE ${c.LDAP_CA_FILE} does not exist` });
  return problems;
}

/** What makes the directory's settings unusable, caught at start rather than at the first login. */
function ldapProblems(c: LdapConfig): { path: string; message: string }[] {
  if (c.LDAP_URL === undefined) return [];
  const problems: { path: string; message: string }[] = [];
  const filter = (path: string, value: string | undefined, placeholder?: string) => {
    if (value === undefined) return;
    if (!isBalancedFilter(value)) problems.push({ path, message: `${path} is not one parenthesised LDAP filter: ${value}` });
    if (placeholder !== undefined && !value.includes(placeholder)) problems.push({ path, message: `${path} must hold ${placeholder}` });
  };
  filter('LDAP_USER_FILTER', c.LDAP_USER_FILTER, '{username}');
  filter('LDAP_GROUP_FILTER', c.LDAP_GROUP_FILTER, '{dn}');
  filter('LDAP_SYNC_FILTER', c.LDAP_SYNC_FILTER);
  if (c.LDAP_USER_DN_TEMPLATE !== undefined && !c.LDAP_USER_DN_TEMPLATE.includes('{username}')) {
    problems.push({ path: 'LDAP_USER_DN_TEMPLATE', message: 'LDAP_USER_DN_TEMPLATE must hold {username}' });
  }
  if (c.LDAP_USER_BASE === undefined)
    problems.push({
      path: 'LDAP_USER_BASE',
      message: 'LDAP_USER_BASE is required with LDAP_URL (the login search and the sync read under it)',
    });
  // A DN without a password is an unauthenticated bind: anonymous at best, never the service account.
  if (c.LDAP_BIND_DN !== undefined && c.LDAP_BIND_PASSWORD === undefined)
    problems.push({ path: 'LDAP_BIND_PASSWORD', message: 'LDAP_BIND_DN needs LDAP_BIND_PASSWORD' });
  problems.push(...transportProblems(c.LDAP_URL, c));
  const mapping = parseAttributeMapping(c.LDAP_ATTRIBUTES);
  if ('problems' in mapping) for (const p of mapping.problems) problems.push({ path: 'LDAP_ATTRIBUTES', message: `LDAP_ATTRIBUTES: ${p}` });
  return problems;
}

export const ConfigSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8080),
    HOST: z.string().min(1).default('127.0.0.1'),
    DATA_DIR: z.string().min(1).default('./data'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    AUTH_JWT_SECRET: optionalString.pipe(z.string().min(32, { error: 'AUTH_JWT_SECRET must be at least 32 characters' }).optional()),
    AUTH_ISSUER: optionalString,
    AUTH_AUDIENCE: optionalString,
    AUTH_JWKS_URL: optionalUrl,
    EVENTSTORE_URL: optionalString,
    // KurrentDB's MaxAppendSize as the server is configured (1 MiB up to 25.1, 256 MiB from 26.0):
    // a larger change is refused with a 413 before it is sent.
    EVENTSTORE_MAX_APPEND_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .default(1024 * 1024),
    MONGODB_URL: optionalString,
    KAFKA_BROKERS: optionalString,
    // Topics and consumer group of notifications over Kafka (when KAFKA_BROKERS is set).
    KAFKA_CLIENT_ID: z.string().min(1).default('admin-service'),
    KAFKA_TRIGGER_TOPIC: z.string().min(1).default('notification-triggers'),
    KAFKA_DEAD_LETTER_TOPIC: z.string().min(1).default('notification-triggers.dead-letter'),
    KAFKA_EVENTS_TOPIC: z.string().min(1).default('notification-events'),
    KAFKA_GROUP_ID: z.string().min(1).default('notification-triggers'),
    // How long the group waits for a silent member (a killed process) before it gives its
    // partitions to the others, and how often a member says it is alive.
    KAFKA_SESSION_TIMEOUT_MS: z.coerce.number().int().min(1000).max(3_600_000).default(30_000),
    KAFKA_HEARTBEAT_INTERVAL_MS: z.coerce.number().int().min(100).max(600_000).default(3000),
    // The most trigger messages of a fetched batch taken into the log together (one transaction of
    // the embedded log); after a failure, the rest of the slice is taken again. A slice holds the
    // event loop while its triggers are decided (tens of µs each): lower it to bound that.
    KAFKA_CONSUMER_BATCH: z.coerce.number().int().min(1).max(10_000).default(5000),
    // The events topic's producer: idempotent (the broker numbers its batches, so a retry is neither
    // doubled nor reordered). `false` only for a broker that grants no producer ids (librdkafka's
    // mock cluster, which the tests fall back to without Java).
    KAFKA_IDEMPOTENT_PRODUCER: z
      .enum(['true', 'false'])
      .default('true')
      .transform((v) => v === 'true'),
    // SMS delivery: a JSON POST per SMS to this gateway (infra/sms/httpSmsGateway.ts), with the
    // token as a bearer when set.
    SMS_GATEWAY_URL: optionalUrl,
    SMS_GATEWAY_TOKEN: optionalString,
    // Outbound URLs (evalNotificationUrl) may reach loopback, private and link-local addresses only
    // when allow-listed here: CIDRs, addresses or host names, comma-separated.
    OUTBOUND_ALLOW: optionalString,
    OUTBOUND_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(5000),
    OUTBOUND_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024)
      .default(1024 * 1024),
    // Base URLs of microservices, for a rule's relative evalNotificationUrl: `code=url`, comma-separated.
    MICROSERVICE_URLS: optionalString.pipe(
      z
        .string()
        .regex(/^\s*[^=,\s]+=[^,\s]+\s*(,\s*[^=,\s]+=[^,\s]+\s*)*$/, { error: 'MICROSERVICE_URLS is code=url pairs, comma-separated' })
        .optional(),
    ),
    SMTP_URL: optionalString,
    // The sender of notification e-mails when neither the template nor the notification names one.
    SMTP_FROM: optionalString,
    CHROME_PATH: optionalString,
    // The document renderers: Chromium pages (and LibreOffice documents) at once, renders that may
    // wait for one (beyond: 503 with Retry-After), the time limit of one render, renders before a
    // renderer process is replaced by a fresh one.
    SOFFICE_PATH: optionalString,
    // Time limit of one template evaluation over data (handlebars, JSONata, a DOCX or XLSX filled),
    // in a worker thread that is stopped past it.
    TEMPLATE_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(5000),
    // Template jobs one caller (token `sub`) may have waiting or running at once (beyond: 429); a
    // caller runs on one of the two template threads at most, so another's job never waits for it.
    TEMPLATE_JOBS_PER_CALLER: z.coerce.number().int().min(1).max(1000).default(2),
    RENDER_SLOTS: z.coerce.number().int().min(1).max(32).default(2),
    RENDER_QUEUE_LIMIT: z.coerce.number().int().min(0).max(10_000).default(32),
    RENDER_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(15_000),
    RENDER_RECYCLE_AFTER: z.coerce.number().int().min(1).default(500),
    ROLE: z.enum(['all', 'api', 'projector', 'worker']).default('all'),
    // Days after a "delete old logs" before the retention pass removes the deleted logs' events for good.
    LOG_RETENTION_DAYS: z.coerce.number().min(0).max(36_500).default(30),
    PROJECTION_BATCH_SIZE: z.coerce.number().int().min(1).max(100_000).default(1000),
    // Live audit streams (text/event-stream): open at once in this process (beyond: 503), held by
    // one caller (beyond: 429), and the longest silence before a heartbeat comment.
    AUDIT_STREAMS_MAX: z.coerce.number().int().min(0).max(10_000).default(32),
    AUDIT_STREAMS_PER_CALLER: z.coerce.number().int().min(0).max(10_000).default(4),
    AUDIT_HEARTBEAT_MS: z.coerce.number().int().min(1000).max(300_000).default(15_000),
    // A live audit stream whose client has not taken its data for this long is cut (it holds a slot).
    AUDIT_STALL_MS: z.coerce.number().int().min(1000).max(3_600_000).default(60_000),
    BODY_LIMIT_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .default(6 * 1024 * 1024),
    // Export, import and diff apply: the largest import file (and body of export/diff and
    // diff/apply; 413 beyond), and the entries of a diff above which applying it runs as a job.
    IMPORT_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(1024 * 1024 * 1024)
      .default(32 * 1024 * 1024),
    IMPORT_FILE_MAX_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(64 * 1024 * 1024 * 1024)
      .default(4 * 1024 * 1024 * 1024),
    DIFF_APPLY_JOB_THRESHOLD: z.coerce.number().int().min(1).max(10_000_000).default(1000),
    // A save (import?save=true, diff/apply) deleting more than this percentage of the records the
    // caller may read, and more than the floor, needs allowMassRemove=true.
    MASS_REMOVE_PERCENT: z.coerce.number().min(0).max(100).default(10),
    MASS_REMOVE_FLOOR: z.coerce.number().int().min(0).max(1_000_000_000).default(10),
    // The directory users of authentication LDAP and AD log in against and are synchronised from
    // (docs/directory.md). LDAP_URL unset: no directory.
    LDAP_URL: optionalString.pipe(
      z
        .string()
        .regex(/^ldaps?:\/\/[^\s/]+\/?$/i, { error: 'LDAP_URL is ldap://host[:port] or ldaps://host[:port]' })
        .optional(),
    ),
    LDAP_STARTTLS: z
      .enum(['true', 'false'])
      .default('false')
      .transform((v) => v === 'true'),
    LDAP_CA_FILE: optionalString,
    LDAP_BIND_DN: optionalString,
    LDAP_BIND_PASSWORD: optionalString,
    LDAP_USER_BASE: optionalString,
    LDAP_USER_FILTER: z.string().default('(uid={username})'),
    LDAP_USER_DN_TEMPLATE: optionalString,
    LDAP_GROUP_BASE: optionalString,
    LDAP_GROUP_FILTER: z.string().default('(member={dn})'),
    LDAP_ATTRIBUTES: optionalString,
    LDAP_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(5000),
    // Entries one search may answer, and values one attribute (memberOf) may hold; beyond: refused.
    LDAP_SIZE_LIMIT: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
    // The sync: the people it reads (default the user filter with {username} as *), how often it
    // runs by itself (0: only when asked), and the type and authentication of the users it creates.
    LDAP_SYNC_FILTER: optionalString,
    LDAP_SYNC_INTERVAL_MS: z.coerce
      .number()
      .int()
      .min(0)
      .max(7 * 24 * 3_600_000)
      .default(0),
    LDAP_SYNC_USER_TYPE: z.enum(['INDIVIDUAL', 'WORK_GROUP', 'ORGANIZATION', 'EXTERNAL']).default('INDIVIDUAL'),
    LDAP_SYNC_AUTHENTICATION: z.enum(['LDAP', 'AD']).default('LDAP'),
    // The password policy (modules/identity/domain/password.ts): lengths in characters, and the
    // members of the user a password may not be (comma-separated; empty: none).
    PASSWORD_MIN_LENGTH: z.coerce.number().int().min(1).max(PASSWORD_LENGTH_CEILING).default(PASSWORD_MIN_LENGTH),
    PASSWORD_MAX_LENGTH: z.coerce.number().int().min(1).max(PASSWORD_LENGTH_CEILING).default(PASSWORD_MAX_LENGTH),
    PASSWORD_REFUSE: z
      .string()
      .default(PasswordRefusals.join(','))
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== ''),
      )
      .pipe(z.array(z.enum(PasswordRefusals))),
    // Behind a reverse proxy: which X-Forwarded-For hops to believe for the client's address (the
    // login limit per address): `true` (every hop) or the proxies' addresses and CIDRs, comma-separated.
    // HTTPS on PORT instead of HTTP (docs/pki.md): the server's certificate chain and key (PEM
    // files). With TLS_CLIENT_CA it asks for client certificates: one chained to that CA (PEM bundle),
    // not revoked in TLS_CLIENT_CRL (PEM; every CA of the chain), logs in the PKI user whose code is
    // the certificate's TLS_CLIENT_USER_FIELD.
    TLS_CERT: optionalString,
    TLS_KEY: optionalString,
    TLS_CLIENT_CA: optionalString,
    TLS_CLIENT_CRL: optionalString,
    TLS_CLIENT_USER_FIELD: z.enum(CertificateUserFields).default('CN'),
    TRUST_PROXY: optionalString.transform((v) => (v === undefined || v === 'false' ? false : v === 'true' ? true : v)),
  })
  .superRefine((c, ctx) => {
    for (const problem of ldapProblems(c)) ctx.addIssue({ code: 'custom', message: problem.message, path: [problem.path] });
    const oidc = [c.AUTH_ISSUER, c.AUTH_AUDIENCE, c.AUTH_JWKS_URL].filter((v) => v !== undefined).length;
    if (oidc !== 0 && oidc !== 3) {
      ctx.addIssue({ code: 'custom', message: 'AUTH_ISSUER, AUTH_AUDIENCE and AUTH_JWKS_URL go together', path: ['AUTH_ISSUER'] });
    }
    if (c.PASSWORD_MIN_LENGTH > c.PASSWORD_MAX_LENGTH)
      ctx.addIssue({ code: 'custom', message: 'PASSWORD_MIN_LENGTH must not be above PASSWORD_MAX_LENGTH', path: ['PASSWORD_MIN_LENGTH'] });
    if ((c.TLS_CERT === undefined) !== (c.TLS_KEY === undefined))
      ctx.addIssue({ code: 'custom', message: 'TLS_CERT and TLS_KEY go together', path: ['TLS_CERT'] });
    if (c.TLS_CLIENT_CA !== undefined && c.TLS_CERT === undefined)
      ctx.addIssue({
        code: 'custom',
        message: 'TLS_CLIENT_CA needs TLS_CERT and TLS_KEY (client certificates are asked for over TLS)',
        path: ['TLS_CLIENT_CA'],
      });
    if (c.TLS_CLIENT_CRL !== undefined && c.TLS_CLIENT_CA === undefined)
      ctx.addIssue({ code: 'custom', message: 'TLS_CLIENT_CRL needs TLS_CLIENT_CA', path: ['TLS_CLIENT_CRL'] });
  });
export type Config = z.infer<typeof ConfigSchema>;

export function loadConfig(env: NodeJS.ProcessEnv = process.env, envFile = '.env'): Config {
  if (existsSync(envFile)) process.loadEnvFile(envFile);
  const result = ConfigSchema.safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n');
    throw new Error(`Invalid configuration:\n${lines}`);
  }
  return result.data;
}

/** MICROSERVICE_URLS as a map of code to base URL. */
export const microserviceUrls = (value: string | undefined): Record<string, string> =>
  Object.fromEntries(
    (value ?? '').split(',').flatMap((pair) => {
      const at = pair.indexOf('=');
      return at <= 0 ? [] : [[pair.slice(0, at).trim(), pair.slice(at + 1).trim()]];
    }),
  );
