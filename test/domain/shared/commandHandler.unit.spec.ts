// The command handler's Idempotency-Key rules over a real (in-memory SQLite) log: a retry of the
// same request names the same events, a key reused with another body names other events.

import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { WrongExpectedRevisionError, type AppendRequest, type EventStore } from '../../../domain/ports.ts';
import { handleCommand } from '../../../application/commands.ts';
import type { CommandContext, CommandSpec } from '../../../domain/shared/commandHandler.ts';
import { runtimeOf } from '../../support/runtime.ts';
import { openSqliteEventStore } from '../../../infra/sqlite/eventStore.ts';
import { intercept } from '../../support/intercept.ts';

const logs = [openSqliteEventStore(':memory:'), openSqliteEventStore(':memory:'), openSqliteEventStore(':memory:')] as const;
afterAll(async () => {
  for (const log of logs) await log.close();
});

/** The log, noting the event ids of every append it is asked for. */
function recording(store: EventStore): { store: EventStore; ids: string[][] } {
  const ids: string[][] = [];
  const watched = intercept(store, 'append', (request: AppendRequest) => {
    ids.push(request.events.map((e) => e.id));
    return store.append(request);
  });
  return { store: watched, ids };
}

const counter = (stream: string, by: number): CommandSpec<number> => ({
  resource: 'COUNTER',
  stream,
  initial: () => 0,
  evolve: (n, e) => n + Number(e.data.by),
  decide: () => ({ events: [{ type: 'Added', data: { by } }] }),
  schemaVersion: 1,
});

const ctx = (requestHash: string, idempotencyKey = 'key-1'): CommandContext => ({
  actor: 'alice',
  now: new Date(),
  newId: randomUUID,
  idempotencyKey,
  requestHash,
});

describe('Idempotency-Key event ids', () => {
  it('name the same events for the same request on a stream, and other events for another body', async () => {
    // One stream name on three separate logs, so each request is the first on its stream.
    const stream = `counter-${randomUUID()}`;
    const [one, two, three] = [recording(logs[0]), recording(logs[1]), recording(logs[2])];
    await handleCommand(counter(stream, 1), ctx('hash-of-body-1'), runtimeOf(one.store));
    await handleCommand(counter(stream, 1), ctx('hash-of-body-1'), runtimeOf(two.store));
    await handleCommand(counter(stream, 2), ctx('hash-of-body-2'), runtimeOf(three.store));
    expect(one.ids).toHaveLength(1);
    expect(two.ids).toEqual(one.ids);
    expect(three.ids[0]).not.toEqual(one.ids[0]);
  });

  it('answer a retry from the log and refuse the key with another body', async () => {
    const [log] = logs;
    const { store, ids } = recording(log);
    const stream = `counter-${randomUUID()}`;
    await handleCommand(counter(stream, 1), ctx('hash-of-body-1', 'key-2'), runtimeOf(store));
    const retried = await handleCommand(counter(stream, 1), ctx('hash-of-body-1', 'key-2'), runtimeOf(store));
    expect(retried.written).toBe(false);
    expect(ids).toHaveLength(1);
    await expect(handleCommand(counter(stream, 2), ctx('hash-of-body-2', 'key-2'), runtimeOf(store))).rejects.toMatchObject({
      code: 'REQUEST.IDEMPOTENCY_KEY_REUSED',
    });
  });

  it('refuse a key on another stream, even with the same body, and let another caller use it', async () => {
    const [log] = logs;
    const [first, second] = [`counter-${randomUUID()}`, `counter-${randomUUID()}`];
    await handleCommand(counter(first, 1), ctx('same-hash', 'key-3'), runtimeOf(log));
    await expect(handleCommand(counter(second, 1), ctx('same-hash', 'key-3'), runtimeOf(log))).rejects.toMatchObject({
      code: 'REQUEST.IDEMPOTENCY_KEY_REUSED',
    });
    const bob = await handleCommand(counter(second, 1), { ...ctx('same-hash', 'key-3'), actor: 'bob' }, runtimeOf(log));
    expect(bob.written).toBe(true);
  });

  it('let one of many concurrent requests under one key on different streams win, and refuse the rest', async () => {
    const [log] = logs;
    const streams = Array.from({ length: 8 }, () => `counter-${randomUUID()}`);
    const outcomes = await Promise.allSettled(streams.map((s) => handleCommand(counter(s, 1), ctx('same-hash', 'key-4'), runtimeOf(log))));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    for (const o of outcomes.filter((x) => x.status === 'rejected'))
      expect(o.reason).toMatchObject({ code: 'REQUEST.IDEMPOTENCY_KEY_REUSED' });
  });
});

describe('If-Match', () => {
  it("retries a conflict that left the record at the caller's version (a raced claim) instead of answering 409", async () => {
    const [log] = logs;
    const stream = `counter-${randomUUID()}`;
    await handleCommand(counter(stream, 1), { actor: 'alice', now: new Date(), newId: randomUUID }, runtimeOf(log));
    let refusals = 1;
    const flaky = intercept(log, 'append', (request: AppendRequest) => {
      if (refusals > 0) {
        refusals -= 1;
        return Promise.reject(new WrongExpectedRevisionError(request.stream, request.expected, 0));
      }
      return log.append(request);
    });
    const result = await handleCommand(
      { ...counter(stream, 1), expectedVersion: 0 },
      { actor: 'alice', now: new Date(), newId: randomUUID },
      runtimeOf(flaky),
    );
    expect(result).toMatchObject({ state: 2, version: 1, written: true });
  });
});
