// The service as `npm start` runs it (api/main.ts in a child process, embedded stores, KAFKA_BROKERS
// pointing at this run's Kafka), SIGKILLed twice while it works through trigger messages: afterwards
// exactly one notification exists per valid distinct message (copies sent again included), every
// invalid message is in the dead-letter topic with its reason, and the events topic holds every
// state change of every notification (at least once: repeats carry the same message id).
//
// The size by default: 10,000 valid distinct messages, 200 of them sent twice, 100 invalid;
// KAFKA_CRASH_MESSAGES sets the number of valid ones (the others follow: a fiftieth, a hundredth).

import { rmSync } from 'node:fs';
import { expect, it } from 'vitest';
import { describeKafka, produceMessages, readTopic, requireKafkaBrokers, type TestMessage } from '../../support/kafka.ts';
import { api, countOf, kafkaServiceSetup, makeKafkaRule, signal, startService, triggerMessage, until } from '../../support/kafkaService.ts';

const VALID = Number(process.env.KAFKA_CRASH_MESSAGES ?? 10_000);
const COPIES = Math.round(VALID / 50);
const INVALID = Math.round(VALID / 100);

describeKafka('the service killed while it takes Kafka triggers', () => {
  it(`makes one notification per distinct message of ${String(VALID)} (with ${String(COPIES)} copies and ${String(INVALID)} invalid ones) across two SIGKILLs`, async () => {
    const brokers = requireKafkaBrokers();
    const setup = kafkaServiceSetup(brokers, 'kafka-crash');
    const { topics } = setup;
    let s = await startService(setup);
    try {
      await makeKafkaRule(s);

      const valid: TestMessage[] = Array.from({ length: VALID }, (_, i) => triggerMessage(i));
      const copies = valid.filter((_, i) => i % 50 === 7).slice(0, COPIES);
      const invalid: TestMessage[] = Array.from({ length: INVALID }, (_, i) => ({
        key: `BAD-${String(i)}`,
        value: i % 2 === 0 ? `{"broken": ${String(i)}` : JSON.stringify({ ruleCode: 'NOPE', ownerType: 'TICKET', ownerId: 'x' }),
      }));
      // Interleaved: copies and invalid ones among the valid, in batches of 1,000.
      const all = [...valid];
      for (const [i, m] of [...copies, ...invalid].entries())
        all.splice(Math.floor(((i + 1) * all.length) / (copies.length + invalid.length + 1)), 0, m);
      for (let i = 0; i < all.length; i += 1000) await produceMessages(brokers, topics.trigger, all.slice(i, i + 1000));

      const made = () => countOf(s, 'notifications');
      for (const share of [0.3, 0.6]) {
        await until(180_000, `notifications before kill at ${String(share)}`, made, (n) => n >= VALID * share);
        await signal(s, 'SIGKILL');
        s = await startService(setup);
      }
      await until(300_000, 'notifications made', made, (n) => n >= VALID);
      // Settled: all delivered (in-app), and the trigger log holds no more than one per distinct message.
      await until(
        120_000,
        'notifications SENT',
        () => countOf(s, 'notifications', [{ column: 'status', operator: 'EQ', value: 'SENT' }]),
        (n) => n >= VALID,
      );
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(await made()).toBe(VALID);
      expect(await countOf(s, 'notification-triggers')).toBe(VALID);
      const owners = (await api(s, 'GET', '/api/v1/notifications/owners?ownerType=TICKET')).body as string[];
      expect(new Set(owners).size).toBe(Math.min(VALID, 10_000));

      const dead = await readTopic(brokers, topics.dead, { count: INVALID, timeoutMs: 60_000 });
      expect(dead.map((m) => m.key).sort()).toEqual(invalid.map((m) => m.key).sort());
      expect(dead.every((m) => (m.headers['x-dead-letter-reason'] ?? '') !== '')).toBe(true);

      // Every state change (PLAN, SENDING, SENT of each) published at least once.
      const events = await readTopic(brokers, topics.events, { timeoutMs: 120_000 });
      const seen = new Set(
        events.map((e) => {
          const v = JSON.parse(e.value?.toString('utf8') ?? '{}') as { notificationId: string; to: string };
          return `${v.notificationId}:${v.to}`;
        }),
      );
      expect(seen.size).toBe(VALID * 3);
      const ids = new Map<string, string>();
      for (const e of events) {
        const v = JSON.parse(e.value?.toString('utf8') ?? '{}') as { notificationId: string; to: string };
        const id = e.headers['message-id'] ?? '';
        // A repeat after a crash carries the same message id.
        expect(ids.get(`${v.notificationId}:${v.to}`) ?? id).toBe(id);
        ids.set(`${v.notificationId}:${v.to}`, id);
      }
    } finally {
      await signal(s, 'SIGKILL').catch(() => undefined);
      rmSync(setup.dataDir, { recursive: true, force: true });
    }
  }, 900_000);
});
