// `npm run bench`: the performance budget of DESIGN.md, each figure measured right after its raw
// baseline in the same run on the same machine and reported as a ratio against it (the machines
// are shared and noisy; absolute numbers drift 2-3x, ratios much less).
//
//   1. HTTP create, 50 connections: baseline A is a bare fastify route doing one INSERT transaction
//      per request on node:sqlite (WAL, synchronous=FULL); measured is POST /api/v1/user-group-types,
//      each request a fresh code.
//   2. HTTP get one, 50 connections: baseline B is a bare fastify route returning constant JSON;
//      measured is GET /api/v1/user-group-types/{id} rotating over records created before.
//   3. Batched append of 100 events: baseline C is raw node:sqlite, 100 INSERTs per transaction;
//      measured is SqliteEventStore.append of 100 events per call, one caller and four concurrent.
//
// Every server runs in its own child process (bench/server.ts) so autocannon, in this process, does
// not compete with it for a core. Each figure's time is split into rounds, each round running the
// baseline and then its counterpart (after `sync`, so one side's writeback does not land in the
// other's fsyncs), so a neighbour's load that comes and goes weighs on both sides alike. Every
// figure is the median of its rounds, every ratio the median of the rounds' ratios.
//
// Flags: --duration S (per HTTP side, default 10), --warmup S (default 2), --rounds N (default 4),
// --connections N (default 50), --append-duration S (per append side, default 5),
// --profile DIR (run the service under --cpu-prof, profiles written to DIR on exit).

import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { DatabaseSync } from 'node:sqlite';
import { parseArgs } from 'node:util';
import autocannon, { type Options, type Request, type Result } from 'autocannon';
import type { NewEvent } from '../domain/ports.ts';
import { SqliteEventStore } from '../infra/sqlite/eventStore.ts';
import { LOG_PRAGMAS, RAW_SCHEMA } from './common.ts';

const { values: flags } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '2' },
    rounds: { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
    'append-duration': { type: 'string', default: '5' },
    profile: { type: 'string' },
  },
});
const positive = (name: string, value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got "${value}"`);
  return n;
};
const DURATION = positive('duration', flags.duration);
const WARMUP = positive('warmup', flags.warmup);
const ROUNDS = Math.max(1, Math.round(positive('rounds', flags.rounds)));
const CONNECTIONS = Math.round(positive('connections', flags.connections));
const APPEND_DURATION = positive('append-duration', flags['append-duration']);
const BATCH = 100;
const CONCURRENT_APPENDERS = 4;
const RESOURCE = '/api/v1/user-group-types';

const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
};

// ---------------------------------------------------------------------------------------------
// Servers in child processes, and autocannon

type Server = { url: string; token: string; stop: () => Promise<void> };

async function startServer(mode: 'service' | 'raw-insert' | 'const', nodeFlags: string[] = []): Promise<Server> {
  const child = spawn(process.execPath, [...nodeFlags, join(import.meta.dirname, 'server.ts'), mode], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((done) => child.once('exit', () => { done(); }));
  const lines = createInterface({ input: child.stdout });
  const ready = await new Promise<string>((ok, fail) => {
    lines.on('line', (line) => {
      if (line.startsWith('READY ')) ok(line.slice('READY '.length));
    });
    void exited.then(() => { fail(new Error(`bench server "${mode}" exited before it was ready`)); });
  });
  const info = JSON.parse(ready) as { url: string; token: string };
  return {
    ...info,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** One autocannon run, or several combined: 2xx per second, latency in ms. */
type Load = { rate: number; p50: number; p99: number; ok: number; seconds: number; failed: number };

async function load(options: Options, duration: number): Promise<Load> {
  const r: Result = await autocannon({ connections: CONNECTIONS, timeout: 10, ...options, duration });
  const failed = r.non2xx + r.errors + r.timeouts;
  if (failed > 0) console.log(`    ! ${String(failed)} requests failed (non-2xx ${String(r.non2xx)}, errors ${String(r.errors)}, timeouts ${String(r.timeouts)})`);
  return { rate: r['2xx'] / r.duration, p50: r.latency.p50, p99: r.latency.p99, ok: r['2xx'], seconds: r.duration, failed };
}

/** The rounds' medians: one round hit by a neighbour's burst does not decide the figure. */
function combine(runs: readonly Load[]): Load {
  return {
    rate: median(runs.map((r) => r.rate)),
    p50: median(runs.map((r) => r.p50)),
    p99: median(runs.map((r) => r.p99)),
    ok: runs.reduce((n, r) => n + r.ok, 0),
    seconds: runs.reduce((n, r) => n + r.seconds, 0),
    failed: runs.reduce((n, r) => n + r.failed, 0),
  };
}

/** Baseline and measured side, each the median of its rounds; ratio the median of the rounds' ratios. */
type Pair = { base: Load; measured: Load; ratio: number };

/** Writes the page cache's dirty pages out, so one side's writeback does not land in the other's
 * fsyncs (Linux `sync`; skipped where there is none). */
function flushDisk(): void {
  try {
    execFileSync('sync', { stdio: 'ignore' });
  } catch {
    // no sync(1) here: the rounds and medians still even it out
  }
}

/** Warms both sides up, then ROUNDS rounds of baseline-then-measured, `after` run after each
 * measured side (outside the timed window). */
async function alternate(names: [string, string], base: Options, measured: Options, after?: () => Promise<void>): Promise<Pair> {
  await load(base, WARMUP);
  await load(measured, WARMUP);
  await after?.();
  const b: Load[] = [];
  const m: Load[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    flushDisk();
    const x = await load(base, DURATION / ROUNDS);
    flushDisk();
    const y = await load(measured, DURATION / ROUNDS);
    b.push(x);
    m.push(y);
    console.log(
      `  round ${String(round)}: ${names[0]} ${fmt(x.rate)}/s p99 ${String(x.p99)} ms | ${names[1]} ${fmt(y.rate)}/s p99 ${String(y.p99)} ms | ratio ${(y.rate / x.rate).toFixed(2)}`,
    );
    await after?.();
  }
  return { base: combine(b), measured: combine(m), ratio: median(m.map((y, i) => y.rate / (b[i]?.rate ?? NaN))) };
}

/** Waits until every read model has projected the whole log; returns how long that took. */
async function waitForProjections(server: Server, timeoutMs = 120_000): Promise<number> {
  const start = performance.now();
  for (;;) {
    const res = await fetch(`${server.url}/health/ready`);
    const body = (await res.json()) as { readModels?: { lag: number }[] };
    if (res.ok && (body.readModels ?? []).every((m) => m.lag === 0)) return performance.now() - start;
    if (performance.now() - start > timeoutMs) throw new Error('the projections did not catch up in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

// ---------------------------------------------------------------------------------------------
// 1 and 2: HTTP

const json = { 'content-type': 'application/json' };
const runTag = randomUUID().slice(0, 8);
let codeCounter = 0;
const createBody = (): string =>
  JSON.stringify({ code: `BENCH-${runTag}-${String(codeCounter++)}`, name: 'Bench group type', description: 'Created by npm run bench', registry: {} });

/** POSTs whose every body carries a code never sent before. */
function creates(path: string, headers: Record<string, string>, onCreated?: (id: string) => void): Request[] {
  const request: Request = { method: 'POST', path, headers, setupRequest: (req) => ({ ...req, body: createBody() }) };
  if (onCreated !== undefined) {
    request.onResponse = (status, body) => {
      if (status === 201) onCreated((JSON.parse(body) as { id: string }).id);
    };
  }
  return [request];
}

type HttpFigures = { create: Pair; get: Pair };

async function createFigure(service: Server, headers: Record<string, string>): Promise<Pair> {
  const raw = await startServer('raw-insert');
  try {
    let catchUp = 0;
    const pair = await alternate(['A raw insert', 'POST service'], { url: raw.url, requests: creates('/raw', json) }, { url: service.url, requests: creates(RESOURCE, headers) }, async () => {
      catchUp = Math.max(catchUp, await waitForProjections(service));
    });
    console.log(`  (projections caught up within ${catchUp.toFixed(0)} ms after each round)`);
    return pair;
  } finally {
    await raw.stop();
  }
}

async function getFigure(service: Server, ids: readonly string[]): Promise<Pair> {
  const constant = await startServer('const');
  try {
    let next = 0;
    const get: Request = {
      method: 'GET',
      headers: { authorization: `Bearer ${service.token}` },
      setupRequest: (req) => ({ ...req, path: `${RESOURCE}/${ids[next++ % ids.length] ?? ''}` }),
    };
    return await alternate(['B constant JSON', 'GET service'], { url: `${constant.url}/const` }, { url: service.url, requests: [get] });
  } finally {
    await constant.stop();
  }
}

async function httpFigures(): Promise<HttpFigures> {
  const profile = flags.profile === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${resolve(flags.profile)}`];
  const service = await startServer('service', profile);
  try {
    const headers = { ...json, authorization: `Bearer ${service.token}` };
    // Records for the reads to rotate over (these creates also warm the service up).
    const ids: string[] = [];
    await load({ url: service.url, requests: creates(RESOURCE, headers, (id) => { if (ids.length < 10_000) ids.push(id); }) }, WARMUP);
    if (ids.length === 0) throw new Error('no record was created');
    await waitForProjections(service);

    console.log(`HTTP create: ${String(CONNECTIONS)} connections, ${String(ROUNDS)} rounds of ${(DURATION / ROUNDS).toFixed(1)} s per side`);
    const create = await createFigure(service, headers);
    console.log(`HTTP get one: ${String(CONNECTIONS)} connections, rotating over ${String(ids.length)} ids, ${String(ROUNDS)} rounds of ${(DURATION / ROUNDS).toFixed(1)} s per side`);
    const get = await getFigure(service, ids);
    return { create, get };
  } finally {
    await service.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// 3: batched append

type Sample = { id: string; data: Record<string, unknown>; metadata: NewEvent['metadata'] };

const sampleEvent = (i: number): Sample => ({
  id: randomUUID(),
  data: { code: `EV-${runTag}-${String(i)}`, name: 'Bench event', description: 'One of a batch of a hundred', registry: {} },
  metadata: { actor: 'bench', at: new Date().toISOString(), requestId: `req-${String(i)}` },
});

/** Writes batches back to back for `seconds`; answers events per second. */
type Writer = { name: string; run: (seconds: number) => Promise<number>; close: () => Promise<void> };

/** `callers` loops of `step` (each writing one batch) run concurrently for `seconds`. */
async function eventsPerSecond(seconds: number, callers: number, step: () => void | Promise<void>): Promise<number> {
  const start = performance.now();
  const end = start + seconds * 1000;
  let batches = 0;
  const loop = async (): Promise<void> => {
    while (performance.now() < end) {
      await step();
      batches++;
    }
  };
  await Promise.all(Array.from({ length: callers }, loop));
  return (batches * BATCH) / ((performance.now() - start) / 1000);
}

function rawWriter(dir: string): Writer {
  const db = new DatabaseSync(join(dir, 'raw.db'));
  db.exec(LOG_PRAGMAS);
  db.exec(RAW_SCHEMA);
  const insert = db.prepare(
    'INSERT INTO events (id, stream, category, revision, type, schema_version, data, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
  );
  let n = 0;
  const batch = (): void => {
    const stream = `benchevent-${randomUUID()}`;
    db.exec('BEGIN IMMEDIATE');
    for (let revision = 0; revision < BATCH; revision++) {
      const e = sampleEvent(n++);
      insert.run(e.id, stream, 'benchevent', revision, 'BenchEvent', 1, JSON.stringify(e.data), JSON.stringify(e.metadata));
    }
    db.exec('COMMIT');
  };
  return {
    name: 'C raw',
    run: (seconds) => eventsPerSecond(seconds, 1, batch),
    close: () => { db.close(); return Promise.resolve(); },
  };
}

function storeWriter(dir: string, callers: number): Writer {
  const store = new SqliteEventStore(join(dir, `store-${String(callers)}.db`));
  let n = 0;
  // Appends of one event-loop turn share a transaction: with several callers, group commit.
  const append = async (): Promise<void> => {
    const events: NewEvent[] = [];
    for (let i = 0; i < BATCH; i++) events.push({ ...sampleEvent(n++), type: 'BenchEvent', schemaVersion: 1 });
    await store.append({ stream: `benchevent-${randomUUID()}`, expected: 'no_stream', events });
  };
  return {
    name: `store x${String(callers)}`,
    run: (seconds) => eventsPerSecond(seconds, callers, append),
    close: () => store.close(),
  };
}

/** Each the median of the rounds; ratios the median of the rounds' ratios to C. */
type AppendFigures = { c: number; sequential: number; concurrent: number; sequentialRatio: number; concurrentRatio: number };

async function appendFigures(): Promise<AppendFigures> {
  const segment = APPEND_DURATION / ROUNDS;
  console.log(`Batched append: ${String(BATCH)} events per transaction or call, ${String(ROUNDS)} rounds of ${segment.toFixed(2)} s per side`);
  const dir = mkdtempSync(join(tmpdir(), 'admin-bench-append-'));
  const writers = [rawWriter(dir), storeWriter(dir, 1), storeWriter(dir, CONCURRENT_APPENDERS)];
  try {
    for (const w of writers) await w.run(1);
    const rounds: number[][] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const rates: number[] = [];
      for (const w of writers) {
        flushDisk();
        rates.push(await w.run(segment));
      }
      rounds.push(rates);
      console.log(`  round ${String(round)}: ${writers.map((w, i) => `${w.name} ${fmt(rates[i] ?? NaN)} events/s`).join(' | ')}`);
    }
    const col = (i: number): number[] => rounds.map((r) => r[i] ?? NaN);
    const ratio = (i: number): number => median(rounds.map((r) => (r[i] ?? NaN) / (r[0] ?? NaN)));
    return { c: median(col(0)), sequential: median(col(1)), concurrent: median(col(2)), sequentialRatio: ratio(1), concurrentRatio: ratio(2) };
  } finally {
    for (const w of writers) await w.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// Report

type Row = [figure: string, baseline: string, measured: string, ratio: string, goal: string, met: boolean];

function table(h: HttpFigures, s: AppendFigures): string {
  // Rounded down, so a ratio just short of its goal never prints as reaching it.
  const x = (r: number): string => `${(Math.floor(r * 100) / 100).toFixed(2)}x`;
  const pct = (r: number): string => `${String(Math.floor(r * 100))}%`;
  const { create, get } = h;
  const rows: Row[] = [
    [`HTTP create, ${String(CONNECTIONS)} conn`, `${fmt(create.base.rate)}/s (A)`, `${fmt(create.measured.rate)}/s`, x(create.ratio), '≥ 1.3x', create.ratio >= 1.3],
    ['HTTP create p99', `${String(create.base.p99)} ms (A)`, `${String(create.measured.p99)} ms`, '—', '< 30 ms', create.measured.p99 < 30],
    [`HTTP get one, ${String(CONNECTIONS)} conn`, `${fmt(get.base.rate)}/s (B)`, `${fmt(get.measured.rate)}/s`, pct(get.ratio), '≥ 40%', get.ratio >= 0.4],
    ['HTTP get one p99', `${String(get.base.p99)} ms (B)`, `${String(get.measured.p99)} ms`, '—', '< 10 ms', get.measured.p99 < 10],
    [`append ${String(BATCH)} events, 1 caller`, `${fmt(s.c)} ev/s (C)`, `${fmt(s.sequential)} ev/s`, pct(s.sequentialRatio), '≥ 60%', s.sequentialRatio >= 0.6],
    [`append ${String(BATCH)} events, ${String(CONCURRENT_APPENDERS)} callers`, `${fmt(s.c)} ev/s (C)`, `${fmt(s.concurrent)} ev/s`, pct(s.concurrentRatio), '≥ 60%', s.concurrentRatio >= 0.6],
  ];
  const lines = rows.map(([f, b, m, r, g, ok]) => `| ${f} | ${b} | ${m} | ${r} | ${g} | ${ok ? 'yes' : 'NO'} |`);
  return ['| figure | baseline | measured | ratio | goal | met? |', '|---|---|---|---|---|---|', ...lines].join('\n');
}

async function main(): Promise<void> {
  const cpu = cpus();
  console.log(`Node ${process.version}, ${String(cpu.length)} x ${cpu[0]?.model ?? 'unknown CPU'}, temp folder ${tmpdir()}\n`);
  const started = performance.now();
  const h = await httpFigures();
  console.log('');
  const s = await appendFigures();
  console.log(`\n${table(h, s)}\n`);
  const failed = h.create.measured.failed + h.get.measured.failed + h.create.base.failed + h.get.base.failed;
  const took = ((performance.now() - started) / 1000).toFixed(0);
  console.log(`(${took} s in all; ${String(failed)} failed requests; every figure is the median of ${String(ROUNDS)} rounds, each ratio the median of the rounds' ratios)`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
});
