// `npm run bench:import`: import of a large export file as a diff, over HTTP (POST /api/v1/R/import).
//
//   1. Loads --records worklog types (default 1,000,000) into the read model of a first data
//      folder (composeService over the embedded stores, then ReadStore.bulkLoad), starts the service
//      as `npm start` runs it (api/nodeFlags.ts, api/main.ts) over it and saves the export of all of them
//      (POST /api/v1/worklog-types/export) to a temporary file; stops that service.
//   2. Loads a changed data set into a second folder: --changes records renamed (CHANGE), as many
//      left out (NEW: only in the file) and as many added (REMOVE: only here).
//   3. Starts the service over the second folder, lets it settle, takes its RSS as the baseline,
//      and uploads the export file to POST /api/v1/worklog-types/import?save=false (multipart,
//      streamed from disk), sampling the service's RSS every 50 ms.
//
// `--rounds N` (default 2) imports the file N times into the same service, each measured from a
// baseline taken when its RSS has settled; `--node-options` passes V8 flags to the service.
//
// Prints PASS when the diff lists exactly the changes made (each expected code with its type, and
// nothing else), and the service's RSS growth during the import (anonymous and file-backed, as
// /proc/<pid>/status splits them). Exits non-zero on FAIL.

import { spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { hs256Verifier, signHs256 } from '../api/auth.ts';
import { composeService } from '../api/compose.ts';
import type { VersionedDocument } from '../domain/ports.ts';
import { worklogType } from '../modules/registries/domain/worklogType.ts';
import { openEmbeddedStores } from '../infra/embedded.ts';
import { SERVICE_NODE_ARGS } from '../api/nodeFlags.ts';

const { values: flags } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    changes: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '2' },
    'node-options': { type: 'string', default: '' },
  },
});
const RECORDS = Math.round(Number(flags.records));
const CHANGES = Math.round(Number(flags.changes));
if (!(RECORDS >= 10) || !(CHANGES >= 1) || CHANGES * 3 > RECORDS)
  throw new Error('--records at least 10, --changes at least 1 and at most a third of the records');
const SECRET_TEXT = 'import-bench-secret-0123456789-0123456789';
const SECRET = new TextEncoder().encode(SECRET_TEXT);
const MB = 1024 * 1024;
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const mb = (bytes: number): string => `${(bytes / MB).toFixed(1)} MB`;
const STEP = Math.floor(RECORDS / CHANGES);

const code = (i: number): string => `WT-${String(i).padStart(7, '0')}`;
/** Which records the changed data set renames (CHANGE) and leaves out (NEW). */
const renamed = (i: number): boolean => i % STEP === 1 && i / STEP < CHANGES;
const leftOut = (i: number): boolean => i % STEP === 2 && i / STEP < CHANGES;

function* documents(changed: boolean): Generator<VersionedDocument> {
  const at = '2026-01-01T00:00:00.000Z';
  const one = (i: number, name: string): VersionedDocument => {
    const id = `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;
    const doc = {
      id,
      code: code(i),
      name,
      description: `Imported by the import benchmark, record ${String(i)}`,
      validityFrom: at,
      auditInfo: { version: 0, whoInserted: 'bench', whenInserted: at, whoEdited: 'bench', whenEdited: at },
    };
    return { id, version: 0, doc };
  };
  for (let i = 0; i < RECORDS; i++) {
    if (changed && leftOut(i)) continue;
    yield one(i, changed && renamed(i) ? `Renamed worklog type ${String(i)}` : `Worklog type ${String(i)}`);
  }
  // Only in the changed data set: REMOVE.
  if (changed) for (let i = RECORDS; i < RECORDS + CHANGES; i++) yield one(i, `Added worklog type ${String(i)}`);
}

async function load(changed: boolean): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'import-bench-'));
  const stores = openEmbeddedStores(dir);
  const service = await composeService({ ...stores, verifyToken: hs256Verifier(SECRET) });
  await service.startProjectors();
  const started = performance.now();
  const serving = service.readModels.serving(worklogType.collection);
  await service.readStore.bulkLoad(serving.collection, documents(changed), await stores.eventStore.headPosition(), serving.name);
  await service.close();
  console.log(
    `loaded the ${changed ? 'changed' : 'original'} data set into ${dir} in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  return dir;
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => {
        resolve(port);
      });
    });
  });

type Service = { child: ChildProcess; address: string };

async function start(dir: string): Promise<Service> {
  const port = await freePort();
  const address = `http://127.0.0.1:${String(port)}`;
  // As npm start runs it; --node-options adds V8 flags after its own, so they win (e.g.
  // --max-semi-space-size=64, V8's own limit here).
  const extra = flags['node-options'] === '' ? [] : flags['node-options'].split(' ').filter((flag) => flag !== '');
  const child = spawn(process.execPath, [...SERVICE_NODE_ARGS, ...extra, 'api/main.ts'], {
    env: { ...process.env, DATA_DIR: dir, PORT: String(port), HOST: '127.0.0.1', AUTH_JWT_SECRET: SECRET_TEXT, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  process.on('exit', () => child.kill('SIGKILL'));
  for (let tries = 0; ; tries++) {
    if (
      await fetch(`${address}/health/live`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { child, address };
    if (tries > 600 || child.exitCode !== null) throw new Error('the service did not start');
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function stop({ child }: Service): Promise<void> {
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
}

const token = await signHs256(SECRET, { sub: 'bench', roles: ['admin'] });

async function exportTo(service: Service, file: string): Promise<void> {
  const body = JSON.stringify({ entityType: 'WorklogType', compareField: 'code' });
  await new Promise<void>((resolve, reject) => {
    const req = request(`${service.address}/api/v1/worklog-types/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    req.on('response', (res) => {
      if (res.statusCode !== 200) reject(new Error(`export: HTTP ${String(res.statusCode)}`));
      pipeline(res, createWriteStream(file)).then(resolve, reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Uploads the file as the multipart field `file`, streamed from disk; the answer's text. */
function importFile(service: Service, file: string): Promise<{ status: number; text: string }> {
  const boundary = `----bench${String(Date.now())}`;
  const head = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="export.json"\r\nContent-Type: application/json\r\n\r\n`,
  );
  const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
  return new Promise((resolve, reject) => {
    const req = request(`${service.address}/api/v1/worklog-types/import?save=false`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': head.length + statSync(file).size + tail.length,
      },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.write(head);
    const input = createReadStream(file);
    input.on('error', reject);
    input.on('end', () => req.end(tail));
    input.pipe(req, { end: false });
  });
}

type Rss = { anon: number; file: number; total: number };
function rss(pid: number): Rss {
  const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem'), total: kb('VmRSS') };
}

/** The expected diff: type:code for each change made. */
function expected(): string[] {
  const out: string[] = [];
  for (let i = 0; i < RECORDS; i++) {
    if (renamed(i)) out.push(`DIFF_TYPE_CHANGE:${code(i)}`);
    if (leftOut(i)) out.push(`DIFF_TYPE_NEW:${code(i)}`);
  }
  for (let i = RECORDS; i < RECORDS + CHANGES; i++) out.push(`DIFF_TYPE_REMOVE:${code(i)}`);
  return out.sort();
}

const work = mkdtempSync(join(tmpdir(), 'import-bench-file-'));
const file = join(work, 'export.json');
const dirs = [await load(false)];
const original = await start(dirs[0] ?? '');
const started = performance.now();
await exportTo(original, file);
console.log(
  `exported ${fmt(RECORDS)} records: ${mb(statSync(file).size)} of JSON in ${((performance.now() - started) / 1000).toFixed(1)} s`,
);
await stop(original);
dirs.push(await load(true));
const changed = await start(dirs[1] ?? '');
const pid = changed.child.pid ?? 0;
const want = expected();

/** One import of the file, measured; whether its diff is exactly the changes made. */
async function measured(round: number): Promise<boolean> {
  let baseline = rss(pid);
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 200));
    const now = rss(pid);
    const still = Math.abs(now.total - baseline.total) < MB;
    baseline = now;
    if (still) break;
  }
  const peak = { ...baseline };
  const sampler = setInterval(() => {
    const now = rss(pid);
    peak.anon = Math.max(peak.anon, now.anon);
    peak.file = Math.max(peak.file, now.file);
    peak.total = Math.max(peak.total, now.total);
  }, 50);
  const began = performance.now();
  const answer = await importFile(changed, file);
  const seconds = (performance.now() - began) / 1000;
  clearInterval(sampler);
  let got: string[] = [];
  if (answer.status === 200) {
    const entries = JSON.parse(answer.text) as { diffType: string; left?: { code: string }; right?: { code: string } }[];
    got = entries.map((e) => `${e.diffType}:${(e.right ?? e.left)?.code ?? '?'}`).sort();
  }
  const ok = answer.status === 200 && got.length === want.length && got.every((g, i) => g === want[i]);
  console.log(
    `import ${String(round)} of the ${mb(statSync(file).size)} export as a diff: HTTP ${String(answer.status)}, ${fmt(got.length)} entries in ${seconds.toFixed(1)} s ` +
      `(expected ${fmt(want.length)}: ${fmt(CHANGES)} CHANGE, ${fmt(CHANGES)} NEW, ${fmt(CHANGES)} REMOVE)`,
  );
  if (answer.status !== 200) console.log(`  answer: ${answer.text.slice(0, 500)}`);
  console.log(
    `  service RSS baseline ${mb(baseline.total)} (anon ${mb(baseline.anon)}, file ${mb(baseline.file)}); growth at the peak: ` +
      `anon ${mb(peak.anon - baseline.anon)}, file ${mb(peak.file - baseline.file)}, total ${mb(peak.total - baseline.total)}`,
  );
  console.log(ok ? '  PASS: the diff lists exactly the changes made' : '  FAIL: the diff is not exactly the changes made');
  return ok;
}

const results: boolean[] = [];
for (let round = 1; round <= Math.max(1, Number(flags.rounds)); round++) results.push(await measured(round));
const ok = results.every(Boolean);
await stop(changed);
for (const dir of [...dirs, work]) rmSync(dir, { recursive: true, force: true });
process.exit(ok ? 0 : 1);
