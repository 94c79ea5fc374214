// Figure 6 of `npm run bench` (bench/http.ts): projection lag under sustained creates, an absolute
// figure (no baseline). A fresh service takes creates at a fixed rate (--lag-rate) for
// --lag-duration seconds; for one create in --lag-sample, as soon as its 201 arrives, a search
// with minPosition= its X-Event-Position looks for it in the read model, and the lag is the time
// from the create's answer to the answer that holds the record. bench/http.ts's header says why
// this and not /health/ready's lagMs or autocannon's overallRate.

import { Agent } from 'node:http';
import { cpus, loadavg } from 'node:os';
import { postJson, type Answer } from './common.ts';
import { bodyFor, flushDisk, fmt, json, newCode, RESOURCE, startServer, waitForProjections, type Row, type Server } from './httpSupport.ts';

export type LagOptions = {
  /** Creates per second. */
  rate: number;
  /** Seconds of the measured run. */
  seconds: number;
  /** One create in `sample` is looked for in the read model. */
  sample: number;
  /** Seconds of the warm-up run. */
  warmup: number;
  /** Keep-alive connections for the creates, and as many for the probes. */
  connections: number;
};

/** The share of the target rate the pacer must reach for the lag figure to count. */
const RATE_REACHED = 0.97;
/** DESIGN.md's bound on the lag's p99: 20 ms up to 2,000 creates/s, 50 ms up to 5,000/s. */
const lagGoalMs = (rate: number): number | undefined => (rate <= 2000 ? 20 : rate <= 5000 ? 50 : undefined);

/** Nearest-rank percentile of sorted values. */
const percentile = (sorted: readonly number[], p: number): number => sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)] ?? NaN;

type PacedRun = { ok: number; failed: number; seconds: number; createMs: number[]; lagMs: number[]; unseen: number };

/** Creates at o.rate by the clock for `seconds`; one in `sampleEvery` is looked for in the read
 * model right after its answer (POST /search?minPosition=, by its code). */
async function paced(o: LagOptions, service: Server, seconds: number, sampleEvery: number): Promise<PacedRun> {
  const url = new URL(service.url);
  const headers = { ...json, authorization: `Bearer ${service.token}` };
  const writes = new Agent({ keepAlive: true, maxSockets: o.connections });
  const reads = new Agent({ keepAlive: true, maxSockets: o.connections });
  const run: PacedRun = { ok: 0, failed: 0, seconds: 0, createMs: [], lagMs: [], unseen: 0 };
  const probe = async (code: string, id: string, position: string, answered: number): Promise<void> => {
    try {
      const filter = JSON.stringify({ filter: [{ column: 'code', operator: 'EQ', value: code }] });
      const res = await postJson(reads, url, `${RESOURCE}/search?size=1&minPosition=${position}`, headers, filter);
      const seen = res.status === 200 && (JSON.parse(res.body) as { id: string }[]).some((record) => record.id === id);
      if (seen) run.lagMs.push(performance.now() - answered);
      else run.unseen++;
    } catch {
      run.unseen++;
    }
  };
  let last = 0;
  const create = async (n: number): Promise<void> => {
    const code = newCode();
    const sent = performance.now();
    let res: Answer;
    try {
      res = await postJson(writes, url, RESOURCE, headers, bodyFor(code));
    } catch {
      run.failed++;
      return;
    }
    const answered = (last = performance.now());
    if (res.status !== 201) {
      run.failed++;
      return;
    }
    run.ok++;
    run.createMs.push(answered - sent);
    if (n % sampleEvery === 0 && res.position !== undefined)
      await probe(code, (JSON.parse(res.body) as { id: string }).id, res.position, answered);
  };
  const total = Math.round(seconds * o.rate);
  const pending: Promise<void>[] = [];
  const start = performance.now();
  await new Promise<void>((done) => {
    const timer = setInterval(() => {
      const due = Math.min(total, Math.floor(((performance.now() - start) * o.rate) / 1000));
      while (pending.length < due) pending.push(create(pending.length));
      if (pending.length >= total) {
        clearInterval(timer);
        done();
      }
    }, 1);
  });
  await Promise.all(pending);
  writes.destroy();
  reads.destroy();
  run.seconds = (last - start) / 1000;
  return run;
}

export type LagFigure = {
  rate: number;
  reached: boolean;
  failed: number;
  unseen: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  createP50: number;
  createP99: number;
};

export async function lagFigure(o: LagOptions): Promise<LagFigure> {
  console.log(
    `Projection lag: ${fmt(o.rate)} creates/s by the clock for ${String(o.seconds)} s, one create in ${String(o.sample)} looked for in the read model (absolute, no baseline)`,
  );
  const service = await startServer('service');
  try {
    await paced(o, service, o.warmup, o.sample);
    await waitForProjections(service);
    flushDisk();
    const loadBefore = loadavg()[0] ?? NaN;
    const run = await paced(o, service, o.seconds, o.sample);
    const loadAfter = loadavg()[0] ?? NaN;
    const lags = [...run.lagMs].sort((a, b) => a - b);
    const createMs = [...run.createMs].sort((a, b) => a - b);
    const rate = run.ok / run.seconds;
    const figure: LagFigure = {
      rate,
      reached: rate >= RATE_REACHED * o.rate,
      failed: run.failed,
      unseen: run.unseen,
      p50: percentile(lags, 0.5),
      p95: percentile(lags, 0.95),
      p99: percentile(lags, 0.99),
      max: lags.at(-1) ?? NaN,
      createP50: percentile(createMs, 0.5),
      createP99: percentile(createMs, 0.99),
    };
    const ms = (n: number): string => n.toFixed(1);
    console.log(
      `  creates: target ${fmt(o.rate)}/s, reached ${fmt(rate)}/s (${fmt(run.ok)} in ${run.seconds.toFixed(1)} s, ${String(run.failed)} failed: ${figure.reached ? 'reached' : 'NOT reached'}), create latency p50 ${ms(figure.createP50)} ms p99 ${ms(figure.createP99)} ms`,
    );
    console.log(
      `  lag from a create's answer to a read-model answer holding it, ${fmt(lags.length)} creates: p50 ${ms(figure.p50)} ms, p95 ${ms(figure.p95)} ms, p99 ${ms(figure.p99)} ms, max ${ms(figure.max)} ms (${String(run.unseen)} not seen)`,
    );
    // Absolute, so what else ran weighs on it: the machine's 1-minute load average around the run.
    console.log(`  (load average ${loadBefore.toFixed(1)} before, ${loadAfter.toFixed(1)} after, on ${String(cpus().length)} cores)`);
    return figure;
  } finally {
    await service.stop();
  }
}

export function lagRow(l: LagFigure, rate: number): Row {
  const ms = (n: number): string => n.toFixed(1);
  const goal = lagGoalMs(rate);
  return [
    `projection lag, creates at ${fmt(rate)}/s`,
    'none (absolute)',
    `p50 ${ms(l.p50)} / p95 ${ms(l.p95)} / p99 ${ms(l.p99)} ms; ${fmt(l.rate)}/s ${l.reached ? 'reached' : 'NOT reached'}`,
    '—',
    goal === undefined ? 'none above 5,000/s' : `p99 < ${String(goal)} ms`,
    goal !== undefined && l.reached && l.p99 < goal && l.unseen === 0,
  ];
}
