// `npm exec -- node bench/logDeletion.ts [--logs N] [--kept N]`: "delete old logs" at scale, on the embedded
// stores in a temporary folder, through the real HTTP app (inject): N matching logs (default
// 100,000) and `kept` others are created 64 at a time; one DELETE removes the N; then the retention
// pass (LOG_RETENTION_DAYS=0) purges their events; then the logs' read model is rebuilt from the
// purged log. Prints the time of each step, how many events the deletion appended, the log file's
// size before and after the purge, and checks (PASS or FAIL) that exactly N were deleted, that the
// others remain, that no position is handed out again and that the rebuild equals the live model.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { hs256Verifier, signHs256 } from '../api/auth.ts';
import { composeService } from '../api/compose.ts';
import type { Document } from '../domain/ports.ts';
import { EVENT_LOG_FILE, openEmbeddedStores } from '../infra/embedded.ts';

const { values: flags } = parseArgs({
  options: { logs: { type: 'string', default: '100000' }, kept: { type: 'string', default: '1000' } },
});
const N = Number(flags.logs);
const KEPT = Number(flags.kept);
const CONCURRENCY = 64;

const dataDir = mkdtempSync(join(tmpdir(), 'admin-bench-logs-'));
const secret = new TextEncoder().encode(`bench-${randomUUID()}-${randomUUID()}`);
const service = await composeService({
  ...openEmbeddedStores(dataDir),
  verifyToken: hs256Verifier(secret),
  settings: { logs: { retentionDays: 0 } },
  manualScheduler: true,
});
await service.startProjectors();
const authorization = `Bearer ${await signHs256(secret, { sub: 'bench-admin', roles: ['admin'] })}`;
const call = async (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) => {
  const res = await service.app.inject({
    method,
    url,
    headers: { authorization, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(payload === undefined ? {} : { payload: JSON.stringify(payload) }),
  });
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${String(res.statusCode)} ${res.body}`);
  return res;
};
const seconds = (since: number): string => `${((performance.now() - since) / 1000).toFixed(1)} s`;
const bytes = (): number =>
  [EVENT_LOG_FILE, `${EVENT_LOG_FILE}-wal`].reduce((sum, f) => sum + (statSync(join(dataDir, f), { throwIfNoEntry: false })?.size ?? 0), 0);
const mib = (n: number): string => `${(n / 1024 / 1024).toFixed(1)} MiB`;
const checks: [string, boolean][] = [];

async function snapshot(): Promise<Document[]> {
  const name = service.readModels.collectionOf('logs');
  const docs: Document[] = [];
  for (let after: string | undefined; ;) {
    const page = await service.readStore.scan(name, { ...(after === undefined ? {} : { after }), limit: 1000 });
    docs.push(...page);
    if (page.length < 1000) return docs;
    after = page.at(-1)?.id;
  }
}

const old = new Date(Date.now() - 10 * 86_400_000);
const body = (ownerId: string) => ({
  ownerType: 'ORDER',
  ownerId,
  logTypeCode: 'BULK',
  startDate: old.toISOString(),
  endDate: new Date(old.getTime() + 250).toISOString(),
  request: `POST /orders ${'{"item":"x","quantity":1}'.repeat(6)}`,
  response: `201 Created ${'{"status":"accepted"}'.repeat(6)}`,
  correlationId: randomUUID(),
});

try {
  await call('POST', '/api/v1/log-types', { code: 'BULK', name: 'Bulk' });
  let started = performance.now();
  let next = 0;
  const total = N + KEPT;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      for (let i = next++; i < total; i = next++) await call('POST', '/api/v1/logs', body(i < N ? 'O-DELETE' : 'O-KEEP'));
    }),
  );
  console.log(
    `created ${String(total)} logs over HTTP (inject), ${String(CONCURRENCY)} at a time: ${seconds(started)} (${(total / ((performance.now() - started) / 1000)).toFixed(0)}/s)`,
  );
  await call('POST', '/api/v1/indexes/refresh');
  const sizeBefore = bytes();

  // The longest the event loop was held (every request waits that long) during the deletion and
  // during the retention pass.
  const stalls = monitorEventLoopDelay({ resolution: 10 });
  const stall = (): string => {
    const max = stalls.max / 1e6;
    stalls.reset();
    return `longest event-loop stall ${max.toFixed(0)} ms`;
  };
  stalls.enable();
  started = performance.now();
  const headBefore = BigInt((await service.readStore.checkpoint('logs')).toString());
  const res = await call(
    'DELETE',
    `/api/v1/logs?code=BULK&olderThan=${encodeURIComponent(new Date().toISOString())}&ownerType=ORDER&ownerId=O-DELETE`,
  );
  const at = BigInt(String(res.headers['x-event-position']));
  const deleted = res.json<{ deleted: number }>().deleted;
  console.log(`DELETE /api/v1/logs: ${seconds(started)}, deleted ${String(deleted)}, events appended by it: ${String(at - headBefore)}`);
  started = performance.now();
  await call('POST', '/api/v1/indexes/refresh');
  console.log(`  read model folded the deletion within ${seconds(started)} more; ${stall()}`);
  checks.push([`deleted = ${String(N)}`, deleted === N]);
  checks.push(['one event appended', at - headBefore === 1n]);
  const count = async (owner: string) =>
    (await call('POST', '/api/v1/logs/count', { filter: [{ column: 'ownerId', value: owner }] })).json<number>();
  checks.push(['no deleted log left in the read model', (await count('O-DELETE')) === 0]);
  checks.push([`${String(KEPT)} others kept`, (await count('O-KEEP')) === KEPT]);
  const live = await snapshot();

  started = performance.now();
  await service.scheduler.tick();
  const sizeAfter = bytes();
  const deletion = (await call('POST', '/api/v1/log-deletions/search', { filter: [{ column: 'ownerId', value: 'O-DELETE' }] })).json<
    { purgedEvents?: number }[]
  >()[0];
  console.log(
    `retention pass: ${seconds(started)}, purged events ${String(deletion?.purgedEvents)}; log file ${mib(sizeBefore)} before, ${mib(sizeAfter)} after; ${stall()}`,
  );
  stalls.disable();
  checks.push([`${String(N)} events purged`, deletion?.purgedEvents === N]);
  checks.push(['the log file shrank', sizeAfter < sizeBefore]);
  const after = await call('POST', '/api/v1/logs', body('O-LATER'));
  checks.push(['a later append takes a higher position', BigInt(String(after.headers['x-event-position'])) > at]);

  started = performance.now();
  await call('POST', '/api/v1/indexes/refresh');
  const withLater = await snapshot();
  const ack = await call('POST', '/api/v1/indexes/logs/recreate');
  await service.readModelJobs.idle();
  const job = await call('GET', `/api/v1/jobs/${ack.json<{ jobId: string }>().jobId}`);
  const rebuilt = await snapshot();
  console.log(`rebuild of the logs read model from the purged log: ${seconds(started)} (${job.json<{ status: string }>().status})`);
  checks.push([
    'rebuild equals the live read model',
    JSON.stringify(rebuilt) === JSON.stringify(withLater) && withLater.length === live.length + 1,
  ]);
  for (const [name, ok] of checks) console.log(`${ok ? 'PASS' : 'FAIL'} ${name}`);
  if (checks.some(([, ok]) => !ok)) process.exitCode = 1;
} finally {
  await service.close();
  rmSync(dataDir, { recursive: true, force: true });
}
