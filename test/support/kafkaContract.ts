// The Kafka adapters' contract (infra/kafka), run against a Kafka by test/infra/kafka/kafka.int.spec.ts
// (KAFKA_BROKERS, else librdkafka's mock cluster through kcat) and kafka.containers.spec.ts (a Kafka
// container through testcontainers where an engine exists). What the rest of the service relies on: what is published arrives with
// its headers and message id; a dead message goes to the dead-letter topic with why and where it
// came from, and the consumer goes on; an offset is committed only after its message was handled,
// so a handler that throws, a stop and a restart lose nothing and skip nothing.
// Each test has its own topics and group, and they run concurrently: a fresh group waits 3 s for
// more members before it starts.

import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, describe, it, type TestFunction } from 'vitest';
import type { KafkaMessage } from 'kafkajs';
import type { BatchOutcome, IncomingMessage, MessageOutcome } from '../../domain/ports.ts';
import { KafkaMessageConsumer, type KafkaConsumerOptions } from '../../infra/kafka/consumer.ts';
import { KafkaMessagePublisher } from '../../infra/kafka/publisher.ts';
import { committedOffsets, FAST_GROUP, produceMessages, readTopic, testKafka, uniqueName } from './kafka.ts';

const HANDLED: MessageOutcome = { kind: 'handled' };
const text = (m: IncomingMessage): string => m.value?.toString('utf8') ?? '';
const where = (m: IncomingMessage): string => `${String(m.partition)}:${m.offset}`;

/** The contract, against the Kafka whose bootstrap brokers `brokers` answers (once the suite runs). */
export function kafkaContract(name: string, brokers: () => string[], peer: { mockCluster?: boolean } = {}): void {
  describe(name, () => {
    kafkaContractTests(brokers, peer.mockCluster === true);
  });
}

function kafkaContractTests(requireKafkaBrokers: () => string[], mockCluster: boolean): void {
  const consumers: KafkaMessageConsumer[] = [];
  const publishers: KafkaMessagePublisher[] = [];

  afterAll(async () => {
    await Promise.allSettled([...consumers.map((c) => c.stop()), ...publishers.map((p) => p.close())]);
  });

  const consumer = (topic: string, groupId: string, options: Partial<KafkaConsumerOptions> = {}): KafkaMessageConsumer => {
    const c = new KafkaMessageConsumer({
      brokers: requireKafkaBrokers(),
      clientId: 'kafka-contract',
      groupId,
      topic,
      deadLetterTopic: `${topic}.dead`,
      ...FAST_GROUP,
      ...options,
    });
    consumers.push(c);
    return c;
  };

  /** Idempotent, as the service's, except on the mock cluster (which grants kafkajs no producer id). */
  const newPublisher = (): KafkaMessagePublisher => {
    const publisher = new KafkaMessagePublisher({ brokers: requireKafkaBrokers(), clientId: 'kafka-contract', idempotent: !mockCluster });
    publishers.push(publisher);
    return publisher;
  };

  const until = async (what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!(await condition())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(20);
    }
  };

  const committed = (groupId: string, topic: string): Promise<Map<number, bigint>> =>
    committedOffsets(requireKafkaBrokers(), groupId, topic);

  /** Where each partition of the topic ends (its high watermark). */
  const ends = async (topic: string): Promise<Map<number, bigint>> => {
    const admin = testKafka(requireKafkaBrokers()).admin();
    await admin.connect();
    try {
      return new Map((await admin.fetchTopicOffsets(topic)).map((o) => [o.partition, BigInt(o.high)]));
    } finally {
      await admin.disconnect();
    }
  };

  it.concurrent('what is published arrives in order with its key, value, headers and message id', async ({ expect }) => {
    const brokers = requireKafkaBrokers();
    const topic = uniqueName('contract-publish');
    const publisher = newPublisher();
    await publisher.publish(topic, []); // nothing to send: resolves
    await publisher.publish(topic, [
      { key: 'order-1', id: 'id-1', value: '{"n":1}', headers: { 'content-type': 'application/json' } },
      { key: 'order-1', id: 'id-2', value: '{"n":2}' },
    ]);
    // Header values kafkajs hands over as bytes, or as an array when a name repeats: the first, as text.
    const producer = testKafka(brokers).producer();
    await producer.connect();
    await producer.send({
      topic,
      messages: [{ key: 'order-1', value: '{"n":3}', headers: { repeated: ['first', 'second'], bytes: Buffer.from('é', 'utf8') } }],
    });
    await producer.disconnect();

    const got: IncomingMessage[] = [];
    await consumer(topic, uniqueName('contract-publish')).start((m) => {
      got.push(m);
      return Promise.resolve(HANDLED);
    });
    await until('the three messages', () => got.length >= 3);

    expect(got.map(text)).toEqual(['{"n":1}', '{"n":2}', '{"n":3}']);
    const partition = got[0]?.partition;
    expect(got.map((m) => ({ topic: m.topic, partition: m.partition, offset: m.offset, key: m.key }))).toEqual([
      { topic, partition, offset: '0', key: 'order-1' },
      { topic, partition, offset: '1', key: 'order-1' },
      { topic, partition, offset: '2', key: 'order-1' },
    ]);
    expect(got[0]?.value).toBeInstanceOf(Buffer);
    expect(got[0]?.headers).toEqual({ 'content-type': 'application/json', 'message-id': 'id-1' });
    expect(got[1]?.headers).toEqual({ 'message-id': 'id-2' });
    expect(got[2]?.headers).toEqual({ repeated: 'first', bytes: 'é' });

    await publisher.close();
    await publisher.close();
    await expect(publisher.publish(topic, [{ key: 'k', id: 'id-4', value: 'late' }])).rejects.toThrow(/closed/);
  });

  it.concurrent('each key keeps its order across many publishes, some of them at once', async ({ expect }) => {
    const topic = uniqueName('contract-order');
    const publisher = newPublisher();
    // 40 keys (notifications), 25 changes each, interleaved, in 10 publishes of 100 asked for at once.
    const changes = Array.from({ length: 1000 }, (_, i) => ({
      key: `n-${String(i % 40)}`,
      id: `e-${String(i)}`,
      value: JSON.stringify({ step: Math.floor(i / 40) }),
    }));
    await Promise.all(Array.from({ length: 10 }, (_, b) => publisher.publish(topic, changes.slice(b * 100, b * 100 + 100))));
    const read = await readTopic(requireKafkaBrokers(), topic, { count: 1000 });
    expect(read).toHaveLength(1000);
    const byKey = new Map<string, number[]>();
    for (const m of read) byKey.set(m.key ?? '', [...(byKey.get(m.key ?? '') ?? []), (JSON.parse(text(m)) as { step: number }).step]);
    expect(byKey.size).toBe(40);
    for (const steps of byKey.values()) expect(steps).toEqual(Array.from({ length: 25 }, (_, i) => i));
  });

  const brokerOnly = (name: string, body: TestFunction): void => {
    if (mockCluster) it.skip(`${name} (skipped: librdkafka's mock cluster grants kafkajs no producer id)`, body);
    else it.concurrent(name, body);
  };

  brokerOnly(
    'the publisher is an idempotent producer: the broker gave it a producer id and numbers its batches per partition',
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-idempotent');
      const publisher = newPublisher();
      for (let b = 0; b < 3; b++)
        await publisher.publish(
          topic,
          Array.from({ length: 5 }, (_, i) => ({ key: 'one-key', id: `${String(b)}-${String(i)}`, value: `v${String(b * 5 + i)}` })),
        );
      // A plain producer, for contrast: its batches carry no producer id (-1).
      const plain = testKafka(brokers).producer();
      await plain.connect();
      await plain.send({ topic, acks: -1, messages: [{ key: 'one-key', value: 'plain' }] });
      await plain.disconnect();
      // What the broker stored with each record batch, as kafkajs decodes it (batchContext).
      const batches: { producerId: string; firstSequence: number; value: string }[] = [];
      const reader = testKafka(brokers).consumer({ groupId: uniqueName('contract-idempotent'), maxWaitTimeInMs: 200 });
      await reader.connect();
      try {
        await reader.subscribe({ topics: [topic], fromBeginning: true });
        await reader.run({
          autoCommit: false,
          eachMessage: ({ message }) => {
            const context = (message as KafkaMessage & { batchContext: { producerId: string; firstSequence: number } }).batchContext;
            batches.push({
              producerId: context.producerId,
              firstSequence: context.firstSequence,
              value: message.value?.toString('utf8') ?? '',
            });
            return Promise.resolve();
          },
        });
        await until('the 16 messages', () => batches.length >= 16);
      } finally {
        await reader.disconnect();
      }
      const ours = batches.filter((b) => b.value !== 'plain');
      expect(ours.map((b) => b.value)).toEqual(Array.from({ length: 15 }, (_, i) => `v${String(i)}`));
      const producerIds = new Set(ours.map((b) => b.producerId));
      expect(producerIds.size).toBe(1);
      expect(BigInt([...producerIds][0] ?? '-1')).toBeGreaterThanOrEqual(0n);
      // Three sends of five: batches numbered 0, 5 and 10.
      expect([...new Set(ours.map((b) => b.firstSequence))]).toEqual([0, 5, 10]);
      expect(batches.find((b) => b.value === 'plain')?.producerId).toBe('-1');
    },
  );

  it.concurrent(
    'a dead message goes to the dead-letter topic with the reason and its origin, and the consumer goes on',
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-dead');
      const groupId = uniqueName('contract-dead');
      await produceMessages(brokers, topic, [
        { key: 'a', value: 'ok-0', partition: 0 },
        { key: 'b', value: 'not json', headers: { trace: 't-1' }, partition: 0 },
        { key: null, value: 'ok-2', partition: 0 },
      ]);
      const handled: string[] = [];
      await consumer(topic, groupId).start((m) => {
        if (text(m) === 'not json') return Promise.resolve({ kind: 'dead', reason: 'the value is not JSON' });
        handled.push(text(m));
        return Promise.resolve(HANDLED);
      });
      await until('the two good messages', () => handled.length >= 2);
      expect(handled).toEqual(['ok-0', 'ok-2']);

      const dead = await readTopic(brokers, `${topic}.dead`, { count: 1 });
      expect(dead).toHaveLength(1);
      expect(dead[0]?.key).toBe('b');
      expect(dead[0] === undefined ? undefined : text(dead[0])).toBe('not json');
      expect(dead[0]?.headers).toEqual({
        trace: 't-1',
        'x-dead-letter-reason': 'the value is not JSON',
        'x-original-topic': topic,
        'x-original-partition': '0',
        'x-original-offset': '1',
      });
      await until('offset 3 committed', async () => (await committed(groupId, topic)).get(0) === 3n);
    },
  );

  it.concurrent('offsets of handled messages are committed: a new consumer of the group gets none of them again', async ({ expect }) => {
    const brokers = requireKafkaBrokers();
    const topic = uniqueName('contract-offsets');
    const groupId = uniqueName('contract-offsets');
    await produceMessages(
      brokers,
      topic,
      Array.from({ length: 100 }, (_, i) => ({ key: `k${String(i)}`, value: `v${String(i)}` })),
    );
    const first = new Set<string>();
    const c1 = consumer(topic, groupId);
    await c1.start((m) => {
      first.add(where(m));
      return Promise.resolve(HANDLED);
    });
    await until('100 messages', () => first.size >= 100);
    await c1.stop();
    await c1.stop(); // idempotent
    expect(first.size).toBe(100);
    expect(await committed(groupId, topic)).toEqual(await ends(topic));

    // One more message in every partition: once each arrived, nothing older can still come.
    const partitions = [...(await ends(topic)).keys()];
    const again: IncomingMessage[] = [];
    await consumer(topic, groupId).start((m) => {
      again.push(m);
      return Promise.resolve(HANDLED);
    });
    await produceMessages(
      brokers,
      topic,
      partitions.map((partition) => ({ value: 'after the restart', partition })),
    );
    await until('the new messages', () => again.length >= partitions.length);
    expect(again.map(text)).toEqual(partitions.map(() => 'after the restart'));
  });

  it.concurrent(
    'a handler that throws gets the message again after a pause; nothing after it is handled or committed before it',
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-retry');
      const groupId = uniqueName('contract-retry');
      await produceMessages(
        brokers,
        topic,
        Array.from({ length: 10 }, (_, i) => ({ value: `m${String(i)}`, partition: 0 })),
      );
      // A plain recorder, not vi.fn(): vitest clears every mock when a test starts (clearMocks), and
      // a concurrent test starting meanwhile wiped the calls (why a log line once went "missing").
      const logged: { entry: object; msg: string }[] = [];
      const logger = { error: (entry: object, msg: string): void => void logged.push({ entry, msg }) };
      const handled: string[] = [];
      const attempts: number[] = [];
      const committedAtFailure: (bigint | undefined)[] = [];
      await consumer(topic, groupId, { logger }).start(async (m) => {
        if (m.offset === '3' && attempts.push(Date.now()) <= 2) {
          committedAtFailure.push((await committed(groupId, topic)).get(0));
          throw new Error('the store is unavailable');
        }
        handled.push(m.offset);
        return HANDLED;
      });
      await until('all ten', () => handled.length >= 10);

      expect(handled).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
      expect(attempts).toHaveLength(3);
      for (const c of committedAtFailure) expect(c === undefined || c <= 3n).toBe(true);
      // Paused, not spinning, for longer each time (the partition's reads resume within a fetch wait).
      const retries = logged.map(({ entry }) => (entry as { retryInMs?: number }).retryInMs).filter((ms) => ms !== undefined);
      // Each failure is logged with its pause: 200 ms, then 400 ms.
      expect(retries).toEqual([200, 400]);
      const [a0 = 0, a1 = 0, a2 = 0] = attempts;
      expect(a1 - a0).toBeGreaterThanOrEqual(190);
      expect(a2 - a1).toBeGreaterThanOrEqual(390);
      expect(logged).toContainEqual({
        entry: expect.objectContaining({ topic, partition: 0, offset: '3', err: expect.any(Error) }),
        msg: expect.any(String),
      });
      await until('offset 10 committed', async () => (await committed(groupId, topic)).get(0) === 10n);
    },
  );

  it.concurrent(
    "batches: a partition's messages come in slices of at most batchSize, in order; dead letters go out, and a retry reads again from its message",
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-batches');
      const groupId = uniqueName('contract-batches');
      await produceMessages(
        brokers,
        topic,
        Array.from({ length: 30 }, (_, i) => ({ key: `k${String(i)}`, value: `m${String(i)}`, partition: 0 })),
      );
      const slices: string[][] = [];
      const handled: string[] = [];
      let retried = false;
      await consumer(topic, groupId, { batchSize: 8 }).startBatches((messages) => {
        slices.push(messages.map(text));
        return Promise.resolve(
          messages.map((m): BatchOutcome => {
            if (text(m) === 'm5') return { kind: 'dead', reason: 'unreadable' };
            if (text(m) === 'm19' && !retried) {
              retried = true;
              return { kind: 'retry', error: new Error('the store is unavailable') };
            }
            handled.push(text(m));
            return HANDLED;
          }),
        );
      });
      await until('offset 30 committed', async () => (await committed(groupId, topic)).get(0) === 30n);

      expect(slices.every((slice) => slice.length <= 8)).toBe(true);
      // m19 twice (its retry); what came after it in its slice, handled the first time round, comes
      // again with it; nothing before it does.
      expect(slices.flat().filter((v) => v === 'm19')).toHaveLength(2);
      const all = Array.from({ length: 30 }, (_, i) => `m${String(i)}`);
      expect([...new Set(handled)].sort()).toEqual(all.filter((v) => v !== 'm5').sort());
      const twice = handled.filter((v, i) => handled.indexOf(v) !== i);
      expect(twice.every((v) => Number(v.slice(1)) > 19)).toBe(true);
      const dead = await readTopic(brokers, `${topic}.dead`, { count: 1 });
      expect(dead.map((m) => [m.key, text(m), m.headers['x-dead-letter-reason']])).toEqual([['k5', 'm5', 'unreadable']]);
    },
  );

  it.concurrent(
    'a slice handled for longer than the session timeout keeps the member in its group: handled once, committed',
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-slow-slice');
      const groupId = uniqueName('contract-slow-slice');
      await produceMessages(
        brokers,
        topic,
        Array.from({ length: 5 }, (_, i) => ({ value: `m${String(i)}`, partition: 0 })),
      );
      const handled: string[] = [];
      await consumer(topic, groupId).startBatches(async (messages) => {
        // Past the group's 6 s session timeout (FAST_GROUP), with no heartbeat of the handler's own.
        if (handled.length === 0) await sleep(8_000);
        handled.push(...messages.map(text));
        return messages.map(() => HANDLED);
      });
      await until('offset 5 committed', async () => (await committed(groupId, topic)).get(0) === 5n, 30_000);
      await sleep(1_000);
      expect(handled).toEqual(['m0', 'm1', 'm2', 'm3', 'm4']);
    },
  );

  it.concurrent(
    'a handler that keeps failing is tried with growing pauses, and the message is handled once it succeeds',
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-backoff');
      await produceMessages(brokers, topic, [
        { value: 'stuck', partition: 0 },
        { value: 'next', partition: 0 },
      ]);
      let failUntil = Number.POSITIVE_INFINITY;
      const attempts: number[] = [];
      const handled: string[] = [];
      await consumer(topic, uniqueName('contract-backoff')).start((m) => {
        if (text(m) === 'stuck') {
          attempts.push(Date.now());
          if (attempts.length === 1) failUntil = Date.now() + 2_000;
          if (Date.now() < failUntil) return Promise.reject(new Error('the store is unavailable'));
        }
        handled.push(text(m));
        return Promise.resolve(HANDLED);
      });
      await until('both handled', () => handled.length >= 2, 20_000);
      expect(handled).toEqual(['stuck', 'next']);
      // 0.2 s, 0.4 s, 0.8 s, 1.6 s …: about five attempts in two seconds, not thousands.
      expect(attempts.length).toBeGreaterThanOrEqual(3);
      expect(attempts.length).toBeLessThanOrEqual(6);
    },
  );

  it.concurrent(
    'a stop during handling commits only what was handled; the next consumer goes on from there, without gaps',
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-stop');
      const groupId = uniqueName('contract-stop');
      await produceMessages(
        brokers,
        topic,
        Array.from({ length: 40 }, (_, i) => ({ key: `k${String(i)}`, value: `v${String(i)}` })),
      );
      const first: IncomingMessage[] = [];
      const c1 = consumer(topic, groupId);
      let stopping: Promise<void> | undefined;
      await c1.start(async (m) => {
        first.push(m);
        // Stopped from inside a handling: the stop waits for it to end.
        if (first.length === 15) stopping = c1.stop();
        await sleep(20);
        return HANDLED;
      });
      await until('the stop', () => stopping !== undefined);
      await stopping;
      const handledBeforeStop = first.length;
      await sleep(300);
      expect(first.length).toBe(handledBeforeStop);
      expect(handledBeforeStop).toBeGreaterThanOrEqual(15);

      // Committed: exactly what was handled, the message under way at the stop included.
      const done = new Set(first.map(where));
      const commits = await committed(groupId, topic);
      for (const [partition, offset] of commits) {
        const handledHere = first.filter((m) => m.partition === partition).map((m) => BigInt(m.offset));
        expect(offset).toBe(handledHere.length === 0 ? -1n : handledHere.reduce((a, b) => (a > b ? a : b)) + 1n);
        for (let o = 0n; o < offset; o++) expect(done.has(`${String(partition)}:${String(o)}`)).toBe(true);
      }

      const second: IncomingMessage[] = [];
      await consumer(topic, groupId).start((m) => {
        second.push(m);
        return Promise.resolve(HANDLED);
      });
      const end = await ends(topic);
      const seen = (partition: number, offset: bigint): boolean => {
        const at = `${String(partition)}:${String(offset)}`;
        return done.has(at) || second.some((m) => where(m) === at);
      };
      await until('the last message of every partition', () => [...end].every(([p, high]) => high === 0n || seen(p, high - 1n)));
      for (const [partition, high] of end) {
        // The new consumer starts where the commit was (the start for none) …
        const again = second.filter((m) => m.partition === partition).map((m) => BigInt(m.offset));
        const from = commits.get(partition) ?? -1n;
        if (again.length > 0) expect(again[0]).toBe(from < 0n ? 0n : from);
        // … so, with the first one's, every message was handled at least once.
        for (let o = 0n; o < high; o++) expect(seen(partition, o)).toBe(true);
      }
    },
  );

  it.concurrent(
    'a stop while a failing message waits for its retry commits nothing from it on; the next consumer handles it',
    async ({ expect }) => {
      const brokers = requireKafkaBrokers();
      const topic = uniqueName('contract-stop-failing');
      const groupId = uniqueName('contract-stop-failing');
      await produceMessages(
        brokers,
        topic,
        Array.from({ length: 10 }, (_, i) => ({ value: `m${String(i)}`, partition: 0 })),
      );
      let failures = 0;
      const c1 = consumer(topic, groupId);
      await c1.start((m) => {
        if (m.offset !== '5') return Promise.resolve(HANDLED);
        failures += 1;
        return Promise.reject(new Error('the store is unavailable'));
      });
      await until('two failures', () => failures >= 2);
      const stopStarted = Date.now();
      await c1.stop();
      expect(Date.now() - stopStarted).toBeLessThan(3_000);
      expect((await committed(groupId, topic)).get(0)).toBe(5n);

      const second: string[] = [];
      await consumer(topic, groupId).start((m) => {
        second.push(m.offset);
        return Promise.resolve(HANDLED);
      });
      await until('the rest', () => second.length >= 5);
      expect(second).toEqual(['5', '6', '7', '8', '9']);
    },
  );

  it.concurrent('a consumer started before its topic exists starts, and reads what is produced to it afterwards', async ({ expect }) => {
    const topic = uniqueName('contract-no-topic-yet');
    const handled: string[] = [];
    // A real broker answers the first metadata request for a topic it is about to create itself
    // (auto.create.topics.enable) with "unknown topic": the start waits for the topic instead of failing.
    await consumer(topic, uniqueName('contract-no-topic-yet')).start((m) => {
      handled.push(text(m));
      return Promise.resolve(HANDLED);
    });
    await produceMessages(requireKafkaBrokers(), topic, [{ value: 'after the start', partition: 0 }]);
    await until('the message', () => handled.length >= 1);
    expect(handled).toEqual(['after the start']);
  });

  it.concurrent('a stopped consumer cannot start again; stopping one never started is fine', async ({ expect }) => {
    const c = consumer(uniqueName('contract-never'), uniqueName('contract-never'));
    await c.stop();
    await expect(c.start(() => Promise.resolve(HANDLED))).rejects.toThrow(/stopped/);
  });

  it.concurrent('a stop while the consumer waits for its group ends the start, and nothing is handled', async ({ expect }) => {
    const brokers = requireKafkaBrokers();
    const topic = uniqueName('contract-stop-starting');
    const groupId = uniqueName('contract-stop-starting');
    await produceMessages(brokers, topic, [{ value: 'never handled', partition: 0 }]);
    // The mock cluster lets a new group's first member wait 3 s for others: the stop comes then.
    // A broker that starts a new group at once (ours) would let it in within milliseconds: there,
    // a member of the group stuck in its handler sends no heartbeat and so does not rejoin, and the
    // newcomer's join waits for it (until its session would time out, 6 s). (The mock cluster
    // drops such a join instead of letting it wait.)
    const stuck = testKafka(brokers).consumer({ groupId, ...FAST_GROUP, maxWaitTimeInMs: 200 });
    let release = (): void => undefined;
    let holding = mockCluster;
    try {
      if (!mockCluster) {
        await stuck.connect();
        await stuck.subscribe({ topics: [topic], fromBeginning: true });
        await stuck.run({
          autoCommit: false,
          eachMessage: () => {
            holding = true;
            return new Promise<void>((resolve) => (release = resolve));
          },
        });
      }
      await until('the stuck member holding the message', () => holding);

      const c = consumer(topic, groupId);
      const handled: string[] = [];
      const starting = c.start((m) => {
        handled.push(text(m));
        return Promise.resolve(HANDLED);
      });
      const rejected = expect(starting).rejects.toThrow(/stopped before it joined/);
      await sleep(500); // connected and subscribed: its JoinGroup waits (for others, or for the stuck member)
      const stopping = c.stop();
      // Let go, the stuck member rejoins and the join under way ends: the stop need not wait out a session.
      release();
      await stopping;
      await rejected;
      await sleep(300);
      expect(handled).toEqual([]);
    } finally {
      release();
      await stuck.disconnect();
    }
  });
}
