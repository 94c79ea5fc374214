// Where and how the Kafka suites run. test/support/kafka.globalSetup.ts finds a Kafka once per run
// (KAFKA_BROKERS, else a real Apache Kafka broker it starts, else librdkafka's mock cluster through
// kcat, else none); a suite asks here:
//
//   describeKafka('my adapter', () => {
//     it('…', async () => {
//       const brokers = requireKafkaBrokers();
//       const topic = uniqueName('triggers');
//       await produceMessages(brokers, topic, [{ key: 'k', value: '{"a":1}', headers: { h: 'v' } }]);
//       const read = await readTopic(brokers, topic, { count: 1 });
//     });
//   });
//
// `describeKafkaBroker` is for what only a real broker shows (rebalances of a live group, the
// idempotent producer): skipped on the mock cluster, with the reason.
//
// Our broker starts a new group at once (group.initial.rebalance.delay.ms=0); the mock cluster, as a
// Kafka with default settings, waits 3 s for more members first, so every fresh group (every
// `readTopic` too) costs about 3 s there: run independent tests with `it.concurrent`, on their own
// topics and groups (`uniqueName`). A group its only member left takes a new member only after the
// session timeout less 1 s on the mock (kafkajs default: 30 s): give consumers that a test restarts
// `FAST_GROUP` (session 6 s, the least a Kafka accepts by default). Not less than about 4 s on the
// mock: a member waits up to 3 s in its JoinGroup without a heartbeat, the mock drops it past its
// session timeout, and the join then hangs until kafkajs gives up on the request.

import { randomUUID } from 'node:crypto';
import { Kafka, Partitioners, logLevel, type KafkaMessage } from 'kafkajs';
import { describe, inject } from 'vitest';
import type { IncomingMessage } from '../../domain/ports.ts';
import { headerText } from '../../infra/kafka/client.ts';

/** Consumer settings under which a group its member left takes a new one in 5 s on the mock. */
export const FAST_GROUP = { sessionTimeoutMs: 6_000, heartbeatIntervalMs: 1_000 } as const;

/** The bootstrap brokers of this run's Kafka; undefined when there is none. */
export function kafkaBrokers(): string[] | undefined {
  return inject('kafkaBrokers');
}

/** The bootstrap brokers, inside a test of a suite that is skipped without them. */
export function requireKafkaBrokers(): string[] {
  const brokers = kafkaBrokers();
  if (brokers === undefined) throw new Error(`no Kafka for this test: ${kafkaSkipReason() ?? 'unknown reason'}`);
  return brokers;
}

let reasonPrinted = false;

/** Why the Kafka suites skip (printed once per test file), or undefined when there is a Kafka. */
export function kafkaSkipReason(): string | undefined {
  const reason = inject('kafkaSkipReason');
  if (reason !== undefined && !reasonPrinted) {
    reasonPrinted = true;
    process.stderr.write(`[kafka] skipping the Kafka suites: ${reason}\n`);
  }
  return reason;
}

/** Whether this run's Kafka grants producer ids (a broker does; librdkafka's mock cluster does not
 * to kafkajs), so the service's publisher may be idempotent. */
export function idempotentProducers(): boolean {
  return inject('kafkaNotABroker') === undefined;
}

let notABrokerPrinted = false;

/** `describe` for what needs a real Kafka broker, skipped (with the reason printed and in its
 * title) when this run has none, or only the mock cluster. */
export function describeKafkaBroker(name: string, body: () => void): void {
  const reason = kafkaSkipReason() ?? inject('kafkaNotABroker');
  if (reason === undefined) {
    describe(name, body);
    return;
  }
  if (!notABrokerPrinted) {
    notABrokerPrinted = true;
    process.stderr.write(`[kafka] skipping the suites that need a real Kafka broker: ${reason}\n`);
  }
  describe.skip(`${name} (skipped: ${reason})`, body);
}

/** Makes the topic with this many partitions (one replica each). */
export async function createTopic(brokers: readonly string[], topic: string, partitions: number): Promise<void> {
  const admin = testKafka(brokers).admin();
  await admin.connect();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }], waitForLeaders: true });
  } finally {
    await admin.disconnect();
  }
}

/** The group's committed offset per partition of the topic (-1: none). */
export async function committedOffsets(brokers: readonly string[], groupId: string, topic: string): Promise<Map<number, bigint>> {
  const admin = testKafka(brokers).admin();
  await admin.connect();
  try {
    const [offsets] = await admin.fetchOffsets({ groupId, topics: [topic] });
    return new Map((offsets?.partitions ?? []).map((p) => [p.partition, BigInt(p.offset)]));
  } finally {
    await admin.disconnect();
  }
}

/** `describe`, skipped when this run has no Kafka, with the reason printed and in its title. */
export function describeKafka(name: string, body: () => void): void {
  const reason = kafkaSkipReason();
  if (reason === undefined) describe(name, body);
  else describe.skip(`${name} (skipped: ${reason})`, body);
}

/** A topic or group name no other test (nor an earlier run against the same Kafka) uses. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomUUID().slice(0, 12)}`;
}

/** A kafkajs client for tests, silent. */
export function testKafka(brokers: readonly string[]): Kafka {
  return new Kafka({ clientId: 'tests', brokers: [...brokers], logLevel: logLevel.NOTHING });
}

export type TestMessage = {
  key?: string | null;
  value: string | Buffer | null;
  headers?: Readonly<Record<string, string>>;
  /** Unset: chosen from the key (the same key, the same partition). */
  partition?: number;
};

/** Produces the messages (in order, one request); creates the topic if new. Each message once: a
 * partition that refuses its part of a request (a topic created by it has a partition without a
 * leader yet) fails the whole request in kafkajs, which sends it again, the parts the other
 * partitions took included; so the producer is idempotent where the Kafka grants producer ids, and
 * the broker drops what it took already (100 messages once came out as 134). */
export async function produceMessages(brokers: readonly string[], topic: string, messages: readonly TestMessage[]): Promise<void> {
  const idempotent = idempotentProducers();
  const producer = testKafka(brokers).producer({
    allowAutoTopicCreation: true,
    createPartitioner: Partitioners.DefaultPartitioner,
    idempotent,
    ...(idempotent ? { maxInFlightRequests: 1 } : {}),
  });
  await producer.connect();
  try {
    await producer.send({
      topic,
      acks: -1,
      messages: messages.map((m) => ({
        key: m.key ?? null,
        value: m.value,
        ...(m.headers === undefined ? {} : { headers: { ...m.headers } }),
        ...(m.partition === undefined ? {} : { partition: m.partition }),
      })),
    });
  } finally {
    await producer.disconnect();
  }
}

/** The topic's messages from the start, each partition in offset order, partitions one after the
 * other. Reads in a fresh consumer group until `count` messages arrived, or, without `count`,
 * until every message the topic held when the read began was read; rejects after `timeoutMs`
 * (default 15 s) saying how many it got. Commits nothing. */
export async function readTopic(
  brokers: readonly string[],
  topic: string,
  options: { count?: number; timeoutMs?: number } = {},
): Promise<IncomingMessage[]> {
  const kafka = testKafka(brokers);
  const ends = options.count === undefined ? await endOffsets(kafka, topic) : undefined;
  const got: IncomingMessage[] = [];
  const reached = new Map<number, bigint>();
  const done = (): boolean =>
    ends === undefined ? got.length >= (options.count ?? 0) : [...ends].every(([p, end]) => (reached.get(p) ?? 0n) >= end);
  if (done()) return got;
  const consumer = kafka.consumer({ groupId: uniqueName('read-topic'), maxWaitTimeInMs: 200 });
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timeoutMs = options.timeoutMs ?? 15_000;
      const timer = setTimeout(() => {
        reject(
          new Error(
            `readTopic(${topic}): ${String(got.length)} message(s) after ${String(timeoutMs)} ms, expected ${options.count === undefined ? 'the end of every partition' : String(options.count)}`,
          ),
        );
      }, timeoutMs);
      void consumer
        .run({
          autoCommit: false,
          eachMessage: ({ partition, message }) => {
            got.push(toIncoming(topic, partition, message));
            reached.set(partition, BigInt(message.offset) + 1n);
            if (done()) {
              clearTimeout(timer);
              resolve();
            }
            return Promise.resolve();
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return got.sort((a, b) => (a.partition === b.partition ? Number(BigInt(a.offset) - BigInt(b.offset)) : a.partition - b.partition));
}

/** Where each partition of the topic ends now (its high watermark), partitions with messages only. */
async function endOffsets(kafka: Kafka, topic: string): Promise<Map<number, bigint>> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const offsets = await admin.fetchTopicOffsets(topic);
    return new Map(offsets.filter((o) => BigInt(o.high) > BigInt(o.low)).map((o) => [o.partition, BigInt(o.high)]));
  } finally {
    await admin.disconnect();
  }
}

function toIncoming(topic: string, partition: number, message: KafkaMessage): IncomingMessage {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    const text = headerText(value);
    if (text !== undefined) headers[name] = text;
  }
  return { topic, partition, offset: message.offset, key: message.key?.toString('utf8') ?? null, headers, value: message.value };
}
