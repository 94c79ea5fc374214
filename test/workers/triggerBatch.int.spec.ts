// The Kafka trigger batch handler over the real SQLite event log: a fetched batch goes into the log
// together (an appendMany per step of 500, no append per trigger), a copy in the batch and the batch taken again
// (a redelivery after a crash) write nothing twice, and a message that cannot be a trigger is a
// dead letter without holding up the others.

import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { notificationTrigger } from '../../modules/notifications/domain/trigger.ts';
import type { EventStore, IncomingMessage } from '../../domain/ports.ts';
import { notificationRule } from '../../modules/registries/domain/notificationRule.ts';
import { runtimeOf } from '../support/runtime.ts';
import { openSqliteEventStore } from '../../infra/sqlite/eventStore.ts';
import { triggerBatchHandler } from '../../modules/notifications/workers/topics.ts';

const dir = mkdtempSync(join(tmpdir(), 'trigger-batch-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const message = (offset: number, value: string, key = `K-${String(offset)}`): IncomingMessage => ({
  topic: 'triggers',
  partition: 0,
  offset: String(offset),
  key,
  headers: {},
  value: Buffer.from(value),
});
const trigger = (i: number) => JSON.stringify({ ruleCode: 'BATCH', ownerType: 'TICKET', ownerId: `T-${String(i)}`, data: { ticket: i } });

describe('the Kafka trigger batch handler', () => {
  it('takes a batch into the log an appendMany per 500, writes a copy (across steps) and a redelivered batch once, and dead-letters what is no trigger', async () => {
    const log = openSqliteEventStore(join(dir, 'events.db'));
    await runtimeOf(log)
      .service(notificationRule)
      .create({ code: 'BATCH', name: 'batch', eventType: 'KAFKA' }, { actor: 'tester', now: new Date(), newId: randomUUID });
    // The real log, its calls counted.
    const calls = { append: 0, appendMany: 0 };
    const counted = new Proxy(log, {
      get(target, name): unknown {
        const value: unknown = Reflect.get(target, name);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]): unknown => {
          if (name === 'append' || name === 'appendMany') calls[name] += 1;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    }) as EventStore;
    const handle = triggerBatchHandler({ runtime: runtimeOf(counted), now: () => new Date(), newId: randomUUID });
    // 1,100 triggers, then a copy of the first (in the third step, the first's append sent before it) and one that is no trigger.
    const batch = [
      ...Array.from({ length: 1100 }, (_, i) => message(i, trigger(i))),
      message(1100, trigger(0), 'K-0'),
      message(1101, '{not json'),
    ];

    const outcomes = await handle(batch);
    expect(outcomes.map((o) => o.kind)).toEqual([...batch.slice(0, 1101).map(() => 'handled'), 'dead']);
    expect(calls).toEqual({ append: 0, appendMany: 3 });
    const triggered = async () =>
      (await log.readAll({ after: 0n, limit: 5000, categories: [notificationTrigger.category] })).filter(
        (e) => e.type === notificationTrigger.createdEvent,
      );
    const first = await triggered();
    expect(first).toHaveLength(1100);
    expect(new Set(first.map((e) => (e.data as { ownerId: string }).ownerId)).size).toBe(1100);

    // Taken again, as after a crash before its offsets were committed: nothing new in the log.
    const head = await log.headPosition();
    expect((await handle(batch)).map((o) => o.kind)).toEqual(outcomes.map((o) => o.kind));
    expect(await log.headPosition()).toBe(head);
    expect(await triggered()).toEqual(first);
    await log.close();
  });
});
