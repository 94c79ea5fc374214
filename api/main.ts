// Composition root: reads the configuration, opens the stores, starts the projectors and the HTTP
// server. The only module that knows which adapters run.

import { mkdirSync } from 'node:fs';
import { loadConfig } from '../infra/config.ts';
import { loadOrCreateSecret } from '../infra/authSecret.ts';
import { openEmbeddedStores } from '../infra/embedded.ts';
import { composeService } from './compose.ts';
import { hs256Verifier, oidcVerifier, signHs256, type TokenVerifier } from './auth.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  for (const [name, value] of [['EVENTSTORE_URL', config.EVENTSTORE_URL], ['MONGODB_URL', config.MONGODB_URL]] as const) {
    if (value !== undefined) throw new Error(`${name} is set, but the production adapters are not part of this build yet (issue #3); unset it to run on the embedded stores`);
  }
  if (config.ROLE !== 'all') throw new Error(`ROLE=${config.ROLE} needs the production stores; the embedded stores run as ROLE=all`);
  mkdirSync(config.DATA_DIR, { recursive: true });

  let verifyToken: TokenVerifier;
  let adminToken: Promise<string> | undefined;
  if (config.AUTH_ISSUER !== undefined && config.AUTH_AUDIENCE !== undefined && config.AUTH_JWKS_URL !== undefined) {
    verifyToken = oidcVerifier({ issuer: config.AUTH_ISSUER, audience: config.AUTH_AUDIENCE, jwksUrl: config.AUTH_JWKS_URL });
  } else {
    const secret = config.AUTH_JWT_SECRET === undefined ? loadOrCreateSecret(config.DATA_DIR).secret : new TextEncoder().encode(config.AUTH_JWT_SECRET);
    verifyToken = hs256Verifier(secret);
    adminToken = signHs256(secret, { sub: 'admin', roles: ['admin'] });
  }

  const service = await composeService({
    ...openEmbeddedStores(config.DATA_DIR),
    verifyToken,
    logger: { level: config.LOG_LEVEL, redact: ['req.headers.authorization'] },
    bodyLimit: config.BODY_LIMIT_BYTES,
    batchSize: config.PROJECTION_BATCH_SIZE,
  });

  const shutdown = async (signal: string): Promise<void> => {
    service.app.log.info({ signal }, 'shutting down');
    await service.close();
    process.exit(0);
  };
  process.once('SIGINT', () => void shutdown('SIGINT'));
  process.once('SIGTERM', () => void shutdown('SIGTERM'));

  const address = await service.app.listen({ port: config.PORT, host: config.HOST });
  // After listen: a long catch-up shows as lag in /health/ready instead of delaying start.
  await service.startProjectors();
  console.log(`\nAdministration API listening on ${address}  (docs: ${address}/docs, OpenAPI: ${address}/openapi.json)`);
  console.log(`Data folder: ${config.DATA_DIR}`);
  if (adminToken) console.log(`Admin token (valid 12 h):\n  Authorization: Bearer ${await adminToken}\n`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  process.exit(1);
});
