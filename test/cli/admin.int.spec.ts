// The CLI against the real service on a real socket: help everywhere, history, indexes, rebuild,
// and the one-line errors with their exit codes.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/testApp.ts';
import { uniqueCode } from '../support/samples.ts';
import { closedPort, runCli } from './support.ts';

const COMMANDS = ['history', 'indexes', 'rebuild', 'export', 'import', 'tail', 'replay'];

let t: TestApp;
let env: Record<string, string>;

beforeAll(async () => {
  t = await startTestApp();
  env = { ADMIN_URL: await t.listen(), ADMIN_TOKEN: t.tokens.admin };
});
afterAll(async () => {
  await t.close();
});

describe('admin --help', () => {
  it('lists every command and the global options, exit 0', async () => {
    const run = await runCli(['--help']);
    expect(run.code).toBe(0);
    for (const c of COMMANDS) expect(run.stdout).toContain(c);
    expect(run.stdout).toMatch(/--url <url>[\s\S]*ADMIN_URL/);
    expect(run.stdout).toMatch(/--token <token>[\s\S]*ADMIN_TOKEN/);
  });

  it.each(COMMANDS)('%s --help describes it with its options, exit 0, no server needed', async (command) => {
    const run = await runCli([command, '--help']);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`Usage: admin ${command}`);
    expect(run.stdout).toContain('--json');
    expect(run.stderr).toBe('');
  });

  it('a wrong command or option is a usage error (exit 2) on one line', async () => {
    for (const args of [['histroy'], ['indexes', '--frobnicate'], ['history', 'users']]) {
      const run = await runCli(args, env);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr).toMatch(/^admin: [^\n]+\n$/);
    }
  });
});

describe('admin history', () => {
  it('shows each version with the fields it changed, as a table and as JSON', async () => {
    const code = uniqueCode('HIST');
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code, name: 'First name', registry: {} } })).statusCode,
    ).toBe(201);
    expect(
      (await t.call({ method: 'PATCH', url: `/api/v1/user-group-types/${code}`, payload: { name: 'Second name', description: 'added' } }))
        .statusCode,
    ).toBe(200);

    const run = await runCli(['history', 'user-group-types', code], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^VERSION\s+AT\s+ACTOR\s+EVENT\s+OP\s+FIELD\s+VALUE$/);
    expect(lines.some((l) => /^0\s+\S+\s+alice-admin\s+UserGroupTypeCreated\s+add\s+\/code\s+/.test(l))).toBe(true);
    expect(lines.some((l) => /^1\s+\S+\s+alice-admin\s+UserGroupTypePatched\s+replace\s+\/name\s+Second name$/.test(l))).toBe(true);
    expect(lines.some((l) => /^\s+add\s+\/description\s+added$/.test(l))).toBe(true);

    const json = await runCli(['history', 'user-group-types', code, '--json'], env);
    expect(json.code).toBe(0);
    const entries = JSON.parse(json.stdout) as { version: number; changes: unknown[] }[];
    const api = (await t.call({ method: 'GET', url: `/api/v1/user-group-types/${code}/history` })).json();
    expect(entries).toEqual(api);
    expect(entries.map((e) => e.version)).toEqual([0, 1]);
  });

  it("an unknown record is the server's 404 on one line, exit 3", async () => {
    const run = await runCli(['history', 'user-group-types', uniqueCode('NONE')], env);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/^admin: 404 USER_GROUP_TYPE\.NOT_FOUND: [^\n]+\n$/);
    expect(run.stdout).toBe('');
  });
});

describe('admin indexes and rebuild', () => {
  it('lists the read models as the API does', async () => {
    const json = await runCli(['indexes', '--json'], env);
    expect(json.code).toBe(0);
    const models = JSON.parse(json.stdout) as { name: string }[];
    expect(models.map((m) => m.name)).toContain('user_group_types');
    const run = await runCli(['indexes'], env);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^NAME\s+STATE\s+DOCUMENTS\s+POSITION\s+LAG/);
    expect(run.stdout).toMatch(/\nuser_group_types\s+live\s+\d+/);
  });

  it('rebuild starts a recreate job and returns once it has COMPLETED', async () => {
    const code = uniqueCode('REB');
    expect(
      (await t.call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code, name: 'Rebuilt', registry: {} } })).statusCode,
    ).toBe(201);
    const run = await runCli(['rebuild', 'user_group_types', '--json', '--interval', '50'], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const job = JSON.parse(run.stdout) as { id: string; status: string; data: { result: { indexName: string; documents: number } } };
    expect(job.status).toBe('COMPLETED');
    expect(job.data.result.indexName).toBe('user_group_types');
    expect(job.data.result.documents).toBeGreaterThanOrEqual(1);
    // The job the server ran is the one the CLI followed, and it is over.
    expect((await t.call({ method: 'GET', url: `/api/v1/jobs/${job.id}` })).json()).toMatchObject({ status: 'COMPLETED' });

    const table = await runCli(['rebuild', 'user_group_types'], env);
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/^JOB\s+STATUS\s+INDEXNAME/);
    expect(table.stdout).toMatch(/COMPLETED\s+user_group_types/);
    // stderr is not a terminal here: no progress bar in logs.
    expect(table.stderr).toBe('');
  });

  it('rebuild of an unknown read model is a 404 on one line', async () => {
    const run = await runCli(['rebuild', 'no_such_index'], env);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/^admin: 404 READ_MODEL\.NOT_FOUND[^\n]*\n$/);
  });
});

describe('errors: one line on stderr, a non-zero exit code, no stack trace', () => {
  it('a wrong token: 401, exit 3', async () => {
    const run = await runCli(['indexes'], { ...env, ADMIN_TOKEN: 'not-a-token' });
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/^admin: 401 AUTH\.UNAUTHORIZED: [^\n]+\n$/);
    expect(run.stdout).toBe('');
  });

  it('a token without the admin role: 403, exit 3', async () => {
    const run = await runCli(['indexes', '--token', t.tokens.viewer], env);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/^admin: 403 [^\n]+\n$/);
  });

  it('an unreachable server: exit 4 naming the URL and the reason', async () => {
    const url = `http://127.0.0.1:${String(await closedPort())}`;
    for (const command of [['indexes'], ['history', 'users', 'x'], ['rebuild', 'users']]) {
      const run = await runCli(command, { ADMIN_URL: url, ADMIN_TOKEN: t.tokens.admin });
      expect(run.code).toBe(4);
      expect(run.stderr).toBe(`admin: cannot reach ${url}: ECONNREFUSED\n`);
    }
  });

  it('no token at all: a usage error (exit 2) saying how to give one', async () => {
    const run = await runCli(['indexes'], { ADMIN_URL: env.ADMIN_URL });
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^admin: no token: pass --token or set ADMIN_TOKEN[^\n]*\n$/);
  });
});
