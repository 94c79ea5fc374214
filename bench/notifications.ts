// The notification figures of `npm run bench` (figure 8; alone: `npm run bench:notifications`), on
// the embedded service composed as `npm start` composes it:
//
//   trigger to SENT  POST /api/v1/notification-rules/{code}/trigger over HTTP, then polling (every
//                    2 ms) until the notification it made is SENT: the trigger appended, the trigger
//                    reactor rendering and making the notification, the projector, the dispatcher
//                    woken by the log, and for e-mail the SMTP conversation with a local server
//                    (smtp-server). One trigger at a time; p50 and p99. Baseline in the same run: a
//                    plain create of one notification over HTTP (POST /api/v1/notifications → 201).
//   Kafka ingest     N trigger messages produced to a topic of this run's Kafka (KAFKA_BROKERS, else
//                    librdkafka's mock cluster through kcat) while the service's consumer reads it,
//                    until every trigger is in the log and its read model (count of
//                    notification-triggers, from the first one seen); then a raw kafkajs consumer
//                    (eachBatch, no work) reads the same messages from the same broker. Messages per
//                    second of each.
//
// Flags: --notification-rounds N (default 3), --triggers N (per channel per round, default 50),
// --kafka-messages N (per round, default 5000).

import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Kafka, logLevel, Partitioners } from 'kafkajs';
import { SMTPServer } from 'smtp-server';
import { hs256Verifier, signHs256 } from '../api/auth.ts';
import { composeService, type Service } from '../api/compose.ts';
import { openEmbeddedStores } from '../infra/embedded.ts';
import { kafkaMessaging } from '../infra/kafka/messaging.ts';
import { SmtpMailSender } from '../infra/mail/smtpSender.ts';
import { findKafka } from '../test/support/kafka.globalSetup.ts';

export type NotificationFigure = {
  create: { p50: number; p99: number };
  inApp: { p50: number; p99: number };
  email: { p50: number; p99: number };
  kafka: { raw: number; ours: number; ratio: number; messages: number } | { skipped: string };
};

const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
const quantile = (sorted: readonly number[], q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
const median = (values: readonly number[]): number => quantile([...values].sort((a, b) => a - b), 0.5);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Bench = { service: Service; base: string; headers: Record<string, string>; close: () => Promise<void> };

async function benchService(options: { smtpUrl: string; brokers?: string[]; topic?: string }): Promise<Bench> {
  const dataDir = mkdtempSync(join(tmpdir(), 'bench-notifications-'));
  const secret = new TextEncoder().encode('bench-secret-that-is-long-enough-for-hs256-0123456789');
  const service = await composeService({
    ...openEmbeddedStores(dataDir),
    verifyToken: hs256Verifier(secret),
    mail: new SmtpMailSender({ url: options.smtpUrl, timeoutMs: 5000 }),
    ...(options.brokers === undefined ? {} : { messaging: kafkaMessaging({ brokers: options.brokers, clientId: 'bench' }), settings: { notifications: { triggerTopic: options.topic ?? 'bench', groupId: `bench-${String(Date.now())}` } } }),
  });
  await service.startProjectors();
  const base = await service.app.listen({ port: 0, host: '127.0.0.1' });
  const headers = { authorization: `Bearer ${await signHs256(secret, { sub: 'bench', roles: ['admin'] })}`, 'content-type': 'application/json' };
  const post = async (path: string, body: unknown) => {
    const res = await fetch(base + path, { method: 'POST', headers, body: JSON.stringify(body) });
    if (res.status !== 201) throw new Error(`${path}: ${String(res.status)} ${await res.text()}`);
  };
  for (const [code, eventType] of [['BENCH_APP', 'REST'], ['BENCH_MAIL', 'REST'], ['BENCH_KAFKA', 'KAFKA']] as const) {
    await post('/api/v1/notification-rules', { code, name: code, eventType });
    const channel = code === 'BENCH_MAIL' ? 'EMAIL' : 'APPLICATION';
    await post('/api/v1/notification-templates', { code: `${code}_T`, name: code, configTypeId, status: 'ACTIVE', notificationRuleCode: code, deliveryType: channel, subject: 'Ticket {{ticket}}', content: '<p>Closed: {{ticket}}</p>' });
  }
  return {
    service,
    base,
    headers,
    close: async () => {
      await service.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function json<T>(b: Bench, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(b.base + path, { method, headers: b.headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return (await res.json()) as T;
}

/** Milliseconds from a REST trigger to its notification SENT. */
async function triggerToSent(b: Bench, rule: string, i: number): Promise<number> {
  const started = performance.now();
  const { triggerId } = await json<{ triggerId: string }>(b, 'POST', `/api/v1/notification-rules/${rule}/trigger`, { ownerType: 'TICKET', ownerId: `T-${String(i)}`, data: { ticket: i }, targets: [{ email: 'ops@example.com' }] });
  let ids: string[] | undefined;
  for (;;) {
    if (ids === undefined) {
      const trigger = await json<{ status: string; notificationIds?: string[]; reason?: string }>(b, 'GET', `/api/v1/notification-triggers/${triggerId}`);
      if (trigger.status === 'FAILED') throw new Error(`trigger failed: ${trigger.reason ?? ''}`);
      if (trigger.status === 'PROCESSED') ids = trigger.notificationIds ?? [];
    }
    if (ids !== undefined) {
      const [n] = await json<{ status: string; lastError?: string }[]>(b, 'POST', '/api/v1/notifications/by-ids', ids);
      if (n?.status === 'SENT') return performance.now() - started;
      if (n?.status === 'FAILED') throw new Error(`notification failed: ${n.lastError ?? ''}`);
    }
    if (performance.now() - started > 30_000) throw new Error('no SENT within 30 s');
    await sleep(2);
  }
}

async function plainCreate(b: Bench, i: number): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${b.base}/api/v1/notifications`, { method: 'POST', headers: b.headers, body: JSON.stringify({ ownerType: 'TICKET', ownerId: `C-${String(i)}`, templateCode: 'BENCH_APP_T', notificationTo: [{ email: 'ops@example.com' }], data: { ticket: i } }) });
  await res.arrayBuffer();
  if (res.status !== 201) throw new Error(`create: ${String(res.status)}`);
  return performance.now() - started;
}

const messagesOf = (n: number, round: number) =>
  Array.from({ length: n }, (_, i) => ({ key: `K-${String(round)}-${String(i)}`, value: JSON.stringify({ ruleCode: 'BENCH_KAFKA', ownerType: 'TICKET', ownerId: `K-${String(i)}`, data: { ticket: i } }) }));

async function produce(kafka: Kafka, topic: string, messages: { key: string; value: string }[]): Promise<void> {
  const producer = kafka.producer({ allowAutoTopicCreation: true, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  for (let i = 0; i < messages.length; i += 1000) await producer.send({ topic, acks: -1, messages: messages.slice(i, i + 1000) });
  await producer.disconnect();
}

/** Messages per second a raw kafkajs consumer reads the topic's first n messages at (from its first message). */
async function rawRead(kafka: Kafka, topic: string, n: number): Promise<number> {
  const consumer = kafka.consumer({ groupId: `raw-${String(Date.now())}-${String(Math.random())}`, maxWaitTimeInMs: 100 });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  let seen = 0;
  let first = 0;
  const done = new Promise<number>((resolve) => {
    void consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch }) => {
        if (seen === 0) first = performance.now();
        seen += batch.messages.length;
        if (seen >= n) resolve(performance.now() - first);
        await Promise.resolve();
      },
    });
  });
  const ms = await done;
  await consumer.disconnect();
  return n / (ms / 1000);
}

/** Messages per second the service takes n trigger messages into its log at (from the first trigger seen). */
async function serviceIngest(b: Bench, n: number, before: number): Promise<number> {
  const count = () => json<number>(b, 'POST', '/api/v1/notification-triggers/count', { filter: [{ column: 'source', operator: 'EQ', value: 'KAFKA' }] });
  let first: number | undefined;
  for (;;) {
    const c = await count();
    if (first === undefined && c > before) first = performance.now();
    if (c >= before + n) return n / (Math.max(1, performance.now() - (first ?? performance.now())) / 1000);
    await sleep(20);
  }
}

async function kafkaFigure(smtpUrl: string, rounds: number, n: number): Promise<NotificationFigure['kafka']> {
  const found = await findKafka();
  if ('skip' in found) return { skipped: found.skip };
  const kafka = new Kafka({ clientId: 'bench-raw', brokers: found.brokers, logLevel: logLevel.NOTHING });
  const raws: number[] = [];
  const ours: number[] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      const topic = `bench-triggers-${String(Date.now())}-${String(round)}`;
      // The service first (its rules made), then the messages: it takes them as they come ...
      const b = await benchService({ smtpUrl, brokers: found.brokers, topic });
      try {
        await produce(kafka, topic, messagesOf(n, round));
        const mine = await serviceIngest(b, n, 0);
        // ... and a raw consumer reads the same messages from the same broker.
        const raw = await rawRead(kafka, topic, n);
        raws.push(raw);
        ours.push(mine);
        console.log(`  kafka round ${String(round)}: raw kafkajs ${raw.toFixed(0)} msg/s | ours ${mine.toFixed(0)} msg/s (${(mine / raw).toFixed(3)})`);
      } finally {
        await b.close();
      }
    }
  } finally {
    await found.stop?.();
  }
  return { raw: median(raws), ours: median(ours), ratio: median(ours.map((o, i) => o / (raws[i] ?? 1))), messages: n };
}

export async function notificationFigure(options: { rounds: number; triggers: number; kafkaMessages: number }): Promise<NotificationFigure> {
  const smtp = new SMTPServer({ authOptional: true, disabledCommands: ['STARTTLS', 'AUTH'], logger: false, disableReverseLookup: true, onData: (stream, _s, callback) => { stream.on('end', () => { callback(); }); stream.resume(); } });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  const smtpUrl = `smtp://127.0.0.1:${String((smtp.server.address() as AddressInfo).port)}`;
  try {
    const b = await benchService({ smtpUrl });
    const creates: number[] = [];
    const inApp: number[] = [];
    const email: number[] = [];
    try {
      for (let i = 0; i < 5; i++) await triggerToSent(b, 'BENCH_APP', -i); // warm
      for (let round = 1; round <= options.rounds; round++) {
        const c: number[] = [];
        const a: number[] = [];
        const e: number[] = [];
        for (let i = 0; i < options.triggers; i++) {
          c.push(await plainCreate(b, round * 10_000 + i));
          a.push(await triggerToSent(b, 'BENCH_APP', round * 10_000 + i));
          e.push(await triggerToSent(b, 'BENCH_MAIL', round * 10_000 + i));
        }
        creates.push(...c);
        inApp.push(...a);
        email.push(...e);
        console.log(`  round ${String(round)}: create p50 ${median(c).toFixed(1)} ms | trigger to SENT in-app p50 ${median(a).toFixed(1)} ms, e-mail p50 ${median(e).toFixed(1)} ms`);
      }
    } finally {
      await b.close();
    }
    const figure = (values: number[]) => {
      const sorted = [...values].sort((x, y) => x - y);
      return { p50: quantile(sorted, 0.5), p99: quantile(sorted, 0.99) };
    };
    const kafka = await kafkaFigure(smtpUrl, options.rounds, options.kafkaMessages);
    return { create: figure(creates), inApp: figure(inApp), email: figure(email), kafka };
  } finally {
    await new Promise<void>((resolve) => { smtp.close(() => { resolve(); }); });
  }
}

/** The figure's rows for the bench's table: figure, baseline, measured, ratio, goal, met. */
export function notificationRows(f: NotificationFigure): [string, string, string, string, string, boolean][] {
  const ms = (n: number) => `${n.toFixed(1)} ms`;
  const rows: [string, string, string, string, string, boolean][] = [
    ['REST trigger to SENT, in-app, p50 / p99', `${ms(f.create.p50)} / ${ms(f.create.p99)} (H, plain create)`, `${ms(f.inApp.p50)} / ${ms(f.inApp.p99)}`, '—', '— (reported)', true],
    ['REST trigger to SENT, e-mail to local SMTP, p50 / p99', `${ms(f.create.p50)} / ${ms(f.create.p99)} (H)`, `${ms(f.email.p50)} / ${ms(f.email.p99)}`, '—', '— (reported)', true],
  ];
  if ('skipped' in f.kafka) rows.push(['Kafka trigger ingest', 'not measured', f.kafka.skipped, '—', '—', true]);
  else rows.push([`Kafka trigger ingest, ${String(f.kafka.messages)} messages`, `${f.kafka.raw.toFixed(0)} msg/s (I, raw kafkajs consumer)`, `${f.kafka.ours.toFixed(0)} msg/s`, `${(f.kafka.ratio * 100).toFixed(1)}%`, '— (reported)', true]);
  return rows;
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const { values } = parseArgs({ options: { 'notification-rounds': { type: 'string', default: '3' }, triggers: { type: 'string', default: '50' }, 'kafka-messages': { type: 'string', default: '5000' } } });
  const options = { rounds: Number(values['notification-rounds']), triggers: Number(values.triggers), kafkaMessages: Number(values['kafka-messages']) };
  console.log(`Notifications: ${String(options.rounds)} rounds of ${String(options.triggers)} triggers per channel, ${String(options.kafkaMessages)} Kafka messages per round`);
  const figure = await notificationFigure(options);
  console.log(['', '| figure | baseline | measured | ratio | goal | met? |', '|---|---|---|---|---|---|', ...notificationRows(figure).map(([a, b, c, d, e, ok]) => `| ${a} | ${b} | ${c} | ${d} | ${e} | ${ok ? 'yes' : 'NO'} |`)].join('\n'));
  process.exit(0);
}
