// The embedded default's HS256 secret: generated once into DATA_DIR, readable only by its owner.

import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export function loadOrCreateSecret(dataDir: string): { secret: Uint8Array; created: boolean } {
  const file = join(dataDir, 'auth-secret');
  if (existsSync(file)) return { secret: new TextEncoder().encode(readFileSync(file, 'utf8').trim()), created: false };
  const value = randomBytes(48).toString('base64url');
  writeFileSync(file, value + '\n', { mode: 0o600, flag: 'wx' });
  return { secret: new TextEncoder().encode(value), created: true };
}
