// The projector on the real SQLite stores: catch-up, live follow, waits, and a document the read
// store refuses, which is recorded and skipped instead of stalling the read model.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Clock, Document, NewEvent } from '../../domain/ports.ts';
import { toQuery } from '../../domain/shared/filtering.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import type { Projection } from '../../projections/projection.ts';
import { Projector } from '../../workers/projector.ts';
import { ReadModelSet } from '../../workers/readModels.ts';
import { intercept } from '../support/intercept.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

function setup(clock?: Clock) {
  const dir = mkdtempSync(join(tmpdir(), 'projector-'));
  const stores = openEmbeddedStores(dir, { clock });
  cleanups.push(async () => {
    await stores.eventStore.close();
    await stores.readStore.close();
    await stores.blobStore.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return stores;
}

const category = 'note';
const collection = `notes_${randomUUID().slice(0, 8)}`;

/** Notes: one document per stream holding its text; a `Poison` event yields a document no store
 * can serialise (it refers to itself). */
const notes: Projection = {
  name: collection,
  collection,
  categories: [category],
  indexedPaths: ['text'],
  documentIds: (e) => [e.stream.slice(category.length + 1)],
  evolve: (_current, e) => {
    const id = e.stream.slice(category.length + 1);
    const doc: Document = { id, text: String(e.data.text) };
    if (e.type === 'Poison') doc.self = doc;
    return { kind: 'upsert', id, version: e.revision, doc };
  },
};

const note = (type: string, text: string): NewEvent => ({
  id: randomUUID(),
  type,
  schemaVersion: 1,
  data: { text },
  metadata: { actor: 't', at: new Date().toISOString() },
});

describe('projector', () => {
  it('catches up, follows live appends, and answers waits for a position', async () => {
    const { eventStore, readStore } = setup();
    for (let i = 0; i < 25; i++)
      await eventStore.append({
        stream: `${category}-${randomUUID()}`,
        expected: 'no_stream',
        events: [note('Noted', `early ${String(i)}`)],
      });
    const projector = new Projector(notes, eventStore, readStore, { batchSize: 10 });
    await projector.start();
    cleanups.unshift(() => projector.stop());
    const live = await eventStore.append({ stream: `${category}-${randomUUID()}`, expected: 'no_stream', events: [note('Noted', 'live')] });
    expect(await projector.waitFor(live.position, 2000)).toBe(true);
    expect(await readStore.size(collection)).toBe(26);
    expect(await projector.waitFor(live.position + 1000n, 50)).toBe(false);
  });

  it('records and skips a document the store refuses, and keeps projecting', async () => {
    const { eventStore, readStore } = setup();
    const streams = Array.from({ length: 5 }, () => `${category}-${randomUUID()}`);
    for (const [i, stream] of streams.entries()) {
      await eventStore.append({ stream, expected: 'no_stream', events: [note(i === 2 ? 'Poison' : 'Noted', `n${String(i)}`)] });
    }
    const projector = new Projector(notes, eventStore, readStore);
    await projector.start();
    cleanups.unshift(() => projector.stop());
    const after = await eventStore.append({
      stream: `${category}-${randomUUID()}`,
      expected: 'no_stream',
      events: [note('Noted', 'after')],
    });
    expect(await projector.waitFor(after.position, 2000)).toBe(true);

    const texts = (
      await readStore.find(
        collection,
        toQuery(
          { filter: [], sort: [] },
          {
            columns: new Map([
              ['id', { path: 'id', type: 'uuid', array: false }],
              ['text', { path: 'text', type: 'string', array: false }],
            ]),
            maps: new Set(),
            nested: new Map(),
          },
          ['text'],
        ),
        { offset: 0, limit: 100 },
      )
    ).map((d) => d.text);
    expect(texts).toEqual(['after', 'n0', 'n1', 'n3', 'n4']);
    const status = projector.status();
    expect(status.lag).toBe(0);
    expect(status.failures).toEqual([
      expect.objectContaining({ stream: `${collection}/${streams[2]?.slice(category.length + 1) ?? ''}`, type: 'document upsert' }),
    ]);
  });

  it('lets one of two instances write a model; the other stands by, follows, and takes over', async () => {
    const { eventStore, readStore } = setup();
    const leaseMs = 300;
    const first = new Projector(notes, eventStore, readStore, { instanceId: 'first', leaseMs });
    const second = new Projector(notes, eventStore, readStore, { instanceId: 'second', leaseMs });
    await first.start();
    await second.start();
    cleanups.push(() => Promise.all([first.stop(), second.stop()]).then(() => undefined));
    const a = await eventStore.append({ stream: `${category}-${randomUUID()}`, expected: 'no_stream', events: [note('Added', 'a')] });
    // The standby answers waits from the active instance's checkpoint.
    expect(await second.waitFor(a.position, 5000)).toBe(true);
    expect(await first.waitFor(a.position, 5000)).toBe(true);
    expect([first.status().active, second.status().active]).toEqual([true, false]);

    await first.stop();
    const b = await eventStore.append({ stream: `${category}-${randomUUID()}`, expected: 'no_stream', events: [note('Added', 'b')] });
    expect(await second.waitFor(b.position, 5000)).toBe(true);
    expect(second.status().active).toBe(true);
    expect(await readStore.size(collection)).toBe(2);
  });

  it('takes over from an instance that stopped renewing once its lease lapses', async () => {
    // The leases and the survivor on a clock the test moves: whether the lease has lapsed is the
    // clock's doing, however long each step takes on a loaded machine.
    const start = Date.parse('2030-01-01T00:00:00Z');
    let now = start;
    const { eventStore, readStore } = setup({ now: () => new Date(now) });
    // Far longer than the test takes: only the test's clock makes it lapse.
    const leaseMs = 60_000;
    // A crashed instance: it holds the lease and never renews it.
    expect(await readStore.tryLease(notes.name, 'crashed', leaseMs)).toBe(true);
    // The survivor's lease requests go to the real store; the test hears each answer.
    let answered: (granted: boolean) => void = () => undefined;
    const nextAnswer = () => new Promise<boolean>((resolve) => (answered = resolve));
    const leases = intercept(readStore, 'tryLease', async (...args: Parameters<typeof readStore.tryLease>) => {
      const granted = await readStore.tryLease(...args);
      answered(granted);
      return granted;
    });
    const survivor = new Projector(notes, eventStore, leases, { instanceId: 'survivor', leaseMs, now: () => new Date(now) });
    const first = nextAnswer();
    await survivor.start();
    cleanups.push(() => survivor.stop());
    expect(await first).toBe(false);
    const a = await eventStore.append({ stream: `${category}-${randomUUID()}`, expected: 'no_stream', events: [note('Added', 'a')] });

    // A moment before the lease lapses the survivor asks again (its renewal interval has passed),
    // is refused, and stands by: the event is not projected.
    now = start + leaseMs - 1;
    const beforeLapse = nextAnswer();
    expect(await beforeLapse).toBe(false);
    expect(survivor.status().active).toBe(false);
    expect(await readStore.size(collection)).toBe(0);

    // Once it has lapsed, the survivor's next request takes the lease and it projects.
    now = start + 2 * leaseMs;
    expect(await survivor.waitFor(a.position, 5000)).toBe(true);
    expect(survivor.status().active).toBe(true);
    expect(await readStore.size(collection)).toBe(1);
  });

  it('stops writing when it cannot renew its lease, and resumes once it can', async () => {
    const { eventStore, readStore } = setup();
    const leaseMs = 300;
    let renewable = true;
    // The real store with its lease renewal failing on demand (a store outage seen only there).
    const flaky = intercept(readStore, 'tryLease', (...args) =>
      renewable ? readStore.tryLease(...args) : Promise.reject(new Error('lease store unreachable')),
    );
    const projector = new Projector(notes, eventStore, flaky, { instanceId: 'flaky', leaseMs });
    await projector.start();
    cleanups.push(() => projector.stop());
    const a = await eventStore.append({ stream: `${category}-${randomUUID()}`, expected: 'no_stream', events: [note('Added', 'a')] });
    expect(await projector.waitFor(a.position, 5000)).toBe(true);

    renewable = false;
    await new Promise((r) => setTimeout(r, leaseMs));
    const b = await eventStore.append({ stream: `${category}-${randomUUID()}`, expected: 'no_stream', events: [note('Added', 'b')] });
    expect(await projector.waitFor(b.position, 2 * leaseMs)).toBe(false);
    expect(projector.status().active).toBe(false);
    expect(await readStore.size(collection)).toBe(1);

    renewable = true;
    expect(await projector.waitFor(b.position, 5000)).toBe(true);
    expect(await readStore.size(collection)).toBe(2);
  });
});

describe('projector clocks and waits', () => {
  it('measures lagMs by its own clock, whatever time the events carry', async () => {
    const { eventStore, readStore } = setup();
    let now = Date.parse('2030-01-01T00:00:00Z');
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const held = intercept(readStore, 'applyBatch', async (...args: Parameters<typeof readStore.applyBatch>) => {
      await gate;
      return readStore.applyBatch(...args);
    });
    const projector = new Projector(notes, eventStore, held, { now: () => new Date(now) });
    cleanups.push(() => projector.stop());
    await projector.start();
    // An event written by a clock far in the past: its own time says nothing of the lag.
    const old = { ...note('Noted', 'x'), metadata: { actor: 't', at: '2000-01-01T00:00:00.000Z' } };
    const written = await eventStore.append({ stream: `${category}-${randomUUID()}`, expected: 'no_stream', events: [old] });
    now += 5000;
    expect(projector.status()).toMatchObject({ lag: 1, lagMs: 5000 });
    release();
    expect(await projector.waitFor(written.position, 5000)).toBe(true);
    expect(projector.status()).toMatchObject({ lag: 0, lagMs: 0 });
  });

  it('refuses to wait on a read model that does not exist, instead of answering that it lags', () => {
    const { eventStore, readStore } = setup();
    const set = new ReadModelSet([notes], eventStore, readStore);
    expect(() => set.waitFor('no_such_model', 1n, 10)).toThrow(/no read model "no_such_model"/);
  });
});
