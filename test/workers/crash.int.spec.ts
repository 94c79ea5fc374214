// kill -9 of the real service, under write load and in the middle of a read-model rebuild, then
// restart: nothing acknowledged is lost and every read model equals a fresh fold of the log.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../api/auth.ts';
import { registries } from '../../domain/registries/index.ts';
import { resourceService } from '../../domain/resource/service.ts';
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

afterAll(() => {
  for (const c of children) c.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function startService(batchSize = 1000): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [...SERVICE_NODE_ARGS, 'api/main.ts'], {
    env: { ...process.env, DATA_DIR: dataDir, PORT: '0', AUTH_JWT_SECRET: SECRET, LOG_LEVEL: 'silent', PROJECTION_BATCH_SIZE: String(batchSize) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => {
      reject(new Error(`service did not start: ${out}`));
    }, 20_000);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    child.on('exit', (code) => {
      reject(new Error(`service exited with ${String(code)}: ${out}`));
    });
  });
  return { child, url };
}

const killHard = async (child: ChildProcess) => {
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
};

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
      const actual = await readStore.find(await liveCollection(readStore, d.collection), toQuery({ filter: [], sort: [] }, d.columns, ['id']), { offset: 0, limit: 10_000_000 });
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
    const worker = async () => {
      while (!stop) {
        const res = await fetch(`${url}/api/v1/${def.path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify(sampleBody(def, uniqueCode('LOAD'))),
        }).catch(() => undefined);
        if (res?.status === 201) acknowledged.push((await res.json() as { id: string }).id);
        else return;
      }
    };
    const workers = Array.from({ length: 16 }, worker);
    await new Promise((r) => setTimeout(r, 1500));
    await killHard(child);
    stop = true;
    await Promise.all(workers);
    expect(acknowledged.length).toBeGreaterThan(50);

    const { eventStore, readStore, blobStore } = openEmbeddedStores(dataDir);
    try {
      const service = resourceService(def, eventStore);
      for (const id of acknowledged) expect((await service.get(id)).id).toBe(id);
    } finally {
      await eventStore.close();
      await readStore.close();
      await blobStore.close();
    }
    const again = await startService();
    const ready = await fetch(`${again.url}/health/ready`);
    expect(ready.status).toBe(200);
    again.child.kill('SIGTERM');
    await new Promise((r) => again.child.once('exit', r));
    await expectReadModelsEqualFold();
  });

  it('resumes a read-model rebuild killed mid-batch without losing or duplicating anything', async () => {
    // A backlog large enough that the projectors take several batches to catch up.
    const { eventStore, readStore, blobStore } = openEmbeddedStores(dataDir);
    const service = resourceService(def, eventStore);
    const ctx = { actor: 'seed', now: new Date(), newId: randomUUID };
    for (let i = 0; i < 20; i++) {
      await Promise.all(Array.from({ length: 1000 }, () => service.create(sampleBody(def, uniqueCode('SEED')), ctx)));
    }
    await readStore.reset(def.collection, def.collection);
    await eventStore.close();
    await readStore.close();
    await blobStore.close();

    const first = await startService(10);
    // Kill as soon as the rebuild is visibly part-way.
    for (;;) {
      const body = (await (await fetch(`${first.url}/health/ready`)).json()) as { head: string; readModels: { name: string; position: string }[] };
      const model = body.readModels.find((m) => m.name === def.collection);
      if (model !== undefined && BigInt(model.position) > 0n && BigInt(model.position) < BigInt(body.head)) break;
      if (model?.position === body.head) throw new Error(`rebuild finished before it could be interrupted: ${JSON.stringify(body).slice(0, 300)}`);
    }
    await killHard(first.child);

    const second = await startService(10);
    for (;;) {
      const body = (await (await fetch(`${second.url}/health/ready`)).json()) as { head: string; readModels: { position: string }[] };
      if (body.readModels.every((m) => m.position === body.head)) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
    await expectReadModelsEqualFold();
  }, 60_000);

  it('recovers a recreate job killed with SIGKILL mid-rebuild: the old generation serves meanwhile, the job ends, the model equals a fresh fold', async () => {
    const first = await startService();
    const token = await signHs256(new TextEncoder().encode(SECRET), { sub: 'operator', roles: ['admin'] });
    const auth = { authorization: `Bearer ${token}` };
    const documents = async (url: string) => {
      const res = await fetch(`${url}/api/v1/${def.path}/count`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: '{}' });
      return res.status === 200 ? ((await res.json()) as number) : res.status;
    };
    type Model = { name: string; generation: number | null; building: number | null; state: string };
    const modelOf = async (url: string) => ((await (await fetch(`${url}/api/v1/indexes`, { headers: auth })).json()) as Model[]).find((m) => m.name === def.collection);
    await fetch(`${first.url}/api/v1/indexes/refresh`, { method: 'POST', headers: auth });
    const before = await documents(first.url);
    expect(before).toBeGreaterThan(20_000);
    const ack = await fetch(`${first.url}/api/v1/indexes/${def.collection}/recreate`, { method: 'POST', headers: auth });
    expect(ack.status).toBe(202);
    const { jobId } = (await ack.json()) as { jobId: string };
    // Killed while the new generation is being built; searches answered in full until then.
    for (;;) {
      const model = await modelOf(first.url);
      expect(await documents(first.url)).toBe(before);
      if (model?.building != null) break;
      if (model?.generation !== 0) throw new Error(`rebuild finished before it could be interrupted: ${JSON.stringify(model)}`);
    }
    await killHard(first.child);

    const second = await startService();
    expect(await documents(second.url)).toBe(before);
    // The dead process's job lease lapses (15 s), then the scheduler resumes the job.
    let job: { status: string; data: { resumed?: unknown[]; result?: { generation: number } } } | undefined;
    for (let i = 0; i < 300; i++) {
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
    for (let i = 0; i < 100 && (await readStore.size(def.collection)) > 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(await readStore.size(def.collection)).toBe(0);
    await Promise.all([eventStore.close(), readStore.close(), blobStore.close()]);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
    await expectReadModelsEqualFold();
  }, 60_000);
});
