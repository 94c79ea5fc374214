// `npm run bench:recreate`: a blue/green recreate over a large log, killed half-way.
//
//   1. Writes --records creates (default 1,000,000) of user group types straight into an embedded
//      log, starts the service (`api/main.ts`, a child process) and waits until its read model has
//      folded them.
//   2. POST /api/v1/indexes/user_group_types/recreate; meanwhile counts the read model every 100 ms
//      (it must answer every record throughout: the old generation serves) and reads the job's
//      progress; once the job has folded half the log, kills the service with SIGKILL.
//   3. Starts it again: the scheduler resumes the job once its lease has lapsed (15 s); counts
//      again throughout, until the job has ended.
//   4. Compares the generation now serving, document by document, with a fresh fold of the log.
//
// Prints what it saw; exits non-zero when a count was short, the job did not complete, or the new
// generation differs from the fold.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { signHs256 } from '../api/auth.ts';
import type { Document, NewEvent } from '../domain/ports.ts';
import { userGroupType } from '../modules/registries/domain/userGroupType.ts';
import { deepEqual } from '../domain/shared/json.ts';
import { EVENT_LOG_FILE, READ_MODELS_FILE } from '../infra/embedded.ts';
import { openSqliteEventStore } from '../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../infra/sqlite/readStore.ts';
import { resourceProjection } from '../projections/resourceProjection.ts';
import { GENERATIONS } from '../workers/readModels.ts';
import { SERVICE_NODE_ARGS } from '../api/nodeFlags.ts';

const { values: flags } = parseArgs({ options: { records: { type: 'string', default: '1000000' } } });
const RECORDS = Number(flags.records);
const SECRET = 'recreate-bench-secret-0123456789-0123456789';
const NAME = userGroupType.collection;
const dir = mkdtempSync(join(tmpdir(), 'recreate-'));
const fmt = (n: number): string => Math.round(n).toLocaleString('en-US');
const since = (t: number): string => `${((performance.now() - t) / 1000).toFixed(1)} s`;
const children: ChildProcess[] = [];
process.on('exit', () => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function seed(): Promise<void> {
  const log = openSqliteEventStore(join(dir, EVENT_LOG_FILE));
  const at = new Date().toISOString();
  for (let i = 0; i < RECORDS; i += 1000) {
    await Promise.all(
      Array.from({ length: Math.min(1000, RECORDS - i) }, (_, j) => {
        const id = randomUUID();
        const event: NewEvent = {
          id: randomUUID(),
          type: 'UserGroupTypeCreated',
          schemaVersion: 1,
          data: { id, code: `C${String(i + j).padStart(8, '0')}`, name: `Type ${String(i + j)}`, registry: { n: i + j } },
          metadata: { actor: 'seed', at },
        };
        return log.append({ stream: `userGroupType-${id}`, expected: 'no_stream', events: [event] });
      }),
    );
  }
  await log.close();
}

async function start(): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...SERVICE_NODE_ARGS, 'api/main.ts'], {
    env: { ...process.env, DATA_DIR: dir, PORT: '0', AUTH_JWT_SECRET: SECRET, LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('exit', (code) => {
      reject(new Error(`service exited with ${String(code)}: ${out}`));
    });
  });
  return { child, url };
}

const token = await signHs256(new TextEncoder().encode(SECRET), { sub: 'bench', roles: ['admin'] });
const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
const count = async (url: string): Promise<number> =>
  (await (await fetch(`${url}/api/v1/user-group-types/count`, { method: 'POST', headers, body: '{}' })).json()) as number;
type Job = {
  status: string;
  data: {
    progress?: { phase: string; folded?: number };
    resumed?: { reason: string }[];
    result?: Record<string, unknown>;
    failure?: string;
  };
};
const jobOf = async (url: string, id: string): Promise<Job> => {
  const res = await fetch(`${url}/api/v1/jobs/${id}`, { headers });
  const body = (await res.json()) as Job;
  if (res.status !== 200) throw new Error(`GET job ${id}: ${String(res.status)} ${JSON.stringify(body)}`);
  return body;
};

let t = performance.now();
await seed();
console.log(`seeded ${fmt(RECORDS)} creates into the log in ${since(t)}`);
let service = await start();
t = performance.now();
for (;;) {
  const ready = (await (await fetch(`${service.url}/health/ready`)).json()) as {
    head: string;
    readModels: { name: string; position: string }[];
  };
  if (ready.readModels.find((m) => m.name === NAME)?.position === ready.head) break;
  await new Promise((r) => setTimeout(r, 200));
}
console.log(`the live read model folded them in ${since(t)}; it counts ${fmt(await count(service.url))}`);

const counts: number[] = [];
const phases = new Set<string>();
t = performance.now();
const ack = (await (
  await fetch(`${service.url}/api/v1/indexes/${NAME}/recreate`, { method: 'POST', headers: { authorization: headers.authorization } })
).json()) as { jobId: string };
for (;;) {
  counts.push(await count(service.url));
  const job = await jobOf(service.url, ack.jobId);
  if (job.data.progress !== undefined) phases.add(job.data.progress.phase);
  if ((job.data.progress?.folded ?? 0) >= RECORDS / 2 || job.data.progress?.phase === 'load') break;
  if (job.status !== 'IN_PROGRESS') throw new Error(`the job ended before it could be killed: ${JSON.stringify(job).slice(0, 300)}`);
  await new Promise((r) => setTimeout(r, 100));
}
const killedAt = await jobOf(service.url, ack.jobId);
service.child.kill('SIGKILL');
await new Promise((r) => service.child.once('exit', r));
console.log(`killed with SIGKILL ${since(t)} after the recreate began, at ${JSON.stringify(killedAt.data.progress)}`);

service = await start();
t = performance.now();
let job: Job;
for (;;) {
  counts.push(await count(service.url));
  job = await jobOf(service.url, ack.jobId);
  if (job.data.progress !== undefined) phases.add(job.data.progress.phase);
  if (job.status !== 'IN_PROGRESS') break;
  await new Promise((r) => setTimeout(r, 100));
}
console.log(
  `after the restart the job ended ${since(t)} later: ${job.status}; resumed: ${JSON.stringify(job.data.resumed)}; result: ${JSON.stringify(job.data.result ?? job.data.failure)}`,
);
console.log(
  `counts while rebuilding: ${fmt(counts.length)} taken, min ${fmt(Math.min(...counts))}, max ${fmt(Math.max(...counts))}; phases seen: ${[...phases].join(', ')}`,
);
service.child.kill('SIGTERM');
await new Promise((r) => service.child.once('exit', r));

// The generation serving now, against a fresh fold of the log.
t = performance.now();
const log = openSqliteEventStore(join(dir, EVENT_LOG_FILE));
const reads = openSqliteReadStore({ path: join(dir, READ_MODELS_FILE) });
const projection = resourceProjection(userGroupType);
const fold = new Map<string, Document>();
for (let after = 0n; ;) {
  const batch = await log.readAll({ after, limit: 10_000, categories: projection.categories });
  for (const e of batch) {
    for (const id of projection.documentIds(e)) {
      const write = projection.evolve(undefined, e, id);
      if (write?.kind === 'upsert') fold.set(id, write.doc);
    }
  }
  if (batch.length < 10_000) break;
  after = batch.at(-1)?.position ?? after;
}
const live = (await reads.getMany(GENERATIONS, [NAME])).get(NAME)?.doc?.live;
const collection = typeof live === 'number' && live > 0 ? `${NAME}__g${String(live)}` : NAME;
let same = 0;
let differ = 0;
let seen = 0;
for (let after: string | undefined; ;) {
  const page = await reads.scan(collection, { ...(after === undefined ? {} : { after }), limit: 5000 });
  for (const doc of page) {
    seen++;
    if (deepEqual(doc, fold.get(doc.id))) same++;
    else differ++;
  }
  if (page.length < 5000) break;
  after = page.at(-1)?.id;
}
await log.close();
await reads.close();
console.log(
  `generation ${String(live)} (${collection}) against a fresh fold: ${fmt(same)} equal, ${fmt(differ)} differ, ${fmt(fold.size - seen)} missing (${since(t)})`,
);
const ok = job.status === 'COMPLETED' && Math.min(...counts) === RECORDS && differ === 0 && seen === fold.size;
console.log(ok ? 'PASS' : 'FAIL');
process.exit(ok ? 0 : 1);
