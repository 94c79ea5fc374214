// `npm run token`: the real CLI spawned against a temporary DATA_DIR, its printed token verified as
// the service would verify it.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hs256Verifier } from '../../api/auth.ts';

const CLI = join(import.meta.dirname, '../../api/cli.ts');
type Run = { code: number | null; stdout: string; stderr: string };

let root: string;
beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'admin-cli-'));
});
afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

let runs = 0;
/** A fresh DATA_DIR (not created yet) under the temporary root, for one test. */
const freshDataDir = () => join(root, `data-${String(++runs)}`);

/** The CLI in the temporary folder (so no .env of the checkout is read), without the caller's AUTH_*. */
function cli(args: readonly string[], env: Record<string, string>): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('AUTH_') && k !== 'DATA_DIR'));
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: root, env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      resolve({ code, stdout, stderr });
    });
  });
}

const secretIn = (dataDir: string) => new TextEncoder().encode(readFileSync(join(dataDir, 'auth-secret'), 'utf8').trim());

/** The one line on stdout, checked to be a token and nothing else. */
function printedToken(run: Run): string {
  expect(run.code, run.stderr).toBe(0);
  expect(run.stdout).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\n$/);
  return run.stdout.trim();
}

describe('npm run token', () => {
  it("signs with the data folder's secret, creating folder and secret as npm start would", async () => {
    const dataDir = freshDataDir();
    const token = printedToken(await cli(['token', '--role', 'viewer', '--sub', 'alice'], { DATA_DIR: dataDir }));
    expect(statSync(join(dataDir, 'auth-secret')).mode & 0o777).toBe(0o600);
    await expect(hs256Verifier(secretIn(dataDir))(token)).resolves.toEqual({ sub: 'alice', roles: ['viewer'] });
    const { iat = 0, exp = 0 } = decodeJwt(token);
    expect(exp - iat).toBe(12 * 3600);
  });

  it('reuses an existing secret, takes roles repeated and comma-separated, and a ttl', async () => {
    const dataDir = freshDataDir();
    printedToken(await cli(['token', '--role', 'viewer', '--sub', 'first'], { DATA_DIR: dataDir }));
    const secret = readFileSync(join(dataDir, 'auth-secret'), 'utf8');
    const run = await cli(['token', '--role', 'editor,viewer', '--role', 'admin', '--sub', 'bob', '--ttl', '90m'], { DATA_DIR: dataDir });
    const token = printedToken(run);
    expect(readFileSync(join(dataDir, 'auth-secret'), 'utf8')).toBe(secret);
    await expect(hs256Verifier(secretIn(dataDir))(token)).resolves.toEqual({ sub: 'bob', roles: ['editor', 'viewer', 'admin'] });
    const { iat = 0, exp = 0 } = decodeJwt(token);
    expect(exp - iat).toBe(90 * 60);
  });

  it('signs with AUTH_JWT_SECRET when set, leaving the data folder alone', async () => {
    const dataDir = freshDataDir();
    const secret = 's'.repeat(40);
    const token = printedToken(
      await cli(['token', '--role', 'editor', '--sub', 'eve', '--ttl', '24h'], { DATA_DIR: dataDir, AUTH_JWT_SECRET: secret }),
    );
    expect(existsSync(dataDir)).toBe(false);
    await expect(hs256Verifier(new TextEncoder().encode(secret))(token)).resolves.toEqual({ sub: 'eve', roles: ['editor'] });
  });

  it.each([
    [
      'an unknown role',
      ['--role', 'viewer,superuser', '--sub', 'a'],
      /unknown role "superuser": the built-in roles are admin, editor, viewer/,
    ],
    ['a ttl over 24 h', ['--role', 'viewer', '--sub', 'a', '--ttl', '25h'], /at most 24h/],
    ['a ttl that is no duration', ['--role', 'viewer', '--sub', 'a', '--ttl', 'soon'], /expected a duration/],
    ['no role', ['--sub', 'a'], /--role is required/],
    ['no subject', ['--role', 'viewer'], /--sub is required/],
    ['an unknown option', ['--role', 'viewer', '--sub', 'a', '--admin'], /--admin/],
  ])('refuses %s with exit code 2 and prints no token', async (_name, args, message) => {
    const dataDir = freshDataDir();
    const run = await cli(['token', ...args], { DATA_DIR: dataDir });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(message);
    expect(existsSync(dataDir)).toBe(false);
  });

  it('refuses when an OIDC issuer is configured: tokens come from the issuer', async () => {
    const run = await cli(['token', '--role', 'viewer', '--sub', 'a'], {
      DATA_DIR: freshDataDir(),
      AUTH_ISSUER: 'https://issuer.test',
      AUTH_AUDIENCE: 'admin-api',
      AUTH_JWKS_URL: 'https://issuer.test/certs',
    });
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/AUTH_ISSUER is set .*get tokens from the issuer/);
  });

  it('prints usage with --help, and refuses an unknown or missing command', async () => {
    const help = await cli(['token', '--help'], {});
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('npm run token -- --role <role> --sub <subject>');
    const top = await cli(['--help'], {});
    expect([top.code, top.stdout]).toEqual([0, expect.stringContaining('token')]);
    expect((await cli(['mint'], {})).code).toBe(2);
    expect((await cli([], {})).code).toBe(2);
  });
});
