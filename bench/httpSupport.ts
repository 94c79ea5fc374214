// Shared by the figures of `npm run bench` (bench/http.ts runs them; bench/httpCreateGet.ts,
// append.ts, peer.ts, lag.ts and logCreate.ts are one figure each): the servers in child processes,
// autocannon, the rounds that alternate a baseline with its counterpart, and the report's rows.

import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import autocannon, { type Options, type Request, type Result } from 'autocannon';
import { V8_FLAGS } from '../api/nodeFlags.ts';

/** The options every HTTP figure runs with (bench/http.ts's flags). */
export type HttpOptions = {
  /** Seconds per side, split over the rounds. */
  duration: number;
  /** Seconds of each side's warm-up. */
  warmup: number;
  rounds: number;
  connections: number;
};

export const RESOURCE = '/api/v1/user-group-types';

export const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
export const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
};

// ---------------------------------------------------------------------------------------------
// Servers in child processes, and autocannon

/** What a SQLite event log runs at, as a server reports it. */
export type Durability = { journalMode: string; synchronous: string; sqlite?: string };

export type Server = { url: string; token: string; durability?: Durability; stop: () => Promise<void> };

/** `mode` is bench/server.ts's, or 'emmett' for the peer (bench/emmett/server.ts). */
export async function startServer(mode: 'service' | 'raw-insert' | 'const' | 'emmett', nodeFlags: string[] = []): Promise<Server> {
  const script = mode === 'emmett' ? [join(import.meta.dirname, 'emmett', 'server.ts')] : [join(import.meta.dirname, 'server.ts'), mode];
  // The service runs with the V8 flags npm start gives it; the baselines with Node's defaults.
  const child = spawn(process.execPath, [...(mode === 'service' ? V8_FLAGS : []), ...nodeFlags, ...script], {
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
      fail(new Error(`bench server "${mode}" exited before it was ready`));
    });
  });
  const info = JSON.parse(ready) as { url: string; token: string; durability?: Durability };
  return {
    ...info,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** One autocannon run, or several combined: 2xx per second, latency in ms. */
export type Load = { rate: number; p50: number; p99: number; ok: number; seconds: number; failed: number };

export async function load(options: Options, duration: number, connections: number): Promise<Load> {
  const r: Result = await autocannon({ connections, timeout: 10, ...options, duration });
  const failed = r.non2xx + r.errors + r.timeouts;
  if (failed > 0)
    console.log(
      `    ! ${String(failed)} requests failed (non-2xx ${String(r.non2xx)}, errors ${String(r.errors)}, timeouts ${String(r.timeouts)})`,
    );
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
export type Pair = { base: Load; measured: Load; ratio: number };

/** Writes the page cache's dirty pages out, so one side's writeback does not land in the other's
 * fsyncs (Linux `sync`; skipped where there is none). */
export function flushDisk(): void {
  try {
    execFileSync('sync', { stdio: 'ignore' });
  } catch {
    // no sync(1) here: the rounds and medians still even it out
  }
}

/** Warms both sides up, then o.rounds rounds of baseline-then-measured, `after` run after each
 * measured side (outside the timed window). */
export async function alternate(
  o: HttpOptions,
  names: [string, string],
  base: Options,
  measured: Options,
  after?: () => Promise<void>,
): Promise<Pair> {
  await load(base, o.warmup, o.connections);
  await load(measured, o.warmup, o.connections);
  await after?.();
  const b: Load[] = [];
  const m: Load[] = [];
  for (let round = 1; round <= o.rounds; round++) {
    flushDisk();
    const x = await load(base, o.duration / o.rounds, o.connections);
    flushDisk();
    const y = await load(measured, o.duration / o.rounds, o.connections);
    b.push(x);
    m.push(y);
    console.log(
      `  round ${String(round)}: ${names[0]} ${fmt(x.rate)}/s p99 ${String(x.p99)} ms | ${names[1]} ${fmt(y.rate)}/s p99 ${String(y.p99)} ms | ratio ${(y.rate / x.rate).toFixed(2)}`,
    );
    await after?.();
  }
  return { base: combine(b), measured: combine(m), ratio: median(m.map((y, i) => y.rate / (b[i]?.rate ?? NaN))) };
}

/** "N rounds of S s per side", as the figures' headings print it. */
export const segment = (o: HttpOptions): string => `${String(o.rounds)} rounds of ${(o.duration / o.rounds).toFixed(1)} s per side`;

/** Waits until every read model has projected the whole log; returns how long that took. */
export async function waitForProjections(server: Server, timeoutMs = 120_000): Promise<number> {
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
// Requests

export const json = { 'content-type': 'application/json' };
/** Tags this run's codes, so two runs never collide. */
export const runTag = randomUUID().slice(0, 8);
let codeCounter = 0;
export const newCode = (): string => `BENCH-${runTag}-${String(codeCounter++)}`;
export const bodyFor = (code: string): string =>
  JSON.stringify({ code, name: 'Bench group type', description: 'Created by npm run bench', registry: {} });
const createBody = (): string => bodyFor(newCode());

/** POSTs whose every body carries a code never sent before. */
export function creates(path: string, headers: Record<string, string>, onCreated?: (id: string) => void): Request[] {
  const request: Request = { method: 'POST', path, headers, setupRequest: (req) => ({ ...req, body: createBody() }) };
  if (onCreated !== undefined) {
    request.onResponse = (status, body) => {
      if (status === 201) onCreated((JSON.parse(body) as { id: string }).id);
    };
  }
  return [request];
}

/** GET one, rotating over `ids`. */
export function rotatingGet(server: Server, ids: readonly string[]): Options {
  let next = 0;
  const headers: Record<string, string> = server.token === '' ? {} : { authorization: `Bearer ${server.token}` };
  const get: Request = {
    method: 'GET',
    headers,
    setupRequest: (req) => ({ ...req, path: `${RESOURCE}/${ids[next++ % ids.length] ?? ''}` }),
  };
  return { url: server.url, requests: [get] };
}

/** Keeps the first 10,000 ids created. */
export const keepInto =
  (ids: string[]) =>
  (id: string): void => {
    if (ids.length < 10_000) ids.push(id);
  };

// ---------------------------------------------------------------------------------------------
// Report

export type Row = [figure: string, baseline: string, measured: string, ratio: string, goal: string, met: boolean];

// Rounded down, so a ratio just short of its goal never prints as reaching it.
export const x = (r: number): string => `${(Math.floor(r * 100) / 100).toFixed(2)}x`;
export const pct = (r: number): string => `${String(Math.floor(r * 100))}%`;

export const tableOf = (rows: readonly Row[]): string =>
  [
    '| figure | baseline | measured | ratio | goal | met? |',
    '|---|---|---|---|---|---|',
    ...rows.map(([f, b, m, r, g, ok]) => `| ${f} | ${b} | ${m} | ${r} | ${g} | ${ok ? 'yes' : 'NO'} |`),
  ].join('\n');

export const failures = (...pairs: Pair[]): number => pairs.reduce((n, p) => n + p.base.failed + p.measured.failed, 0);
