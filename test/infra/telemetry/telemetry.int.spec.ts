// The service as `npm start` runs it (`node … --import ./infra/telemetry/register.ts api/main.ts`, a
// child process on a temporary DATA_DIR) with OTEL_TRACES_EXPORTER=console: the console exporter's
// output is parsed back into spans. One create shows its HTTP span with the append and the
// read-model wait inside it, a caller's traceparent is kept, a failing request's error body names
// its trace, and the projection lag gauges reach the metric exporter. Without OTEL_* the preload
// starts nothing.

import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../support/serviceProcess.ts';

const root = join(import.meta.dirname, '../../..');
const PRELOAD = './infra/telemetry/register.ts';

type Running = ServiceProcess & { dataDir: string };

async function start(env: Record<string, string>): Promise<Running> {
  const dataDir = mkdtempSync(join(tmpdir(), 'otel-'));
  // Only the variables given here: an OTEL_* of the test runner's own must not leak in.
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
  const started = await startServiceProcess({
    ...inherited,
    PORT: '0',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'warn',
    AUTH_JWT_SECRET: `otel-test-${randomUUID()}-${randomUUID()}`,
    ...env,
  });
  return { ...started, dataDir };
}

/** SIGTERM, as an orchestrator stops it: the service closes and flushes its telemetry. */
async function stop(s: Running): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) =>
    s.child.once('exit', (code) => {
      resolve(code);
    }),
  );
  s.child.kill('SIGTERM');
  const code = await exited;
  rmSync(s.dataDir, { recursive: true, force: true });
  return code;
}

type Span = { traceId: string; id: string; name: string; parentId: string | undefined; parentRemote: boolean; block: string };

/** The ConsoleSpanExporter's output (console.dir of each span, one `{ … }` block from column 0 to
 * column 0) back into spans; other blocks (metrics) and log lines are left out. */
function spansIn(output: string): Span[] {
  const blocks = output.split('\n').reduce<{ all: string[]; open: string[] | undefined }>(
    (acc, line) => {
      if (line === '{') acc.open = [line];
      else if (acc.open !== undefined) {
        acc.open.push(line);
        if (line === '}') {
          acc.all.push(acc.open.join('\n'));
          acc.open = undefined;
        }
      }
      return acc;
    },
    { all: [], open: undefined },
  ).all;
  return blocks.flatMap((block) => {
    const field = (name: string): string | undefined => new RegExp(`\\n  ${name}: '([^'\\n]*)'`).exec(block)?.[1];
    const traceId = field('traceId');
    const id = field('id');
    const name = field('name');
    if (traceId === undefined || id === undefined || name === undefined) return [];
    const parent = /\n {2}parentSpanContext: (undefined|\{[\s\S]*?\})/.exec(block)?.[1];
    const parentId = parent === undefined ? undefined : /spanId: '([0-9a-f]{16})'/.exec(parent)?.[1];
    return [{ traceId, id, name, parentId, parentRemote: parent?.includes('isRemote: true') === true, block }];
  });
}

/** Whether `span` lies inside `ancestor` (its parent, or its parent's parent, …). */
function within(span: Span, ancestor: Span, spans: readonly Span[]): boolean {
  const byId = new Map(spans.map((s) => [s.id, s]));
  let at: Span | undefined = span;
  for (let hops = 0; at !== undefined && hops < 50; hops++) {
    if (at.parentId === ancestor.id) return true;
    at = at.parentId === undefined ? undefined : byId.get(at.parentId);
  }
  return false;
}

async function until<T>(what: string, probe: () => T | undefined, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not seen in ${String(ms)} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const hex = (n: number): string => randomUUID().replaceAll('-', '').slice(0, n);
const RESOURCE = '/api/v1/user-group-types';

describe('the service with OTEL_TRACES_EXPORTER=console', () => {
  let s: Running;
  beforeAll(async () => {
    s = await start({ OTEL_TRACES_EXPORTER: 'console', OTEL_METRICS_EXPORTER: 'console', OTEL_METRIC_EXPORT_INTERVAL: '500' });
  }, 90_000);
  afterAll(async () => {
    if (s.child.exitCode === null) await stop(s);
  });

  const call = (method: string, path: string, headers: Record<string, string> = {}, body?: unknown) =>
    fetch(s.url + path, {
      method,
      headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  it('shows a create as its HTTP span holding the append and the read-model wait, in the trace of the caller’s traceparent', async () => {
    const callerTrace = hex(32);
    const callerSpan = hex(16);
    const code = `OTEL-${hex(8)}`;
    const res = await call(
      'POST',
      `${RESOURCE}?immediatelyRefresh=true`,
      { traceparent: `00-${callerTrace}-${callerSpan}-01` },
      { code, name: 'Traced', registry: {} },
    );
    expect(res.status).toBe(201);

    // The handler's span (between the HTTP span and the store calls) ends after the HTTP span:
    // the reply is sent from inside the handler.
    const { http, append, wait, spans } = await until('the HTTP span of the create with the append and the wait inside', () => {
      const all = spansIn(s.output());
      const found = (name: string) => all.find((x) => x.traceId === callerTrace && x.name === name);
      const [h, a, w] = [found(`POST ${RESOURCE}`), found('event_store.append'), found('readModel.wait')];
      return h !== undefined && a !== undefined && w !== undefined && within(a, h, all) && within(w, h, all)
        ? { http: h, append: a, wait: w, spans: all }
        : undefined;
    });
    // The caller's span is the parent, across the process boundary.
    expect(http.parentId).toBe(callerSpan);
    expect(http.parentRemote).toBe(true);
    expect(http.block).toContain("'http.response.status_code': 201");
    expect(spans.filter((x) => x.traceId === callerTrace && x.parentId === undefined)).toEqual([]);
    expect(append.block).toContain("'event_store.stream': 'userGroupType-");
    expect(wait.block).toContain("'read_model.name': 'user_group_types'");
    expect(wait.block).toContain("'read_model.reached': true");

    // The projector folded the event in a batch span of its own, which read and wrote the read model.
    const batch = await until('the projector batch', () => spansIn(s.output()).find((x) => x.name === 'batch user_group_types'));
    const all = spansIn(s.output());
    expect(all.some((x) => x.name === 'read_store.applyBatch' && within(x, batch, all))).toBe(true);
  });

  it('answers a failing request with an error body whose traceId is its trace’s', async () => {
    const res = await call('GET', `${RESOURCE}/NO-SUCH-${hex(8)}`);
    expect(res.status).toBe(404);
    const body = (await res.json()) as { traceId: string };
    expect(body.traceId).toMatch(/^[0-9a-f]{32}$/);
    const http = await until('the HTTP span of the failed read', () =>
      spansIn(s.output()).find((x) => x.name === `GET ${RESOURCE}/:idOrCode` && x.traceId === body.traceId),
    );
    // No traceparent: a root span, its trace id drawn by the SDK and the one the body names.
    expect(http.parentId).toBeUndefined();
    expect(http.block).toContain("'http.response.status_code': 404");
  });

  it('keeps a caller’s trace id in the error body of a failing write', async () => {
    const callerTrace = hex(32);
    const code = `OTEL-${hex(8)}`;
    expect((await call('POST', RESOURCE, {}, { code, name: 'First', registry: {} })).status).toBe(201);
    const res = await call('POST', RESOURCE, { traceparent: `00-${callerTrace}-${hex(16)}-01` }, { code, name: 'Same code', registry: {} });
    expect(res.status).toBe(409);
    expect(((await res.json()) as { traceId: string }).traceId).toBe(callerTrace);
    // That trace is the request's: its HTTP span (409) holds the append the code's claim refused.
    const { http, append } = await until('the HTTP span of the refused create with its append', () => {
      const all = spansIn(s.output());
      const h = all.find((x) => x.traceId === callerTrace && x.name === `POST ${RESOURCE}`);
      const a = all.find((x) => x.traceId === callerTrace && x.name === 'event_store.append');
      return h !== undefined && a !== undefined && within(a, h, all) ? { http: h, append: a } : undefined;
    });
    expect(http.block).toContain("'http.response.status_code': 409");
    expect(append.block).toMatch(/status: \{ code: 2, message: 'code .* is taken' \}/);
  });

  it('exports the projection lag of every read model as gauges', async () => {
    const text = await until('the projection lag gauges', () => {
      const out = s.output();
      return out.includes("name: 'projection.lag'") && out.includes("name: 'projection.lag.duration'") ? out : undefined;
    });
    expect(text).toContain("read_model: 'user_group_types'");
  });

  it('stops on SIGTERM with the telemetry flushed', async () => {
    expect(await stop(s)).toBe(0);
  });
});

describe('the service with OTEL_EXPORTER_OTLP_ENDPOINT', () => {
  type Received = { path: string; body: unknown };
  let received: Received[] = [];
  let collector: Server;
  beforeAll(async () => {
    // A collector: OTLP over HTTP with JSON bodies, every export kept.
    collector = createServer((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      req.on('end', () => {
        received.push({ path: req.url ?? '', body: JSON.parse(text) as unknown });
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((ok) => collector.listen(0, '127.0.0.1', ok));
  });
  afterAll(async () => {
    await new Promise((ok) => collector.close(ok));
  });

  type OtlpSpan = { traceId: string; name: string };
  const spansSent = (): OtlpSpan[] =>
    received
      .filter((r) => r.path === '/v1/traces')
      .flatMap((r) => (r.body as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans)
      .flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans));
  const metricNames = (): string[] =>
    received
      .filter((r) => r.path === '/v1/metrics')
      .flatMap((r) => (r.body as { resourceMetrics: { scopeMetrics: { metrics: { name: string }[] }[] }[] }).resourceMetrics)
      .flatMap((rm) => rm.scopeMetrics.flatMap((sm) => sm.metrics.map((m) => m.name)));

  it('exports traces and the lag gauges there, and the last spans on SIGTERM', async () => {
    received = [];
    const { port } = collector.address() as AddressInfo;
    // Batches and metrics wait 10 minutes: the spans of the request below and a metric reading
    // leave only because SIGTERM flushes them.
    const s = await start({
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${String(port)}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '600000',
      OTEL_METRIC_EXPORT_INTERVAL: '600000',
    });
    expect(s.output()).toContain(`telemetry: traces to otlp, metrics to otlp (OTLP endpoint http://127.0.0.1:${String(port)})`);
    const callerTrace = hex(32);
    const res = await fetch(`${s.url}${RESOURCE}/NO-SUCH-${hex(8)}`, {
      headers: { authorization: `Bearer ${s.token}`, traceparent: `00-${callerTrace}-${hex(16)}-01` },
    });
    expect(res.status).toBe(404);
    expect(spansSent()).toEqual([]);
    expect(await stop(s)).toBe(0);
    expect(spansSent()).toContainEqual(expect.objectContaining({ traceId: callerTrace, name: `GET ${RESOURCE}/:idOrCode` }));
    expect(metricNames()).toEqual(expect.arrayContaining(['projection.lag', 'projection.lag.duration']));
  });
});

describe('the preload', () => {
  /** Runs a snippet after the preload with the given environment: what OpenTelemetry registered
   * globally, and whether the SDK's module was loaded. */
  const probe = (env: Record<string, string>) =>
    new Promise<{ globals: string[]; sdkLoaded: boolean }>((resolve, reject) => {
      const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OTEL_')));
      const snippet = [
        "import { createRequire } from 'node:module';",
        "const api = globalThis[Symbol.for('opentelemetry.js.api.1')] ?? {};",
        "const sdkLoaded = Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes('@opentelemetry/sdk-node'));",
        "console.log(JSON.stringify({ globals: Object.keys(api).filter((k) => k !== 'version'), sdkLoaded }));",
        'process.exit(0);',
      ].join('\n');
      const child = spawn(process.execPath, ['--import', PRELOAD, '--input-type=module', '-e', snippet], {
        cwd: root,
        env: { ...inherited, ...env },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString('utf8')));
      child.once('error', reject);
      child.once('exit', () => {
        try {
          resolve(JSON.parse(out.trim().split('\n').at(-1) ?? '') as { globals: string[]; sdkLoaded: boolean });
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
    });

  it('starts nothing and loads no SDK without OTEL_* variables', async () => {
    expect(await probe({})).toEqual({ globals: [], sdkLoaded: false });
  }, 60_000);

  it('registers the tracer, context and propagation when traces are asked for', async () => {
    const { globals, sdkLoaded } = await probe({ OTEL_TRACES_EXPORTER: 'console' });
    expect(sdkLoaded).toBe(true);
    expect(globals).toEqual(expect.arrayContaining(['trace', 'context', 'propagation']));
  }, 60_000);
});
