// Notification triggers over Kafka, end to end against this run's Kafka (the real broker, else
// librdkafka's mock cluster, or KAFKA_BROKERS; skipped with the reason without one): trigger
// messages become notifications exactly once per distinct message (a copy sent again and a
// redelivery after a restart make nothing twice), messages that cannot be triggers are in the
// dead-letter topic with their reason, and every notification state change is published to the
// events topic, keyed by the notification, with the event's id as message id.

import { expect, it } from 'vitest';
import { kafkaMessaging } from '../../../infra/kafka/messaging.ts';
import {
  describeKafka,
  FAST_GROUP,
  idempotentProducers,
  produceMessages,
  readTopic,
  requireKafkaBrokers,
  uniqueName,
  type TestMessage,
} from '../../support/kafka.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';

type Notification = { id: string; status: string; ownerId: string; subject?: string };

function startApp(
  brokers: string[],
  topics: { triggerTopic: string; deadLetterTopic: string; eventsTopic: string; groupId: string },
  dataDir?: string,
): Promise<TestApp> {
  return startTestApp({
    ...(dataDir === undefined ? {} : { dataDir }),
    extra: {
      messaging: kafkaMessaging({ brokers, clientId: 'kafka-e2e', ...FAST_GROUP, idempotentProducer: idempotentProducers() }),
      settings: { notifications: topics },
    },
  });
}

async function notificationsOfRule(app: TestApp, count: number, timeoutMs = 30_000): Promise<Notification[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    await app.service.scheduler.tick();
    const res = await app.call({
      method: 'POST',
      url: '/api/v1/notifications/search',
      payload: { filter: [{ column: 'templateCode', operator: 'EQ', value: 'KAFKA_APP' }] },
    });
    const found = res.json<Notification[]>();
    if ((found.length >= count && found.every((n) => n.status === 'SENT')) || Date.now() > deadline) return found;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const trigger = (ownerId: string, extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ ownerType: 'TICKET', ownerId, data: { ticket: ownerId }, ...extra });

describeKafka('notification triggers over Kafka', () => {
  it('make one notification per distinct message across a restart, dead-letter the others with the reason, and publish every state change', async () => {
    const brokers = requireKafkaBrokers();
    const topics = {
      triggerTopic: uniqueName('triggers'),
      deadLetterTopic: uniqueName('dead'),
      eventsTopic: uniqueName('events'),
      groupId: uniqueName('group'),
    };
    let app = await startApp(brokers, topics);
    try {
      const rules = [
        { code: 'FROM_KAFKA', eventType: 'KAFKA' },
        { code: 'ONLY_REST', eventType: 'REST' },
      ];
      for (const rule of rules)
        expect(
          (await app.call({ method: 'POST', url: '/api/v1/notification-rules', payload: { name: rule.code, ...rule } })).statusCode,
        ).toBe(201);
      const template = {
        code: 'KAFKA_APP',
        name: 'k',
        configTypeId,
        status: 'ACTIVE',
        notificationRuleCode: 'FROM_KAFKA',
        deliveryType: 'APPLICATION',
        subject: 'Ticket {{ticket}}',
      };
      expect((await app.call({ method: 'POST', url: '/api/v1/notification-templates', payload: template })).statusCode).toBe(201);

      // 30 distinct triggers (the rule named by field, by header, and the header winning), 5 of
      // them sent twice, and 5 that cannot be triggers.
      const valid: TestMessage[] = Array.from({ length: 30 }, (_, i) => {
        const id = `T-${String(i)}`;
        if (i % 3 === 0) return { key: id, value: trigger(id, { ruleCode: 'FROM_KAFKA' }) };
        if (i % 3 === 1) return { key: id, value: trigger(id), headers: { ruleCode: 'FROM_KAFKA' } };
        return { key: id, value: trigger(id, { ruleCode: 'ONLY_REST' }), headers: { ruleCode: 'FROM_KAFKA' } };
      });
      const copies = valid.slice(0, 5);
      const invalid: (TestMessage & { reason: RegExp })[] = [
        { key: 'bad-json', value: '{not json', reason: /^value is not valid JSON$/ },
        {
          key: 'bad-schema',
          value: JSON.stringify({ ownerType: 'TICKET', ruleCode: 'FROM_KAFKA' }),
          reason: /^value does not match NotificationTriggerMessage: ownerId/,
        },
        { key: 'no-rule', value: trigger('X'), reason: /^no rule: neither a ruleCode header nor a ruleCode field$/ },
        { key: 'unknown-rule', value: trigger('X', { ruleCode: 'NOPE' }), reason: /^no notification rule NOPE$/ },
        {
          key: 'rest-rule',
          value: trigger('X', { ruleCode: 'ONLY_REST' }),
          reason: /^notification rule ONLY_REST has eventType REST, not KAFKA or DIRECT$/,
        },
      ];
      await produceMessages(brokers, topics.triggerTopic, [...valid.slice(0, 20), ...invalid, ...copies]);

      const first = await notificationsOfRule(app, 20);
      expect(first.length).toBe(20);
      // Stopped and started again over the same data: the group's committed offsets and the
      // derived trigger keys mean nothing is made twice; the rest arrive after the restart.
      await app.close({ keepData: true });
      await produceMessages(brokers, topics.triggerTopic, [...valid.slice(20), ...copies]);
      app = await startApp(brokers, topics, app.dataDir);
      const all = await notificationsOfRule(app, 30);
      expect(all.map((n) => n.ownerId).sort()).toEqual(valid.map((m) => String(m.key)).sort());
      expect(all.every((n) => n.status === 'SENT')).toBe(true);

      const dead = await readTopic(brokers, topics.deadLetterTopic, { count: invalid.length });
      expect(dead.map((m) => m.key).sort()).toEqual(invalid.map((m) => m.key).sort());
      for (const m of invalid) {
        const letter = dead.find((d) => d.key === m.key);
        expect(letter?.headers['x-dead-letter-reason']).toMatch(m.reason);
        expect(letter?.headers['x-original-topic']).toBe(topics.triggerTopic);
        expect(letter?.value?.toString('utf8')).toBe(m.value);
      }

      // PLAN, SENDING, SENT for each: 90 state changes, keyed by the notification, ids unique.
      const events = await readTopic(brokers, topics.eventsTopic, { count: 90 });
      const values = events.map((e) => ({
        key: e.key,
        id: e.headers['message-id'],
        ...(JSON.parse(e.value?.toString('utf8') ?? '{}') as { notificationId: string; to: string }),
      }));
      expect(new Set(values.map((v) => v.id)).size).toBe(90);
      for (const n of all) {
        const mine = values.filter((v) => v.key === n.id);
        expect(mine.map((v) => v.to)).toEqual(['PLAN', 'SENDING', 'SENT']);
        expect(mine.every((v) => v.notificationId === n.id)).toBe(true);
      }
    } finally {
      await app.close();
    }
  }, 120_000);
});
