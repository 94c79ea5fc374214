// The service as `npm start` runs it (api/main.ts in a child process, embedded stores, KAFKA_BROKERS
// pointing at this run's Kafka), SIGKILLed twice while it works through trigger messages: afterwards
// exactly one notification exists per valid distinct message (copies sent again included), every
// invalid message is in the dead-letter topic with its reason, and the events topic holds every
// state change of every notification (at least once: repeats carry the same message id).
//
// KAFKA_CRASH_MESSAGES sets the number of valid distinct messages (default 2,000; the figure
// is 10,000: `KAFKA_CRASH_MESSAGES=10000 npx vitest run test/api/notifications/kafkaCrash.int.spec.ts`).

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { startServiceProcess, type ServiceProcess } from '../../support/serviceProcess.ts';
import { describeKafka, produceMessages, readTopic, requireKafkaBrokers, uniqueName, type TestMessage } from '../../support/kafka.ts';

const VALID = Number(process.env.KAFKA_CRASH_MESSAGES ?? 2000);
const COPIES = Math.round(VALID / 50);
const INVALID = Math.round(VALID / 100);
const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';

type Running = ServiceProcess;

const start = (env: Record<string, string>): Promise<Running> => startServiceProcess({ ...process.env, ...env });

const api = async (s: Running, method: string, path: string, body?: unknown) => {
  const res = await fetch(s.url + path, { method, headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, body: await res.json() };
};

const countOf = async (s: Running, resource: string, filter: unknown[] = []) => (await api(s, 'POST', `/api/v1/${resource}/count`, { filter })).body as number;

async function kill(s: Running): Promise<void> {
  const exited = new Promise((resolve) => s.child.once('exit', resolve));
  s.child.kill('SIGKILL');
  await exited;
}

/** Waits until `done` holds (polling every 200 ms), or throws after `ms` with the last figure. */
async function until(ms: number, what: string, probe: () => Promise<number>, done: (n: number) => boolean): Promise<number> {
  const deadline = Date.now() + ms;
  let last = -1;
  while (Date.now() < deadline) {
    last = await probe().catch(() => last);
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${what}: ${String(last)} after ${String(ms)} ms`);
}

describeKafka('the service killed while it takes Kafka triggers', () => {
  it(`makes one notification per distinct message of ${String(VALID)} (with ${String(COPIES)} copies and ${String(INVALID)} invalid ones) across two SIGKILLs`, async () => {
    const brokers = requireKafkaBrokers();
    const topics = { trigger: uniqueName('triggers'), dead: uniqueName('dead'), events: uniqueName('events') };
    const dataDir = mkdtempSync(join(tmpdir(), 'kafka-crash-'));
    const env = {
      PORT: '0',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'error',
      KAFKA_BROKERS: brokers.join(','),
      KAFKA_TRIGGER_TOPIC: topics.trigger,
      KAFKA_DEAD_LETTER_TOPIC: topics.dead,
      KAFKA_EVENTS_TOPIC: topics.events,
      KAFKA_GROUP_ID: uniqueName('group'),
      KAFKA_SESSION_TIMEOUT_MS: '6000',
      KAFKA_HEARTBEAT_INTERVAL_MS: '1000',
    };
    let s = await start(env);
    try {
      expect((await api(s, 'POST', '/api/v1/notification-rules', { code: 'K', name: 'K', eventType: 'KAFKA' })).status).toBe(201);
      const template = { code: 'K_APP', name: 'k', configTypeId, status: 'ACTIVE', notificationRuleCode: 'K', deliveryType: 'APPLICATION', subject: 'Ticket {{t}}' };
      expect((await api(s, 'POST', '/api/v1/notification-templates', template)).status).toBe(201);

      const valid: TestMessage[] = Array.from({ length: VALID }, (_, i) => ({ key: `T-${String(i)}`, value: JSON.stringify({ ruleCode: 'K', ownerType: 'TICKET', ownerId: `T-${String(i)}`, data: { t: i } }) }));
      const copies = valid.filter((_, i) => i % 50 === 7).slice(0, COPIES);
      const invalid: TestMessage[] = Array.from({ length: INVALID }, (_, i) => ({ key: `BAD-${String(i)}`, value: i % 2 === 0 ? `{"broken": ${String(i)}` : JSON.stringify({ ruleCode: 'NOPE', ownerType: 'TICKET', ownerId: 'x' }) }));
      // Interleaved: copies and invalid ones among the valid, in batches of 1,000.
      const all = [...valid];
      for (const [i, m] of [...copies, ...invalid].entries()) all.splice(Math.floor(((i + 1) * all.length) / (copies.length + invalid.length + 1)), 0, m);
      for (let i = 0; i < all.length; i += 1000) await produceMessages(brokers, topics.trigger, all.slice(i, i + 1000));

      const made = () => countOf(s, 'notifications');
      for (const share of [0.3, 0.6]) {
        await until(180_000, `notifications before kill at ${String(share)}`, made, (n) => n >= VALID * share);
        await kill(s);
        s = await start(env);
      }
      await until(300_000, 'notifications made', made, (n) => n >= VALID);
      // Settled: all delivered (in-app), and the trigger log holds no more than one per distinct message.
      await until(120_000, 'notifications SENT', () => countOf(s, 'notifications', [{ column: 'status', operator: 'EQ', value: 'SENT' }]), (n) => n >= VALID);
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
      const seen = new Set(events.map((e) => { const v = JSON.parse(e.value?.toString('utf8') ?? '{}') as { notificationId: string; to: string }; return `${v.notificationId}:${v.to}`; }));
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
      await kill(s).catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 900_000);
});
