// The fold cache over a real (in-memory SQLite) log: a warm command reads only the events after
// the cached revision, and the log stays the truth (writes that bypassed this process are folded).

import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import type { EventStore, RecordedEvent } from '../../../domain/ports.ts';
import { handleCommand } from '../../../application/commands.ts';
import { foldStream } from '../../../application/streamFold.ts';
import type { CommandSpec } from '../../../domain/shared/commandHandler.ts';
import { runtimeOf } from '../../support/runtime.ts';
import { openSqliteEventStore } from '../../../infra/sqlite/eventStore.ts';
import { intercept } from '../../support/intercept.ts';

const log = openSqliteEventStore(':memory:');
afterAll(async () => {
  await log.close();
});

/** The log, counting the events each readStream returns. */
function counting(store: EventStore): { store: EventStore; reads: number[] } {
  const reads: number[] = [];
  const watched = intercept(store, 'readStream', async (stream: string, options?: { from?: number }) => {
    const events: RecordedEvent[] = await store.readStream(stream, options);
    reads.push(events.length);
    return events;
  });
  return { store: watched, reads };
}

const counter = (stream: string): CommandSpec<number> => ({
  resource: 'COUNTER',
  stream,
  initial: () => 0,
  evolve: (n, e) => n + Number(e.data.by),
  decide: () => ({ events: [{ type: 'Added', data: { by: 1 } }] }),
  schemaVersion: 1,
});
const ctx = () => ({ actor: 'alice', now: new Date(), newId: randomUUID });

describe('the fold cache', () => {
  it('reads only the events after the cached revision', async () => {
    const { store, reads } = counting(log);
    const stream = `counter-${randomUUID()}`;
    for (let i = 0; i < 50; i++) await handleCommand(counter(stream), ctx(), runtimeOf(store));
    // Every command after the first finds its state cached and reads an empty tail.
    expect(reads.every((n) => n === 0)).toBe(true);
    const folded = await foldStream(counter(stream), runtimeOf(store));
    expect(folded).toMatchObject({ state: 50, version: 49 });
  });

  it('folds events written past it (another process), and answers as a fresh fold', async () => {
    const stream = `counter-${randomUUID()}`;
    const { store, reads } = counting(log);
    await handleCommand(counter(stream), ctx(), runtimeOf(store));
    await log.append({
      stream,
      expected: 0,
      events: [
        { id: randomUUID(), type: 'Added', schemaVersion: 1, data: { by: 10 }, metadata: { actor: 'bob', at: new Date().toISOString() } },
      ],
    });
    reads.length = 0;
    const result = await handleCommand(counter(stream), ctx(), runtimeOf(store));
    expect(result).toMatchObject({ state: 12, version: 2 });
    expect(reads).toEqual([1]);
  });

  it('reads from a revision in both directions of the port: nothing past the end, the tail from inside', async () => {
    const stream = `counter-${randomUUID()}`;
    for (let i = 0; i < 3; i++) await handleCommand(counter(stream), ctx(), runtimeOf(log));
    expect((await log.readStream(stream, { from: 1 })).map((e) => e.revision)).toEqual([1, 2]);
    expect(await log.readStream(stream, { from: 3 })).toEqual([]);
    expect(await log.readStream(`counter-${randomUUID()}`, { from: 5 })).toEqual([]);
  });

  it('keeps a stream read often and forgets the least recently used ones when over its 64 MB', async () => {
    // Each state is 1 MB of JSON (one shared string, so the test holds little memory).
    const big = 'x'.repeat(1024 * 1024);
    const large = (stream: string): CommandSpec<string> => ({
      ...counter(stream),
      initial: () => '',
      evolve: () => big,
      decide: () => ({ events: [{ type: 'Added', data: {} }] }),
    });
    const { store, reads } = counting(log);
    const hot = `large-${randomUUID()}`;
    await handleCommand(large(hot), ctx(), runtimeOf(store));
    const cold: string[] = [];
    for (let i = 0; i < 80; i++) {
      cold.push(`large-${randomUUID()}`);
      await handleCommand(large(cold[i] ?? ''), ctx(), runtimeOf(store));
      await foldStream(large(hot), runtimeOf(store));
    }
    reads.length = 0;
    // Cached: an empty tail. Forgotten: the whole stream (one event) read again.
    await foldStream(large(hot), runtimeOf(store));
    await foldStream(large(cold[0] ?? ''), runtimeOf(store));
    await foldStream(large(cold[79] ?? ''), runtimeOf(store));
    expect(reads).toEqual([0, 1, 0]);
  });
});
