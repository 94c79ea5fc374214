// `npm run bench:export`: memory of a streamed export over HTTP (POST /api/v1/R/export).
//
//   1. Loads --records worklog types (default 1,000,000) into the read model serving them, in this
//      process (composeService over the embedded stores in a temporary folder, then
//      ReadStore.bulkLoad: the export reads the read model only), and closes it.
//   2. Starts the service as `npm start` runs it (api/nodeFlags.ts, api/main.ts, a child process) over that
//      folder, waits for /health/live, lets it settle and takes its RSS as the baseline, split as
//      Linux counts it (/proc/<pid>/status): RssAnon (heap, buffers, SQLite's page cache: the
//      process's own memory) and RssFile (pages of files mapped into it: the read store maps its
//      database file, PRAGMA mmap_size = 1 GiB, so the pages the export reads count there: the
//      kernel's cache, shared and reclaimable).
//   3. Exports every record over HTTP with a client in this process that counts bytes and records
//      as they arrive and keeps none, sampling the service's RSS every 50 ms (with --filtered,
//      through a filter every record matches: a scan with a query instead of a plain scan); then a
//      second export the same way, with the caches warm (`--rounds N`: N exports in all). `--node-options` passes V8 flags to the
//      service (`--node-options=--max-semi-space-size=4` shows V8's share of the growth).
//
// Prints the growth of each part at the peak above the baseline. Exits non-zero when an export is
// not whole or the service's anonymous RSS grew by 50 MB or more.

import { spawn } from 'node:child_process';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
    filtered: { type: 'boolean', default: false },
    'node-options': { type: 'string', default: '' },
    rounds: { type: 'string', default: '2' },
  },
});
const RECORDS = Math.round(Number(flags.records));
if (!(RECORDS >= 1)) throw new Error(`--records must be a positive number, got "${flags.records}"`);
const LIMIT_MB = 50;
const SECRET_TEXT = 'export-bench-secret-0123456789-0123456789';
const SECRET = new TextEncoder().encode(SECRET_TEXT);
const MB = 1024 * 1024;
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const mb = (bytes: number): string => `${(bytes / MB).toFixed(1)} MB`;

const dir = mkdtempSync(join(tmpdir(), 'export-bench-'));
const stores = openEmbeddedStores(dir);
const service = await composeService({ ...stores, verifyToken: hs256Verifier(SECRET) });
await service.startProjectors();

/** One worklog type as the read model holds it. */
function* documents(): Generator<VersionedDocument> {
  const at = '2026-01-01T00:00:00.000Z';
  for (let i = 0; i < RECORDS; i++) {
    const hex = i.toString(16).padStart(12, '0');
    const id = `00000000-0000-4000-8000-${hex}`;
    const doc = {
      id,
      code: `WT-${String(i).padStart(7, '0')}`,
      name: `Worklog type ${String(i)}`,
      description: `Exported by the export benchmark, record ${String(i)}`,
      validityFrom: at,
      auditInfo: { version: 0, whoInserted: 'bench', whenInserted: at, whoEdited: 'bench', whenEdited: at },
    };
    yield { id, version: 0, doc };
  }
}

const loadStarted = performance.now();
const serving = service.readModels.serving(worklogType.collection);
await service.readStore.bulkLoad(serving.collection, documents(), await stores.eventStore.headPosition(), serving.name);
await service.close();
console.log(
  `loaded ${fmt(RECORDS)} worklog types into ${serving.collection} in ${((performance.now() - loadStarted) / 1000).toFixed(1)} s`,
);

/** A port free now, for the service to listen on. */
const port = await new Promise<number>((resolve, reject) => {
  const probe = createServer();
  probe.once('error', reject);
  probe.listen(0, '127.0.0.1', () => {
    const { port: free } = probe.address() as AddressInfo;
    probe.close(() => {
      resolve(free);
    });
  });
});
const address = `http://127.0.0.1:${String(port)}`;
// As npm start runs it; --node-options adds V8 flags after its own, so they win (e.g.
// --max-semi-space-size=64, V8's own limit here).
const extra = flags['node-options'] === '' ? [] : flags['node-options'].split(' ').filter((flag) => flag !== '');
const child = spawn(process.execPath, [...SERVICE_NODE_ARGS, ...extra, 'api/main.ts'], {
  env: { ...process.env, DATA_DIR: dir, PORT: String(port), HOST: '127.0.0.1', AUTH_JWT_SECRET: SECRET_TEXT, LOG_LEVEL: 'warn' },
  stdio: ['ignore', 'ignore', 'inherit'],
});
const pid = child.pid ?? 0;
process.on('exit', () => child.kill('SIGKILL'));
for (let tries = 0; ; tries++) {
  const up = await fetch(`${address}/health/live`).then(
    (r) => r.ok,
    () => false,
  );
  if (up) break;
  if (tries > 600 || child.exitCode !== null) throw new Error('the service did not start');
  await new Promise((r) => setTimeout(r, 100));
}
const token = await signHs256(SECRET, { sub: 'bench', roles: ['admin'] });

type Rss = { anon: number; file: number; total: number };

/** The service's RSS as /proc/<pid>/status splits it (Linux only). */
function rss(): Rss {
  const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? 0) * 1024;
  return { anon: kb('RssAnon'), file: kb('RssFile') + kb('RssShmem'), total: kb('VmRSS') };
}

async function measured(round: number): Promise<boolean> {
  // Settled: the start's own allocations done (the baseline is taken when RSS holds still).
  let baseline = rss();
  for (let i = 0; i < 50; i++) {
    await new Promise((r) => setTimeout(r, 200));
    const now = rss();
    const still = Math.abs(now.total - baseline.total) < MB;
    baseline = now;
    if (still) break;
  }
  const peak = { ...baseline };
  const sample = () => {
    const now = rss();
    peak.anon = Math.max(peak.anon, now.anon);
    peak.file = Math.max(peak.file, now.file);
    peak.total = Math.max(peak.total, now.total);
  };
  const sampler = setInterval(sample, 50);
  const started = performance.now();
  const result = await exportAll();
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  sample();
  console.log(
    `export ${String(round)}: HTTP ${String(result.status)}, ${fmt(result.records)} records, ${mb(result.bytes)} in ${seconds.toFixed(1)} s (${fmt(result.records / seconds)} records/s)`,
  );
  console.log(
    `  service RSS baseline ${mb(baseline.total)} (anon ${mb(baseline.anon)}, file ${mb(baseline.file)}); growth at the peak: ` +
      `anon ${mb(peak.anon - baseline.anon)}, file ${mb(peak.file - baseline.file)}, total ${mb(peak.total - baseline.total)}`,
  );
  const whole = result.status === 200 && result.records === RECORDS && result.tail === ']}';
  if (!whole)
    console.log(
      `  FAILED: the export is not whole (status ${String(result.status)}, ${fmt(result.records)} of ${fmt(RECORDS)} records, ends with ${JSON.stringify(result.tail)})`,
    );
  const grew = peak.anon - baseline.anon;
  if (grew >= LIMIT_MB * MB) console.log(`  FAILED: anonymous RSS grew by ${mb(grew)} (limit ${String(LIMIT_MB)} MB)`);
  return whole && grew < LIMIT_MB * MB;
}

/** Streams the export and counts it: bytes, records (each holds one `"auditInfo":`), its ending. */
function exportAll(): Promise<{ status: number; bytes: number; records: number; tail: string }> {
  return new Promise((resolve, reject) => {
    // --filtered: a filter every record matches, so the export pages by a scan with a query.
    const body = JSON.stringify({
      entityType: 'WorklogType',
      ...(flags.filtered ? { filtering: [{ column: 'code', operator: 'LIKE', value: 'WT-%' }] } : {}),
    });
    const req = request(`${address}/api/v1/worklog-types/export`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    req.on('response', (res) => {
      let bytes = 0;
      let records = 0;
      let carry = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        bytes += Buffer.byteLength(chunk);
        const text = carry + chunk;
        records += text.split('"auditInfo":').length - 1;
        // A marker split between chunks is counted once: the carry never holds a whole one.
        carry = text.slice(-11);
        if (carry.includes('"auditInfo":')) carry = '';
      });
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, bytes, records, tail: carry.slice(-2) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const results: boolean[] = [];
for (let round = 1; round <= Math.max(1, Number(flags.rounds)); round++) results.push(await measured(round));
const ok = results.every(Boolean);
child.kill('SIGTERM');
await new Promise((r) => child.once('exit', r));
rmSync(dir, { recursive: true, force: true });
process.exit(ok ? 0 : 1);
