// admin export and admin import against the real export and import routes, over a real socket.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/testApp.ts';
import { uniqueCode } from '../support/samples.ts';
import { runCli } from './support.ts';

type ExportObject = { entityType?: string; filtering: unknown[]; data: { id: string; code: string; name: string; description?: string }[] };

let t: TestApp;
let env: Record<string, string>;
const dir = mkdtempSync(join(tmpdir(), 'admin-cli-exchange-'));

beforeAll(async () => {
  t = await startTestApp();
  env = { ADMIN_URL: await t.listen(), ADMIN_TOKEN: t.tokens.admin };
});
afterAll(async () => {
  await t.close();
});

async function makeTypes(prefix: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const res = await t.call({
      method: 'POST',
      url: '/api/v1/user-group-types?immediatelyRefresh=true',
      payload: { code: `${prefix}_${String(i)}`, name: `Type ${String(i)}`, registry: {} },
    });
    expect(res.statusCode).toBe(201);
  }
}

describe('admin export', () => {
  it("writes the service's export object of the filtered records to stdout, nothing on stderr", async () => {
    const prefix = uniqueCode('EXP');
    await makeTypes(prefix, 3);
    const run = await runCli(['export', 'user-group-types', '--filter', `code:LIKE:${prefix}%`], env);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    const exported = JSON.parse(run.stdout) as ExportObject;
    expect(exported.data.map((r) => r.code).sort()).toEqual([0, 1, 2].map((i) => `${prefix}_${String(i)}`));
    expect(exported.filtering).toEqual([{ column: 'code', operator: 'LIKE', value: `${prefix}%` }]);
    const direct = (
      await t.call({
        method: 'POST',
        url: '/api/v1/user-group-types/export',
        payload: { entityType: 'user-group-types', filtering: exported.filtering },
      })
    ).json<ExportObject>();
    expect(exported.data).toEqual(direct.data);
  });

  it('a filter the service cannot run is its 400 on one line; a malformed --filter is a usage error', async () => {
    const bad = await runCli(['export', 'user-group-types', '--filter', 'noSuchColumn:EQ:x'], env);
    expect(bad.code).toBe(3);
    expect(bad.stderr).toMatch(/^admin: 400 [^\n]+\n$/);
    const usage = await runCli(['export', 'user-group-types', '--filter', 'code:ALMOST:x'], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^admin: [^\n]*column:OPERATOR[^\n]*\n$/);
  });
});

describe('admin import', () => {
  it('shows the diff summary of an edited export, writes nothing without --save, applies it with --save', async () => {
    const prefix = uniqueCode('IMP');
    await makeTypes(prefix, 3);
    const exported = JSON.parse(
      (await runCli(['export', 'user-group-types', '--filter', `code:LIKE:${prefix}%`], env)).stdout,
    ) as ExportObject;
    const [first, second, third] = exported.data;
    if (first === undefined || second === undefined || third === undefined) throw new Error('three records expected');
    // Matched by id (the default): a new record brings its own.
    const newId = randomUUID();
    const edited = {
      ...exported,
      data: [
        { ...first, name: 'Renamed by import', description: 'from the file' },
        second,
        { id: newId, code: `${prefix}_NEW`, name: 'New from file', registry: {} },
      ],
    };
    const file = join(dir, `${prefix}.json`);
    writeFileSync(file, JSON.stringify(edited));

    const dry = await runCli(['import', 'user-group-types', file], env);
    expect(dry.stderr).toBe('');
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('3 record(s) in the file: 1 new, 1 changed, 1 only here (matched on id); nothing saved');
    expect(dry.stdout).toMatch(new RegExp(`CHANGE\\s+${first.id}\\s+${first.code}\\s+description, name`));
    expect(dry.stdout).toMatch(new RegExp(`REMOVE\\s+${third.id}\\s+${third.code}`));
    expect(dry.stdout).toMatch(new RegExp(`NEW\\s+${newId}\\s+${prefix}_NEW`));
    expect((await t.call({ method: 'GET', url: `/api/v1/user-group-types/${first.id}` })).json()).toMatchObject({ name: first.name });

    const json = await runCli(['import', 'user-group-types', file, '--json'], env);
    expect(json.code).toBe(0);
    expect((JSON.parse(json.stdout) as { diffType: string }[]).map((d) => d.diffType).sort()).toEqual([
      'DIFF_TYPE_CHANGE',
      'DIFF_TYPE_NEW',
      'DIFF_TYPE_REMOVE',
    ]);

    const saved = await runCli(['import', 'user-group-types', file, '--save'], env);
    expect(saved.stderr).toBe('');
    expect(saved.code).toBe(0);
    expect(saved.stdout).toContain('1 new, 1 changed, 1 only here (matched on id); saved');
    expect((await t.call({ method: 'GET', url: `/api/v1/user-group-types/${first.id}` })).json()).toMatchObject({
      name: 'Renamed by import',
      description: 'from the file',
    });
    expect((await t.call({ method: 'GET', url: `/api/v1/user-group-types/${third.id}` })).statusCode).toBe(404);
    expect((await t.call({ method: 'GET', url: `/api/v1/user-group-types/${prefix}_NEW` })).statusCode).toBe(200);

    // Applying the same file again finds nothing to do.
    const again = await runCli(['import', 'user-group-types', file], env);
    expect(again.stdout).toContain('3 record(s) in the file: 0 new, 0 changed, 0 only here');
  });

  it('a file that is not an export object is refused before any upload (exit 1, one line)', async () => {
    const notJson = join(dir, 'not.json');
    writeFileSync(notJson, '{"data": [');
    const run = await runCli(['import', 'user-group-types', notJson], env);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^admin: [^\n]*not\.json is not JSON[^\n]*\n$/);
    const noData = join(dir, 'nodata.json');
    writeFileSync(noData, '{"rows": []}');
    expect((await runCli(['import', 'user-group-types', noData], env)).stderr).toMatch(/^admin: [^\n]* has no "data" array\n$/);
    expect((await runCli(['import', 'user-group-types', join(dir, 'missing.json')], env)).stderr).toMatch(
      /^admin: cannot read [^\n]*: ENOENT\n$/,
    );
  });

  it('a record the service refuses is its 400 on one line', async () => {
    const file = join(dir, 'invalid.json');
    writeFileSync(file, JSON.stringify({ filtering: [], data: [{ code: uniqueCode('BAD'), registry: {} }] }));
    const run = await runCli(['import', 'user-group-types', file], env);
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/^admin: 400 [^\n]+data\[0\][^\n]*\n$/);
  });
});

describe("admin import --save above the service's job threshold", () => {
  let small: TestApp;
  let smallEnv: Record<string, string>;
  beforeAll(async () => {
    small = await startTestApp({ extra: { exchange: { applyJobThreshold: 5 } } });
    smallEnv = { ADMIN_URL: await small.listen(), ADMIN_TOKEN: small.tokens.admin };
  });
  afterAll(async () => {
    await small.close();
  });

  it('--save deleting more than the service allows is its 400 naming --allow-mass-remove, and applies with it', async () => {
    const prefix = uniqueCode('MASS');
    const made = [];
    for (let i = 0; i < 12; i++) {
      const res = await small.call({
        method: 'POST',
        url: '/api/v1/user-group-types',
        payload: { code: `${prefix}_${String(i)}`, name: `Type ${String(i)}`, registry: {} },
      });
      made.push(res.json<{ id: string }>());
    }
    // A file of none of them, matched against every record here: all 12 would go (10% of 12 is 1, the floor 10).
    const file = join(dir, `${prefix}.json`);
    writeFileSync(file, JSON.stringify({ filtering: [], data: [] }));
    const refused = await runCli(['import', 'user-group-types', file, '--save'], smallEnv);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toMatch(
      /^admin: 400 DIFF\.MASS_REMOVE: This would delete 12 of the 12 user-group-types records[^\n]*allowMassRemove=true[^\n]*; --allow-mass-remove sends it\n$/,
    );
    for (const r of made) expect((await small.call({ method: 'GET', url: `/api/v1/user-group-types/${r.id}` })).statusCode).toBe(200);
    const saved = await runCli(['import', 'user-group-types', file, '--save', '--allow-mass-remove', '--interval', '50'], smallEnv);
    expect(saved.stderr).toBe('');
    expect(saved.code).toBe(0);
    for (const r of made) expect((await small.call({ method: 'GET', url: `/api/v1/user-group-types/${r.id}` })).statusCode).toBe(404);
  });

  it('follows the DIFF_APPLY job to its end and reports what it applied', async () => {
    const prefix = uniqueCode('JOB');
    const data = Array.from({ length: 12 }, (_, i) => ({
      id: randomUUID(),
      code: `${prefix}_${String(i)}`,
      name: `Imported ${String(i)}`,
      registry: {},
    }));
    const file = join(dir, `${prefix}.json`);
    writeFileSync(file, JSON.stringify({ filtering: [{ column: 'code', operator: 'LIKE', value: `${prefix}%` }], data }));
    const run = await runCli(['import', 'user-group-types', file, '--save', '--interval', '50'], smallEnv);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(
      /^12 record\(s\) in the file; saved by job [0-9a-f-]{36}: 12 applied, 0 unchanged, 0 failed of 12 diff entries\n$/,
    );
    for (const r of data) expect((await small.call({ method: 'GET', url: `/api/v1/user-group-types/${r.id}` })).statusCode).toBe(200);

    const json = await runCli(['import', 'user-group-types', file, '--save', '--json', '--interval', '50'], smallEnv);
    expect(json.code).toBe(0);
    // Nothing new to apply the second time: below the threshold, the (empty) diff itself.
    expect(JSON.parse(json.stdout)).toEqual([]);
  });
});
