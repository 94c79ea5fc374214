// One record near the record limit (480,000 characters of content), replaced 60 times: how long a
// write and a read of one record take at its first and at its 60th version, and its history.
// `node bench/largeRecord.ts` (through `npm run bench:large`). A write or a read of one record once
// re-read and re-folded the whole stream, so it grew with every version; the fold cache reads only
// the events after the cached revision. Absolute figures drift with the machine: compare the 1st
// and the 60th of one run.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hs256Verifier, signHs256 } from '../api/auth.ts';
import { composeService } from '../api/compose.ts';
import { openEmbeddedStores } from '../infra/embedded.ts';

const VERSIONS = 60;
const dataDir = mkdtempSync(join(tmpdir(), 'bench-large-'));
const secret = new TextEncoder().encode(`bench-${randomUUID()}-${randomUUID()}`);
const service = await composeService({ ...openEmbeddedStores(dataDir), verifyToken: hs256Verifier(secret) });
await service.startProjectors();
const authorization = `Bearer ${await signHs256(secret, { sub: 'bench', roles: ['admin'] })}`;
const base = '/api/v1/formatter-templates';
const body = (v: number) => ({
  code: `BIG-${randomUUID()}`.slice(0, 40),
  inputType: 'HTML',
  content: `v${String(v)}`.padEnd(480_000, 'x'),
});

async function timed(method: 'GET' | 'POST' | 'PUT', url: string, payload?: unknown): Promise<{ ms: number; body: string }> {
  const start = performance.now();
  const res = await service.app.inject({
    method,
    url,
    headers: { authorization },
    ...(payload === undefined ? {} : { payload: payload as object }),
  });
  const ms = performance.now() - start;
  if (res.statusCode >= 300) throw new Error(`${method} ${url}: ${String(res.statusCode)} ${res.body.slice(0, 200)}`);
  return { ms, body: res.body };
}

try {
  const first = body(0);
  const { id } = JSON.parse((await timed('POST', base, first)).body) as { id: string };
  const puts: number[] = [];
  const gets: number[] = [];
  for (let v = 1; v <= VERSIONS; v++) {
    puts.push((await timed('PUT', `${base}/${id}`, { ...body(v), code: first.code })).ms);
    gets.push((await timed('GET', `${base}/${id}`)).ms);
  }
  const history = await timed('GET', `${base}/${id}/history`);
  const f = (n: number | undefined) => `${(n ?? Number.NaN).toFixed(1)} ms`;
  console.log(`PUT of a 480,000-character record: version 1 ${f(puts[0])}, version ${String(VERSIONS)} ${f(puts.at(-1))}`);
  console.log(`GET of it:                          version 1 ${f(gets[0])}, version ${String(VERSIONS)} ${f(gets.at(-1))}`);
  console.log(
    `history of ${String(VERSIONS + 1)} versions: ${f(history.ms)} (${(history.body.length / 1e6).toFixed(1)} MB, written in chunks)`,
  );
} finally {
  await service.close();
  rmSync(dataDir, { recursive: true, force: true });
}
