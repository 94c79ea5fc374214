// Runs the CLI as a child process, as a user would: `node cli/admin.ts …` on Node 24, its base URL
// and token from the environment.

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { user as user_ } from '../../modules/identity/domain/user.ts';
import { registries } from '../../modules/registries/domain/index.ts';
import { makeSampleReferences, sampleBody, uniqueCode } from '../support/samples.ts';
import type { manualClock, TestApp } from '../support/testApp.ts';

const root = join(import.meta.dirname, '..', '..');
// The Node running the tests (24, as npm test runs them): node_modules/.bin/node exists only where
// npm install had to bring Node 24 (scripts/ensure-node.mjs), not where the system's Node is 24.
const node = process.execPath;

export type CliRun = { code: number | null; stdout: string; stderr: string };

/** `node cli/admin.ts …` with the test's environment. Not inherited: a developer's own
 * ADMIN_URL/ADMIN_TOKEN must not leak into a test. */
function spawnCli(args: readonly string[], env: Record<string, string | undefined>) {
  const { ADMIN_URL: _url, ADMIN_TOKEN: _token, ...inherited } = process.env;
  return spawn(node, [join(root, 'cli', 'admin.ts'), ...args], {
    cwd: root,
    env: { ...inherited, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function runCli(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawnCli(args, env);
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
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

/** A timeline around a time T for replay tests: records created, replaced, patched and deleted
 * before T, some changed again or deleted after T, some created after T. Answers T and every
 * record touched (resource path and id) so a test can compare with GET ?asOf=T one by one. */
export async function replayTimeline(
  t: TestApp,
  clock: ReturnType<typeof manualClock>,
): Promise<{ until: string; touched: { path: string; id: string }[] }> {
  const touched: { path: string; id: string }[] = [];
  const write = async (method: 'POST' | 'PUT' | 'PATCH' | 'DELETE', url: string, payload?: unknown): Promise<{ id: string }> => {
    // Search and import diffs read the read models: every write is in them before the next step.
    const res = await t.call({ method, url: `${url}?immediatelyRefresh=true`, ...(payload === undefined ? {} : { payload }) });
    if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${String(res.statusCode)} ${res.body}`);
    return res.statusCode === 204 ? { id: '' } : res.json<{ id: string }>();
  };
  const create = async (path: string, body: unknown) => {
    const made = await write('POST', `/api/v1/${path}`, body);
    touched.push({ path, id: made.id });
    return made.id;
  };
  clock.advance(60_000);
  const refs = await makeSampleReferences((o) => t.call(o));
  const group = await create('user-groups', { code: uniqueCode('G'), name: 'Group before', type: refs.userGroupType, chars: {} });
  for (const def of registries) await create(def.path, sampleBody(def, uniqueCode('R'), refs));
  const patched = await create('user-group-types', { code: uniqueCode('PATCHED'), name: 'v0', registry: {} });
  const replaced = await create('user-group-types', { code: uniqueCode('REPLACED'), name: 'v0', registry: {} });
  const deletedBefore = await create('user-group-types', { code: uniqueCode('GONE'), name: 'v0', registry: {} });
  const deletedAfter = await create('user-group-types', { code: uniqueCode('LATER_GONE'), name: 'v0', registry: {} });
  const user = await create('users', sampleBody(user_, uniqueCode('U'), refs));

  clock.advance(10_000);
  await write('PATCH', `/api/v1/user-group-types/${patched}`, { name: 'v1 before T', description: 'set before T' });
  const current = (await t.call({ method: 'GET', url: `/api/v1/user-group-types/${replaced}` })).json<Record<string, unknown>>();
  await write('PUT', `/api/v1/user-group-types/${replaced}`, { ...current, name: 'v1 replaced before T' });
  await write('DELETE', `/api/v1/user-group-types/${deletedBefore}`);

  const until = new Date(clock.now().getTime() + 30_000).toISOString();
  clock.advance(60_000);
  await write('PATCH', `/api/v1/user-group-types/${patched}`, { name: 'v2 after T', description: null });
  await write('PATCH', `/api/v1/user-groups/${group}`, { name: 'Group after' });
  await write('PATCH', `/api/v1/users/${user}`, { name: 'after T' });
  await write('DELETE', `/api/v1/user-group-types/${deletedAfter}`);
  await create('user-group-types', { code: uniqueCode('NEW_AFTER'), name: 'v0', registry: {} });
  return { until, touched };
}

/** A long-running CLI (admin tail): its output so far, a wait for a line, and a stop by signal. */
export function startCli(args: readonly string[], env: Record<string, string | undefined>) {
  const child = spawnCli(args, env);
  const out = { stdout: '', stderr: '' };
  const waiters: (() => void)[] = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out.stdout += d;
    wake();
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => {
    out.stderr += d;
    wake();
  });
  const closed = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      wake();
      resolve(code);
    }),
  );
  return {
    out,
    /** Resolves once stdout holds `count` lines (or the process ended). */
    async lines(count: number): Promise<string[]> {
      for (;;) {
        const lines = out.stdout.split('\n').filter((l) => l !== '');
        if (lines.length >= count || child.exitCode !== null) return lines;
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    /** Resolves once stderr matches (or the process ended). */
    async stderrMatching(pattern: RegExp): Promise<string> {
      while (!pattern.test(out.stderr) && child.exitCode === null) await new Promise<void>((resolve) => waiters.push(resolve));
      return out.stderr;
    },
    async stop(): Promise<number | null> {
      child.kill('SIGINT');
      return closed;
    },
    closed,
  };
}
