// Runs the CLI as a child process, as a user would: `node cli/admin.ts …` on Node 24, its base URL
// and token from the environment.

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..', '..');
const node = join(root, 'node_modules', '.bin', 'node');

export type CliRun = { code: number | null; stdout: string; stderr: string };

export function runCli(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    // Not inherited: a developer's own ADMIN_URL/ADMIN_TOKEN must not leak into a test.
    const { ADMIN_URL: _url, ADMIN_TOKEN: _token, ...inherited } = process.env;
    const child = spawn(node, [join(root, 'cli', 'admin.ts'), ...args], { cwd: root, env: { ...inherited, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}

/** A loopback port nothing listens on (taken, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => { resolve(); }));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}
