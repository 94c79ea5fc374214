// The embedded default's HS256 secret: generated once into DATA_DIR, readable only by its owner.

import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from './config.ts';

export function loadOrCreateSecret(dataDir: string): { secret: Uint8Array; created: boolean } {
  const file = join(dataDir, 'auth-secret');
  if (existsSync(file)) return { secret: new TextEncoder().encode(readFileSync(file, 'utf8').trim()), created: false };
  const value = randomBytes(48).toString('base64url');
  writeFileSync(file, value + '\n', { mode: 0o600, flag: 'wx' });
  return { secret: new TextEncoder().encode(value), created: true };
}

/** The HS256 secret of a configuration: AUTH_JWT_SECRET, else DATA_DIR's generated one (the folder
 * and the secret created when absent). One function, so that `npm start` and `npm run token` can
 * never disagree about which secret signs. */
export function hs256Secret(config: Pick<Config, 'AUTH_JWT_SECRET' | 'DATA_DIR'>): Uint8Array {
  if (config.AUTH_JWT_SECRET !== undefined) return new TextEncoder().encode(config.AUTH_JWT_SECRET);
  mkdirSync(config.DATA_DIR, { recursive: true });
  return loadOrCreateSecret(config.DATA_DIR).secret;
}
