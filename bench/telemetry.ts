// The telemetry figures of `npm run bench` (figure 9; alone: `npm run bench:telemetry`): HTTP get
// one (GET /api/v1/user-group-types/{id}, 50 connections, rotating over records created first) on
// three services, each bench/server.ts `service` in its own process on fresh data:
//
//   T  baseline: the service started without the preload (`node bench/server.ts service`), no OTEL_*
//      variable: what ran before telemetry existed, but for the few lines of it in the app's code.
//      With --before DIR, T is instead DIR's own bench/server.ts: DIR a copy of an earlier commit
//      (e.g. the one before telemetry came), so T runs that commit's code, not this one's.
//   U  the service under the preload (`node --import ./infra/telemetry/register.ts …`), no OTEL_*
//      variable: telemetry off, as `npm start` runs it by default. Goal: at least 97% of T.
//   V  the preload with traces on: OTLP over HTTP to a sink in this process that answers 200 and
//      keeps nothing (the SDK's batch processor, its default queue and batch sizes). No goal: what
//      tracing every request costs.
//
// Each round starts the three services afresh (two processes of the same code differ by several
// per cent in steady state: JIT decisions, heap layout), creates records on each for --warmup
// seconds, warms each up for --warmup seconds, then runs each for --duration/--rounds seconds, in
// each of the six orders in turn (T U V, V T U, U V T, V U T, …) so that a drift of the machine's
// load, and any advantage of a place in the order, weighs on all alike; then stops them. Each
// throughput ratio is the median of the rounds' ratios. On a shared machine other processes' bursts move
// throughput by far more than 3% from one round to the next, so each side's CPU time per request
// is measured too (the server process's user + system time from /proc/<pid>/stat over its rounds,
// divided by the requests answered; Linux only): what one request costs the service, whatever
// else the machine runs. With --before, DIR needs node_modules (a symlink to this one):
//
//   mkdir /tmp/before && git archive <commit> | tar -x -C /tmp/before && ln -s "$PWD/node_modules" /tmp/before/
//   npm run bench:telemetry -- --before /tmp/before
//
// --calibrate starts U exactly as T (no preload): an A/A run whose ratios show how far two processes
// of the same code differ here (JIT and heap layout, the neighbours' load), the resolution of the
// figure on this machine.
//
// Flags: --duration S (per side, default 30), --warmup S (default 3), --rounds N (default 12; a
// multiple of 6 gives each order as often),
// --connections N (default 50), --before DIR, --calibrate.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { PRELOAD, V8_FLAGS } from '../api/nodeFlags.ts';
import autocannon, { type Options, type Request } from 'autocannon';

/** Per side: requests per second (median of rounds) and CPU ms per request (all rounds; NaN
 * where /proc is absent). Ratios against T: throughput ratio median of rounds, CPU ratio of totals. */
export type TelemetryFigure = {
  off: number;
  on: number;
  rates: { base: number; off: number; on: number };
  cpu: { base: number; off: number; on: number };
  before: string | undefined;
  /** U was started as T (an A/A run). */
  calibrate: boolean;
  spansReceived: number;
};

type Server = { url: string; token: string; pid: number | undefined; stop: () => Promise<void> };
const RESOURCE = '/api/v1/user-group-types';
const root = join(import.meta.dirname, '..');
const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
};
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');

/** The environment without any OTEL_* of the caller's, plus `extra`. */
const envWith = (extra: Record<string, string>): NodeJS.ProcessEnv => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_'))),
  ...extra,
});

async function startService(dir: string, nodeFlags: string[], env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, [...nodeFlags, join(dir, 'bench', 'server.ts'), 'service'], {
    cwd: dir,
    env: envWith(env),
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((done) =>
    child.once('exit', () => {
      done();
    }),
  );
  const lines = createInterface({ input: child.stdout });
  const ready = await new Promise<string>((ok, fail) => {
    lines.on('line', (line) => {
      if (line.startsWith('READY ')) ok(line.slice('READY '.length));
    });
    void exited.then(() => {
      fail(new Error(`bench server in ${dir} exited before it was ready`));
    });
  });
  const info = JSON.parse(ready) as { url: string; token: string };
  return {
    ...info,
    pid: child.pid,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** An OTLP/HTTP endpoint that answers every export with 200 and keeps nothing but a count of exports. */
async function otlpSink(): Promise<{ url: string; received: () => number; close: () => Promise<void> }> {
  let exports = 0;
  const server: HttpServer = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      exports++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    received: () => exports,
    close: () =>
      new Promise((ok) =>
        server.close(() => {
          ok();
        }),
      ),
  };
}

/** CPU time (user + system, ms) the process has used, from /proc; NaN where there is none. */
function cpuMs(pid: number | undefined): number {
  try {
    const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}
/** Linux's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every mainstream kernel build. */
const CLOCK_TICKS = 100;

type Run = { rate: number; ok: number; cpuMs: number };

async function rate(options: Options, seconds: number, connections: number, pid?: number): Promise<Run> {
  const before = cpuMs(pid);
  const r = await autocannon({ connections, timeout: 10, ...options, duration: seconds });
  const failed = r.non2xx + r.errors + r.timeouts;
  if (failed > 0) console.log(`    ! ${String(failed)} requests failed`);
  return { rate: r['2xx'] / r.duration, ok: r['2xx'], cpuMs: cpuMs(pid) - before };
}

/** Creates records for `seconds` and answers up to 5,000 of their ids. */
async function seed(server: Server, seconds: number, connections: number): Promise<string[]> {
  const ids: string[] = [];
  const tag = Math.random().toString(36).slice(2, 8);
  let n = 0;
  const create: Request = {
    method: 'POST',
    path: RESOURCE,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${server.token}` },
    setupRequest: (req) => ({ ...req, body: JSON.stringify({ code: `TEL-${tag}-${String(n++)}`, name: 'Telemetry bench', registry: {} }) }),
    onResponse: (status, body) => {
      if (status === 201 && ids.length < 5000) ids.push((JSON.parse(body) as { id: string }).id);
    },
  };
  await rate({ url: server.url, requests: [create] }, seconds, connections);
  if (ids.length === 0) throw new Error('no record was created');
  // Let the projector fold them before the reads.
  for (const id of ids.slice(-1)) {
    for (let i = 0; i < 500; i++) {
      const res = await fetch(`${server.url}${RESOURCE}/${id}`, { headers: { authorization: `Bearer ${server.token}` } });
      if (res.ok) break;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return ids;
}

function rotatingGet(server: Server, ids: readonly string[]): Options {
  let next = 0;
  const get: Request = {
    method: 'GET',
    headers: { authorization: `Bearer ${server.token}` },
    setupRequest: (req) => ({ ...req, path: `${RESOURCE}/${ids[next++ % ids.length] ?? ''}` }),
  };
  return { url: server.url, requests: [get] };
}

/** Every order of the three sides in turn, so that each side is first, second and third equally
 * often over 6 rounds: with only T U V and V U T, U was always second, and an A/A run showed the
 * second place worth about 3% (U = T at 101.6% throughput, 97.2% CPU per request). */
const ORDERS = [
  [0, 1, 2],
  [2, 0, 1],
  [1, 2, 0],
  [2, 1, 0],
  [0, 2, 1],
  [1, 0, 2],
] as const;

type Options3 = { duration: number; warmup: number; rounds: number; connections: number; before?: string; calibrate?: boolean };
type Side = { name: string; start: () => Promise<Server> };
const none: Run = { rate: NaN, ok: 0, cpuMs: NaN };

/** One round: the three sides started fresh (in `order`), seeded, warmed up, measured in `order`,
 * stopped. Fresh processes every round: one process's JIT and heap layout weigh on one round only. */
async function round(sides: readonly Side[], order: readonly number[], o: Options3): Promise<Run[]> {
  const servers: (Server | undefined)[] = [undefined, undefined, undefined];
  try {
    for (const i of order) servers[i] = await sides[i]?.start();
    const loads: (Options | undefined)[] = [undefined, undefined, undefined];
    for (const i of order) {
      const server = servers[i];
      if (server !== undefined) loads[i] = rotatingGet(server, await seed(server, o.warmup, o.connections));
    }
    for (const i of order) await rate(loads[i] ?? { url: '' }, o.warmup, o.connections);
    const r: Run[] = [none, none, none];
    for (const i of order) r[i] = await rate(loads[i] ?? { url: '' }, o.duration / o.rounds, o.connections, servers[i]?.pid);
    return r;
  } finally {
    for (const server of servers) await server?.stop();
  }
}

export async function telemetryFigure(options: Options3): Promise<TelemetryFigure> {
  const sink = await otlpSink();
  try {
    const t = options.before ?? root;
    const sides: Side[] = [
      { name: `T ${t}`, start: () => startService(t, [...V8_FLAGS], {}) },
      // Calibration: U as T, an A/A run.
      options.calibrate === true
        ? { name: 'U = T', start: () => startService(t, [...V8_FLAGS], {}) }
        : { name: 'U preload, off', start: () => startService(root, [...V8_FLAGS, ...PRELOAD], {}) },
      {
        name: 'V traces on',
        start: () =>
          startService(root, [...V8_FLAGS, ...PRELOAD], {
            OTEL_TRACES_EXPORTER: 'otlp',
            OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
            OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
          }),
      },
    ];
    const perRound: Run[][] = [];
    for (let n = 0; n < options.rounds; n++) {
      const r = await round(sides, ORDERS[n % ORDERS.length] ?? [0, 1, 2], options);
      perRound.push(r);
      const [tr = none, u = none, v = none] = r;
      const us = (x: Run): string => `${((x.cpuMs * 1000) / x.ok).toFixed(0)} µs CPU/req`;
      console.log(
        `  round ${String(n + 1)}: T ${fmt(tr.rate)}/s ${us(tr)} | U ${fmt(u.rate)}/s ${us(u)} (${(u.rate / tr.rate).toFixed(3)}) | V ${fmt(v.rate)}/s ${us(v)} (${(v.rate / tr.rate).toFixed(3)})`,
      );
    }
    const col = (i: number) => perRound.map((r) => r[i] ?? none);
    const cpuPerRequest = (i: number): number => col(i).reduce((n, x) => n + x.cpuMs, 0) / col(i).reduce((n, x) => n + x.ok, 0);
    return {
      off: median(perRound.map(([tr = none, u = none]) => u.rate / tr.rate)),
      on: median(perRound.map(([tr = none, , v = none]) => v.rate / tr.rate)),
      rates: { base: median(col(0).map((x) => x.rate)), off: median(col(1).map((x) => x.rate)), on: median(col(2).map((x) => x.rate)) },
      cpu: { base: cpuPerRequest(0), off: cpuPerRequest(1), on: cpuPerRequest(2) },
      before: options.before,
      calibrate: options.calibrate === true,
      spansReceived: sink.received(),
    };
  } finally {
    await sink.close();
  }
}

export function telemetryRows(f: TelemetryFigure): [string, string, string, string, string, boolean][] {
  const pct = (r: number): string => `${(r * 100).toFixed(1)}%`;
  const base = f.before === undefined ? 'no preload' : `commit in ${f.before}`;
  const off = f.calibrate ? 'U = T (calibration, A/A)' : 'telemetry off (preload present)';
  const us = (ms: number): string => `${(ms * 1000).toFixed(1)} µs`;
  const cpuRows: [string, string, string, string, string, boolean][] = Number.isNaN(f.cpu.base)
    ? []
    : [
        [
          `CPU per get one, ${off}`,
          `${us(f.cpu.base)} (T)`,
          us(f.cpu.off),
          pct(f.cpu.off / f.cpu.base),
          '≤ 103%',
          f.cpu.off / f.cpu.base <= 1.03,
        ],
        ['CPU per get one, traces on', `${us(f.cpu.base)} (T)`, us(f.cpu.on), pct(f.cpu.on / f.cpu.base), 'none', true],
      ];
  return [
    [`HTTP get one, ${off}`, `${fmt(f.rates.base)}/s (T, ${base})`, `${fmt(f.rates.off)}/s`, pct(f.off), '≥ 97%', f.off >= 0.97],
    [
      'HTTP get one, traces on (OTLP to a local sink)',
      `${fmt(f.rates.base)}/s (T, ${base})`,
      `${fmt(f.rates.on)}/s`,
      pct(f.on),
      'none',
      true,
    ],
    ...cpuRows,
  ];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      duration: { type: 'string', default: '30' },
      warmup: { type: 'string', default: '3' },
      rounds: { type: 'string', default: '12' },
      connections: { type: 'string', default: '50' },
      before: { type: 'string' },
      calibrate: { type: 'boolean', default: false },
    },
  });
  const options = {
    duration: Number(values.duration),
    warmup: Number(values.warmup),
    rounds: Math.max(1, Math.round(Number(values.rounds))),
    connections: Math.round(Number(values.connections)),
    ...(values.before === undefined ? {} : { before: resolve(values.before) }),
    calibrate: values.calibrate,
  };
  if (options.calibrate)
    console.log('Calibration: U is started exactly as T (no preload); its ratios are those of two processes of the same code.');
  console.log(
    `Telemetry: HTTP get one, ${String(options.connections)} connections, ${String(options.rounds)} rounds of ${(options.duration / options.rounds).toFixed(1)} s per side`,
  );
  const f = await telemetryFigure(options);
  const rows = telemetryRows(f).map(([a, b, c, d, e, ok]) => `| ${a} | ${b} | ${c} | ${d} | ${e} | ${ok ? 'yes' : 'NO'} |`);
  console.log(['', '| figure | baseline | measured | ratio | goal | met? |', '|---|---|---|---|---|---|', ...rows].join('\n'));
  console.log(`(V's sink took ${String(f.spansReceived)} OTLP exports)`);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exitCode = 1;
  });
}
