// The preload: `node --max-semi-space-size=16 --import ./infra/telemetry/register.ts api/main.ts`
// (npm start, the image; api/nodeFlags.ts).
// It must run before fastify is loaded so that @fastify/otel sees the app being created. When the
// environment (or `.env`) asks for no telemetry it does nothing: the SDK is not even imported.

import { existsSync } from 'node:fs';
import { telemetryPlan, telemetryWanted } from './settings.ts';

// The service reads `.env` too (infra/config.ts); the process environment wins over the file.
if (existsSync('.env')) process.loadEnvFile('.env');

const plan = telemetryPlan(process.env);
if (telemetryWanted(plan)) {
  const { startTelemetry } = await import('./sdk.ts');
  startTelemetry(plan);
}
