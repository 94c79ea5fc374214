// The service (a child process, as `npm start` runs it) reading a trigger topic of 4 partitions
// while its consumer group rebalances, on a real Kafka broker (skipped on the mock cluster, whose
// groups are not a broker's): another member joins the group mid-run and takes partitions, then
// leaves; the service is stopped (SIGTERM) and started again mid-run, then killed (SIGKILL) and
// started again. After each stop, every message below the group's committed offsets has its trigger
// in the log (no offset is committed ahead of the log); at the end every message made exactly one
// trigger and one notification. (Two service processes cannot share the embedded log, so the split
// of the partitions between two services waits for the shared stores; the other member here is a
// plain kafkajs consumer that commits nothing.)

import { rmSync } from 'node:fs';
import { expect, it } from 'vitest';
import {
  createTopic,
  describeKafkaBroker,
  FAST_GROUP,
  produceMessages,
  requireKafkaBrokers,
  testKafka,
  type TestMessage,
} from '../../support/kafka.ts';
import {
  api,
  committedAheadOfLog,
  countOf,
  kafkaServiceSetup,
  makeKafkaRule,
  signal,
  startService,
  triggerMessage,
  until,
} from '../../support/kafkaService.ts';
import type { ServiceProcess } from '../../support/serviceProcess.ts';

const WAVE = 1000;
const PARTITIONS = 4;

describeKafkaBroker('the service taking Kafka triggers while its group rebalances', () => {
  it(`makes one trigger and one notification per message of ${String(4 * WAVE)} across a member joining and leaving, a SIGTERM and a SIGKILL`, async () => {
    const brokers = requireKafkaBrokers();
    const setup = kafkaServiceSetup(brokers, 'kafka-rebalance');
    await createTopic(brokers, setup.topics.trigger, PARTITIONS);
    const waves: TestMessage[][] = Array.from({ length: 4 }, (_, w) =>
      Array.from({ length: WAVE }, (_, i) => triggerMessage(w * WAVE + i)),
    );
    // A few messages sent twice (a producer's retry): still one trigger each.
    const copies = waves.map((wave) => wave.filter((_, i) => i % 100 === 3));
    const send = (w: number) => produceMessages(brokers, setup.topics.trigger, [...(waves[w] ?? []), ...(copies[w] ?? [])]);
    const total = 4 * WAVE;
    let s: ServiceProcess = await startService(setup);
    const member = testKafka(brokers).consumer({ groupId: setup.groupId, ...FAST_GROUP, maxWaitTimeInMs: 200 });
    try {
      await makeKafkaRule(s);
      const triggers = () => countOf(s, 'notification-triggers');

      // 1. Another member joins while the service works through wave 1, holds its share of the
      // partitions (reading, committing nothing) while wave 2 arrives, then leaves.
      await send(0);
      await until(120_000, 'triggers of wave 1 begun', triggers, (n) => n >= WAVE / 4);
      const assigned: number[] = [];
      member.on(member.events.GROUP_JOIN, ({ payload }) => {
        assigned.push(...(payload.memberAssignment[setup.topics.trigger] ?? []));
      });
      let memberRead = 0;
      await member.connect();
      await member.subscribe({ topics: [setup.topics.trigger], fromBeginning: true });
      await member.run({
        autoCommit: false,
        eachBatch: ({ batch }) => {
          memberRead += batch.messages.length;
          return Promise.resolve();
        },
      });
      await until(
        60_000,
        'partitions given to the other member',
        () => Promise.resolve(assigned.length),
        (n) => n > 0,
      );
      await send(1);
      await until(120_000, 'triggers with the other member in the group', triggers, (n) => n >= WAVE + WAVE / 4);
      await member.disconnect();
      expect(assigned.length).toBeGreaterThan(0);
      expect(assigned.length).toBeLessThan(PARTITIONS);

      // 2. SIGTERM mid-run, started again.
      await send(2);
      await until(120_000, 'triggers before the SIGTERM', triggers, (n) => n >= 2 * WAVE + WAVE / 4);
      await signal(s, 'SIGTERM');
      const afterTerm = await committedAheadOfLog(brokers, setup);
      expect(afterTerm.missing).toEqual([]);
      expect(afterTerm.covered).toBeGreaterThan(0);
      s = await startService(setup);

      // 3. SIGKILL mid-run, started again.
      await send(3);
      await until(120_000, 'triggers before the SIGKILL', triggers, (n) => n >= 3 * WAVE + WAVE / 4);
      await signal(s, 'SIGKILL');
      const afterKill = await committedAheadOfLog(brokers, setup);
      expect(afterKill.missing).toEqual([]);
      expect(afterKill.covered).toBeGreaterThan(afterTerm.covered);
      s = await startService(setup);

      await until(240_000, 'triggers made', triggers, (n) => n >= total);
      await until(
        240_000,
        'notifications SENT',
        () => countOf(s, 'notifications', [{ column: 'status', operator: 'EQ', value: 'SENT' }]),
        (n) => n >= total,
      );
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(await triggers()).toBe(total);
      expect(await countOf(s, 'notifications')).toBe(total);
      const owners = (await api(s, 'GET', '/api/v1/notifications/owners?ownerType=TICKET')).body as string[];
      expect(new Set(owners).size).toBe(total);
      // The other member did read (so the service's share was smaller while it was there).
      expect(memberRead).toBeGreaterThan(0);
    } finally {
      await member.disconnect().catch(() => undefined);
      await signal(s, 'SIGKILL').catch(() => undefined);
      rmSync(setup.dataDir, { recursive: true, force: true });
    }
  }, 900_000);
});
