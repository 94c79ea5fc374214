// The scheduler's batches: at most `batch` items of a schedule per tick, up to its `concurrency` at
// once, an item not run again at the same version, and a backlog drained by ticking again at once
// instead of one batch per interval.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Document } from '../../domain/ports.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { Scheduler, type Schedule } from '../../workers/scheduler.ts';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function backlog(size: number, concurrency?: number) {
  const pending = new Set(Array.from({ length: size }, (_, i) => `item-${String(i)}`));
  let running = 0;
  let most = 0;
  const schedule: Schedule = {
    name: 'backlog',
    ...(concurrency === undefined ? {} : { concurrency }),
    due: () => Promise.resolve([...pending].map((id): Document => ({ id, auditInfo: { version: 0 } }))),
    run: async (item) => {
      running++;
      most = Math.max(most, running);
      await new Promise((resolve) => setTimeout(resolve, 2));
      pending.delete(item.id);
      running--;
      return true;
    },
  };
  return { schedule, pending, most: () => most };
}

function storesFor() {
  const dir = mkdtempSync(join(tmpdir(), 'scheduler-'));
  dirs.push(dir);
  return openEmbeddedStores(dir);
}

describe('scheduler', () => {
  it("runs at most a batch per tick, up to the schedule's concurrency at once", async () => {
    const stores = storesFor();
    const work = backlog(250, 4);
    const scheduler = new Scheduler([work.schedule], stores.readStore, { clock: { now: () => new Date() }, batch: 100 });
    expect(await scheduler.tick()).toBe(100);
    expect(work.pending.size).toBe(150);
    expect(work.most()).toBe(4);
    await scheduler.stop();
    await stores.readStore.close();
  });

  it('runs one at a time without a concurrency', async () => {
    const stores = storesFor();
    const work = backlog(20);
    const scheduler = new Scheduler([work.schedule], stores.readStore, { clock: { now: () => new Date() }, batch: 100 });
    expect(await scheduler.tick()).toBe(20);
    expect(work.most()).toBe(1);
    await scheduler.stop();
    await stores.readStore.close();
  });

  it('drains a backlog within one interval, ticking again while a whole batch was due', async () => {
    const stores = storesFor();
    const work = backlog(1000, 8);
    const scheduler = new Scheduler([work.schedule], stores.readStore, { clock: { now: () => new Date() }, batch: 100, intervalMs: 5000 });
    scheduler.start();
    // Started on the interval: the first tick comes at 5 s, and the whole backlog goes with it.
    for (let i = 0; i < 200 && work.pending.size > 0; i++) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(work.pending.size).toBe(0);
    await scheduler.stop();
    await stores.readStore.close();
  }, 30_000);

  it('does not spin on a whole batch that cannot progress: failing items wait for the interval', async () => {
    const stores = storesFor();
    let dues = 0;
    const failing: Schedule = {
      name: 'failing',
      due: () => {
        dues++;
        return Promise.resolve(Array.from({ length: 100 }, (_, i): Document => ({ id: `f-${String(i)}`, auditInfo: { version: 0 } })));
      },
      run: () => Promise.reject(new Error('store down')),
    };
    const scheduler = new Scheduler([failing], stores.readStore, { clock: { now: () => new Date() }, batch: 100, intervalMs: 60_000 });
    scheduler.start();
    scheduler.wake();
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(dues).toBe(1);
    await scheduler.stop();
    await stores.readStore.close();
  });
});
