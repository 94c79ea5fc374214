// The real service as `npm start` runs it (its V8 flags and the telemetry preload, then api/main.ts), in a child
// process, for tests that kill it, signal it or read what it prints.

import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { SERVICE_NODE_ARGS } from '../../api/nodeFlags.ts';

const root = join(import.meta.dirname, '..', '..');

export type ServiceProcess = { child: ChildProcess; url: string; token: string; output: () => string };

/** The environment of `npm start` on its default configuration (embedded stores, the HS256 secret
 * in DATA_DIR, ROLE=all, no Kafka, no telemetry), whatever the runner's own settings or a `.env`
 * say (an empty value is unset to the service; `.env` never overrides a variable that is set). */
export function defaultServiceEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  const defaults = {
    AUTH_JWT_SECRET: '',
    AUTH_ISSUER: '',
    AUTH_AUDIENCE: '',
    AUTH_JWKS_URL: '',
    EVENTSTORE_URL: '',
    MONGODB_URL: '',
    KAFKA_BROKERS: '',
    ROLE: 'all',
    PORT: '0',
    LOG_LEVEL: 'warn',
  };
  return { ...inherited, ...defaults, ...env };
}

/** Starts the service with exactly this environment and waits for its banner (URL and admin
 * token); a service that exits or does not start within a minute fails with what it printed. */
export async function startServiceProcess(env: NodeJS.ProcessEnv): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...SERVICE_NODE_ARGS, 'api/main.ts'], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString('utf8')));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const url = /listening on (https?:\/\/\S+)/.exec(out)?.[1];
    const token = /Authorization: Bearer (\S+)/.exec(out)?.[1];
    if (url !== undefined && token !== undefined) return { child, url, token, output: () => out };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`the service did not start:\n${out}\n${err}`);
}

/** Sends the signal and waits until the process has exited. */
export async function stopServiceProcess(service: ServiceProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return;
  const exited = new Promise((resolve) => service.child.once('exit', resolve));
  service.child.kill(signal);
  await exited;
}
