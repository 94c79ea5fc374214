// Composition root: reads the configuration, opens the stores it names (infra/stores.ts), starts
// the projectors and the HTTP server. The only module of api/ that reaches infra/.

import { mkdirSync } from 'node:fs';
import { loadConfig, microserviceUrls, type Config } from '../infra/config.ts';
import { allowListFrom, createGuardedClient } from '../infra/http/guardedClient.ts';
import type { KafkaLogger } from '../infra/kafka/client.ts';
import { brokerList, kafkaMessaging } from '../infra/kafka/messaging.ts';
import { HttpSmsGateway } from '../infra/sms/httpSmsGateway.ts';
import { ldapDirectory, ldapSettingsOf } from '../infra/ldap/ldapDirectory.ts';
import { hs256Secret } from '../infra/authSecret.ts';
import { tlsServerOptions, watchClientCrl } from '../infra/tls.ts';
import { openStores } from '../infra/stores.ts';
import { openDocumentRenderers } from '../infra/documentRenderers.ts';
import { SmtpMailSender } from '../infra/mail/smtpSender.ts';
import { flushTelemetry, instrumentPorts, instrumentService, telemetryDescription } from '../infra/telemetry/instrument.ts';
import { composeService, type ComposeOptions } from './compose.ts';
import { hs256Tokens, oidcVerifier, signHs256 } from './auth.ts';
import type { ModuleSettings } from './module.ts';

/** E-mail, SMS, the guarded outbound client, Kafka and the notifications' settings, from the configuration. */
function notificationPorts(config: Config, brokers: readonly string[], logger: KafkaLogger) {
  return {
    ...(config.SMTP_URL === undefined
      ? {}
      : { mail: new SmtpMailSender({ url: config.SMTP_URL, ...(config.SMTP_FROM === undefined ? {} : { from: config.SMTP_FROM }) }) }),
    ...(config.SMS_GATEWAY_URL === undefined
      ? {}
      : {
          sms: new HttpSmsGateway({
            url: config.SMS_GATEWAY_URL,
            ...(config.SMS_GATEWAY_TOKEN === undefined ? {} : { token: config.SMS_GATEWAY_TOKEN }),
          }),
        }),
    outbound: createGuardedClient({
      allow: allowListFrom(config.OUTBOUND_ALLOW),
      timeoutMs: config.OUTBOUND_TIMEOUT_MS,
      maxBytes: config.OUTBOUND_MAX_BYTES,
    }),
    ...(brokers.length === 0
      ? {}
      : {
          messaging: kafkaMessaging({
            brokers,
            clientId: config.KAFKA_CLIENT_ID,
            logger,
            sessionTimeoutMs: config.KAFKA_SESSION_TIMEOUT_MS,
            heartbeatIntervalMs: config.KAFKA_HEARTBEAT_INTERVAL_MS,
            batchSize: config.KAFKA_CONSUMER_BATCH,
            idempotentProducer: config.KAFKA_IDEMPOTENT_PRODUCER,
          }),
        }),
    settings: {
      notifications: {
        triggerTopic: config.KAFKA_TRIGGER_TOPIC,
        deadLetterTopic: config.KAFKA_DEAD_LETTER_TOPIC,
        eventsTopic: config.KAFKA_EVENTS_TOPIC,
        groupId: config.KAFKA_GROUP_ID,
        microserviceUrls: microserviceUrls(config.MICROSERVICE_URLS),
      },
      logs: { retentionDays: config.LOG_RETENTION_DAYS },
      identity: {
        clientCertificates: config.TLS_CERT !== undefined && config.TLS_CLIENT_CA !== undefined,
        certificateUserField: config.TLS_CLIENT_USER_FIELD,
        passwordPolicy: { minLength: config.PASSWORD_MIN_LENGTH, maxLength: config.PASSWORD_MAX_LENGTH, refuse: config.PASSWORD_REFUSE },
      },
      directory: {
        syncIntervalMs: config.LDAP_SYNC_INTERVAL_MS,
        userType: config.LDAP_SYNC_USER_TYPE,
        authentication: config.LDAP_SYNC_AUTHENTICATION,
      },
    },
  };
}

/** The audit feed's settings beside the notifications'. */
function withAudit<T extends { settings: ModuleSettings }>(config: Config, ports: T): T {
  const audit = {
    maxStreams: config.AUDIT_STREAMS_MAX,
    maxStreamsPerCaller: config.AUDIT_STREAMS_PER_CALLER,
    heartbeatMs: config.AUDIT_HEARTBEAT_MS,
    stallMs: config.AUDIT_STALL_MS,
  };
  return { ...ports, settings: { ...ports.settings, audit } };
}

/** HTTPS on PORT when TLS_CERT is set, with client certificates when TLS_CLIENT_CA is (docs/pki.md):
 * the server's options, a watch of the CRL file, and the line that says so at start. */
function tlsListener(config: Config) {
  const https = tlsServerOptions(config);
  const crl = config.TLS_CLIENT_CRL;
  const clients =
    config.TLS_CLIENT_CA === undefined
      ? 'no client certificates (TLS_CLIENT_CA unset)'
      : `client certificates from ${config.TLS_CLIENT_CA} log in the PKI user named by ${config.TLS_CLIENT_USER_FIELD}, ${crl === undefined ? 'no CRL' : `revoked: ${crl}`}`;
  return {
    options: https === undefined ? {} : { https },
    watchCrl: (server: Parameters<typeof watchClientCrl>[0], log: Parameters<typeof watchClientCrl>[3]) =>
      https === undefined || crl === undefined ? () => undefined : watchClientCrl(server, https, crl, log),
    description: https === undefined ? 'TLS: off, plain HTTP (TLS_CERT unset)' : `TLS: HTTPS; ${clients}`,
  };
}

async function main(): Promise<void> {
  const config = loadConfig();
  if (config.ROLE !== 'all' && (config.EVENTSTORE_URL === undefined || config.MONGODB_URL === undefined)) {
    // The embedded log tells only its own process about appends, and SQLite lets one process
    // write at a time: processes split by role over one data folder would fold late and contend.
    throw new Error(
      `ROLE=${config.ROLE} needs the shared stores (EVENTSTORE_URL and MONGODB_URL): on the embedded stores one process runs everything (ROLE=all)`,
    );
  }
  mkdirSync(config.DATA_DIR, { recursive: true });

  let tokens: Pick<ComposeOptions, 'verifyToken' | 'issueToken'>;
  let adminToken: Promise<string> | undefined;
  if (config.AUTH_ISSUER !== undefined && config.AUTH_AUDIENCE !== undefined && config.AUTH_JWKS_URL !== undefined) {
    tokens = { verifyToken: oidcVerifier({ issuer: config.AUTH_ISSUER, audience: config.AUTH_AUDIENCE, jwksUrl: config.AUTH_JWKS_URL }) };
  } else {
    const secret = hs256Secret(config);
    tokens = hs256Tokens(secret);
    adminToken = signHs256(secret, { sub: 'admin', roles: ['admin'] });
  }

  // Read before the stores open: a wrong certificate file stops the start naming its variable.
  const tls = tlsListener(config);
  const stores = await openStores(config);
  const ldap = ldapSettingsOf(config);
  // The renderers log through the app's logger, which exists once the service is composed.
  const log: {
    to?: { info: (obj: object, msg: string) => void; warn: (obj: object, msg: string) => void; error: (obj: object, msg: string) => void };
  } = {};
  const documents = openDocumentRenderers(config, { info: (o, m) => log.to?.info(o, m), warn: (o, m) => log.to?.warn(o, m) });
  const logTo = { error: (o: object, m: string) => log.to?.error(o, m), warn: (o: object, m: string) => log.to?.warn(o, m) };
  const brokers = config.KAFKA_BROKERS === undefined ? [] : brokerList(config.KAFKA_BROKERS);
  // With traces running (the preload started them), the ports come wrapped in spans.
  const ports = instrumentPorts({
    eventStore: stores.eventStore,
    readStore: stores.readStore,
    blobStore: stores.blobStore,
    documents,
    ...withAudit(config, notificationPorts(config, brokers, logTo)),
  });
  const service = await composeService({
    ...ports,
    ...tokens,
    ...(ldap === undefined ? {} : { directory: ldapDirectory(ldap) }),
    logger: { level: config.LOG_LEVEL, redact: ['req.headers.authorization'] },
    bodyLimit: config.BODY_LIMIT_BYTES,
    exchange: {
      importMaxBytes: config.IMPORT_MAX_BYTES,
      importFileMaxBytes: config.IMPORT_FILE_MAX_BYTES,
      applyJobThreshold: config.DIFF_APPLY_JOB_THRESHOLD,
      massRemovePercent: config.MASS_REMOVE_PERCENT,
      massRemoveFloor: config.MASS_REMOVE_FLOOR,
    },
    trustProxy: config.TRUST_PROXY,
    ...tls.options,
    batchSize: config.PROJECTION_BATCH_SIZE,
    role: config.ROLE,
  });
  log.to = service.app.log;
  instrumentService(service);
  const unwatchCrl = tls.watchCrl(service.app.server, service.app.log);

  const shutdown = async (signal: string): Promise<void> => {
    service.app.log.info({ signal }, 'shutting down');
    unwatchCrl();
    await service.close();
    // The spans of the last requests and a last metric reading leave before the process does.
    await flushTelemetry().catch((error: unknown) => {
      service.app.log.warn({ err: error }, 'telemetry could not be flushed');
    });
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));

  const address = await service.app.listen({ port: config.PORT, host: config.HOST }).catch((error: unknown) => {
    if (error instanceof Error && 'code' in error && error.code === 'EADDRINUSE') {
      throw new Error(
        `${config.HOST}:${config.PORT} is already in use: start on another port, e.g. PORT=${config.PORT + 1} npm start (or set PORT in .env)`,
      );
    }
    throw error;
  });
  // After listen: a long catch-up shows as lag in /health/ready instead of delaying start.
  await service.startProjectors();
  console.log(`\nAdministration API listening on ${address}  (docs: ${address}/docs, OpenAPI: ${address}/openapi.json)`);
  console.log(`runtime: Node ${process.version}`);
  console.log(tls.description);
  for (const line of stores.description) console.log(line);
  console.log(telemetryDescription());
  console.log(
    ldap === undefined
      ? 'directory: none (LDAP_URL unset: users of authentication LDAP and AD cannot log in)'
      : `directory: ${ldap.url}, users under ${ldap.userBase}${config.LDAP_SYNC_INTERVAL_MS > 0 ? `, synchronised every ${String(config.LDAP_SYNC_INTERVAL_MS)} ms` : ''}`,
  );
  console.log(
    brokers.length === 0
      ? 'notification triggers: REST and SYSTEM rules (KAFKA_BROKERS unset: no Kafka)'
      : `notification triggers: REST, SYSTEM rules and Kafka topic ${config.KAFKA_TRIGGER_TOPIC} at ${brokers.join(',')} (dead letters: ${config.KAFKA_DEAD_LETTER_TOPIC}; events out: ${config.KAFKA_EVENTS_TOPIC})`,
  );
  if (adminToken) console.log(`Admin token (valid 12 h):\n  Authorization: Bearer ${await adminToken}\n`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
