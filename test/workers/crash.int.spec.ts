// kill -9 of the real service, under write load and in the middle of a read-model rebuild, then
// restart: nothing acknowledged is lost and every read model equals a fresh fold of the log.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { DatabaseSync } from 'node:sqlite';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { signHs256 } from '../../api/auth.ts';
import { registries } from '../../modules/registries/domain/index.ts';
import { runtimeOver } from '../support/runtime.ts';
import { evolve, initialState, toRecord, type RecordState } from '../../domain/resource/decider.ts';
import { toQuery } from '../../domain/shared/filtering.ts';
import type { ReadStore } from '../../domain/ports.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { GENERATIONS } from '../../workers/readModels.ts';
import { sampleBody, uniqueCode } from '../support/samples.ts';
import { SERVICE_NODE_ARGS } from '../../api/nodeFlags.ts';

const SECRET = 'crash-test-secret-0123456789-0123456789-abcdef';
const dataDir = mkdtempSync(join(tmpdir(), 'crash-'));
const [def] = registries;
if (def === undefined) throw new Error('no registries');
const children: ChildProcess[] = [];
/** Writes acknowledged before the kill under load. */
const KILL_AFTER = 50;
/** Events of the read-model rebuild killed mid-batch, and records of the recreate killed mid-rebuild. */
const REBUILT = 2000;
const RECREATED = 5000;

// A test that failed leaves no service behind to slow down the next one on the same data.
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});
afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

/** Starts the service and answers its URL: once it prints its banner (its projectors started), or
 * with `atListen` as soon as it listens, before its projectors start (fastify's own log line). */
async function startService(options: { batchSize?: number; atListen?: boolean } = {}): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...SERVICE_NODE_ARGS, 'api/main.ts'], {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: '0',
      AUTH_JWT_SECRET: SECRET,
      LOG_LEVEL: options.atListen === true ? 'info' : 'silent',
      PROJECTION_BATCH_SIZE: String(options.batchSize ?? 1000),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  // No time limit of its own (a start on a loaded machine takes what it takes): one that fails
  // exits, and one that hangs meets the test's timeout.
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /listening (?:on|at) (http:\/\/[^\s"]+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('exit', (code) => {
      reject(new Error(`service exited with ${String(code)}: ${out}`));
    });
  });
  return { child, url };
}

/** Records of `def` created straight into the log (no service running): a backlog to fold. */
const seed = async (count: number, then?: (readStore: ReadStore) => Promise<void>): Promise<void> => {
  const { eventStore, readStore, blobStore } = openEmbeddedStores(dataDir);
  try {
    const service = runtimeOver(eventStore).service(def);
    const ctx = { actor: 'seed', now: new Date(), newId: randomUUID };
    for (let made = 0; made < count; made += 1000) {
      await Promise.all(
        Array.from({ length: Math.min(1000, count - made) }, () => service.create(sampleBody(def, uniqueCode('SEED')), ctx)),
      );
    }
    await then?.(readStore);
  } finally {
    await eventStore.close();
    await readStore.close();
    await blobStore.close();
  }
};

type Readiness = { head: string; readModels: { name: string; position: string }[] };
const readiness = async (url: string): Promise<Readiness> => (await (await fetch(`${url}/health/ready`)).json()) as Readiness;

/** Until every read model has folded the log to its head. */
async function caughtUp(url: string): Promise<void> {
  for (;;) {
    const body = await readiness(url);
    if (body.readModels.every((m) => m.position === body.head)) return;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Until the rebuild of def's read model has committed a batch; answers the log's head then. Asked
 * from the moment the service listens, before its projectors start: the service answers between
 * two batches, so the first answer past 0 comes a batch or so into the rebuild. */
const rebuildUnderway = async (url: string): Promise<bigint> => {
  for (;;) {
    const body = await readiness(url);
    const model = body.readModels.find((m) => m.name === def.collection);
    if (model?.position === body.head)
      throw new Error(`rebuild finished before it could be interrupted: ${JSON.stringify(body).slice(0, 300)}`);
    if (model !== undefined && BigInt(model.position) > 0n) return BigInt(body.head);
  }
};

const killHard = async (child: ChildProcess) => {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
};

/** Kills the service while holding the read store's write lock (stopped first, with the lock
 * taken between two of its transactions): it commits nothing after the lock, so what `read` finds
 * under it is the state the service dies in. */
async function killUnderWriteLock<T>(child: ChildProcess, read: (db: DatabaseSync) => T): Promise<T> {
  const db = new DatabaseSync(join(dataDir, 'read-models.db'));
  try {
    db.exec('PRAGMA busy_timeout = 30000');
    db.exec('BEGIN IMMEDIATE');
    child.kill('SIGSTOP');
    const state = read(db);
    await killHard(child);
    db.exec('ROLLBACK');
    return state;
  } finally {
    db.close();
  }
}

/** The collection of the generation serving a read model (read_model_generations). */
async function liveCollection(readStore: ReadStore, name: string): Promise<string> {
  const record = (await readStore.getMany(GENERATIONS, [name])).get(name)?.doc;
  const live = typeof record?.live === 'number' ? record.live : 0;
  return live === 0 ? name : `${name}__g${String(live)}`;
}

/** Every read model equals a fold of the log, document for document. */
async function expectReadModelsEqualFold(): Promise<void> {
  const { eventStore, readStore, blobStore } = openEmbeddedStores(dataDir);
  try {
    for (const d of registries) {
      const events = await eventStore.readAll({ after: 0n, limit: 10_000_000, categories: [d.category] });
      const states = new Map<string, RecordState>();
      for (const e of events) states.set(e.stream, evolve(d, states.get(e.stream) ?? initialState(), e));
      const expected = [...states.values()].flatMap((s) => (s.status === 'active' ? [toRecord(s)] : []));
      const actual = await readStore.find(
        await liveCollection(readStore, d.collection),
        toQuery({ filter: [], sort: [] }, d.columns, ['id']),
        { offset: 0, limit: 10_000_000 },
      );
      expect(actual, d.collection).toEqual(expected.sort((a, b) => (a.id < b.id ? -1 : 1)));
    }
  } finally {
    await eventStore.close();
    await readStore.close();
    await blobStore.close();
  }
}

describe('crash safety', () => {
  it('loses no acknowledged write when killed under load', async () => {
    const { child, url } = await startService();
    const token = await signHs256(new TextEncoder().encode(SECRET), { sub: 'loader', roles: ['admin'] });
    const acknowledged: string[] = [];
    let stop = false;
    let writing = 0;
    const worker = async () => {
      writing += 1;
      while (!stop) {
        const res = await fetch(`${url}/api/v1/${def.path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(sampleBody(def, uniqueCode('LOAD'))),
        }).catch(() => undefined);
        if (res?.status === 201) acknowledged.push(((await res.json()) as { id: string }).id);
        else break;
      }
      writing -= 1;
    };
    const workers = Array.from({ length: 16 }, worker);
    // Killed once KILL_AFTER writes are acknowledged, whatever the time that took, with the
    // writers' next requests under way.
    while (acknowledged.length < KILL_AFTER) {
      if (writing === 0) throw new Error(`the writers stopped after ${String(acknowledged.length)} acknowledged writes`);
      await new Promise((r) => setTimeout(r, 10));
    }
    await killHard(child);
    stop = true;
    await Promise.all(workers);
    expect(acknowledged.length).toBeGreaterThanOrEqual(KILL_AFTER);

    const { eventStore, readStore, blobStore } = openEmbeddedStores(dataDir);
    try {
      const service = runtimeOver(eventStore).service(def);
      for (const id of acknowledged) expect((await service.get(id)).id).toBe(id);
    } finally {
      await eventStore.close();
      await readStore.close();
      await blobStore.close();
    }
    const again = await startService();
    const ready = await fetch(`${again.url}/health/ready`);
    expect(ready.status).toBe(200);
    // The writes the killed service had not folded yet are folded now, before the comparison.
    await caughtUp(again.url);
    again.child.kill('SIGTERM');
    await new Promise((r) => again.child.once('exit', r));
    await expectReadModelsEqualFold();
  });

  it('resumes a read-model rebuild killed mid-batch without losing or duplicating anything', async () => {
    // A rebuild of REBUILT events in batches of 10: REBUILT / 10 batches, each committed with its
    // checkpoint, so that the kill below lands well inside it.
    await seed(REBUILT, (readStore) => readStore.reset(def.collection, def.collection));
    const first = await startService({ batchSize: 10, atListen: true });
    const head = await rebuildUnderway(first.url);
    // Where the rebuild stands when it dies: a batch of it folded and not written.
    const killedAt = await killUnderWriteLock(first.child, (db) =>
      BigInt(db.prepare('SELECT position FROM checkpoints WHERE projection = ?').get(def.collection)?.position as number),
    );
    expect(killedAt).toBeGreaterThan(0n);
    expect(killedAt).toBeLessThan(head);

    const second = await startService({ batchSize: 10 });
    await caughtUp(second.url);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
    await expectReadModelsEqualFold();
  }, 60_000);

  it('recovers a recreate job killed with SIGKILL mid-rebuild: the old generation serves meanwhile, the job ends, the model equals a fresh fold', async () => {
    // Records for the recreate to fold and load (FOLD_BATCH is 5,000) before its swap.
    await seed(RECREATED);
    const first = await startService();
    const token = await signHs256(new TextEncoder().encode(SECRET), { sub: 'operator', roles: ['admin'] });
    const auth = { authorization: `Bearer ${token}` };
    const documents = async (url: string) => {
      const res = await fetch(`${url}/api/v1/${def.path}/count`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: '{}',
      });
      return res.status === 200 ? ((await res.json()) as number) : res.status;
    };
    type Model = { name: string; generation: number | null; building: number | null; state: string };
    const modelOf = async (url: string) =>
      ((await (await fetch(`${url}/api/v1/indexes`, { headers: auth })).json()) as Model[]).find((m) => m.name === def.collection);
    await caughtUp(first.url);
    const before = await documents(first.url);
    expect(before).toBeGreaterThan(RECREATED);
    const ack = await fetch(`${first.url}/api/v1/indexes/${def.collection}/recreate`, { method: 'POST', headers: auth });
    expect(ack.status).toBe(202);
    const { jobId } = (await ack.json()) as { jobId: string };
    // Searches are answered in full while the new generation is built; then the service is killed
    // with generation 1 building and generation 0 still live.
    expect(await documents(first.url)).toBe(before);
    const generations = await killUnderWriteLock(first.child, (db) => {
      const row = db.prepare(`SELECT json(doc) AS doc FROM rm_${GENERATIONS} WHERE id = ?`).get(def.collection);
      return JSON.parse(String(row?.doc)) as unknown;
    });
    expect(generations).toMatchObject({ live: 0, building: 1, jobId });

    const second = await startService();
    expect(await documents(second.url)).toBe(before);
    // The dead process's job lease lapses (15 s), then the scheduler resumes the job.
    let job: { status: string; data: { resumed?: unknown[]; result?: { generation: number } } } | undefined;
    for (;;) {
      job = (await (await fetch(`${second.url}/api/v1/jobs/${jobId}`, { headers: auth })).json()) as typeof job;
      if (job?.status !== 'IN_PROGRESS') break;
      expect(await documents(second.url)).toBe(before);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(job).toMatchObject({ status: 'COMPLETED', data: { resumed: [expect.anything()], result: { generation: 1 } } });
    expect(await modelOf(second.url)).toMatchObject({ generation: 1, building: null, state: 'live' });
    expect(await documents(second.url)).toBe(before);
    // The old generation is dropped a few seconds after the swap (other instances may still read it).
    const { eventStore, readStore, blobStore } = openEmbeddedStores(dataDir);
    while ((await readStore.size(def.collection)) > 0) await new Promise((r) => setTimeout(r, 100));
    await Promise.all([eventStore.close(), readStore.close(), blobStore.close()]);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
    await expectReadModelsEqualFold();
  }, 60_000);
});
