// Reads one topic as a member of a consumer group (kafkajs), and commits a message's offset only
// once its handler resolved for it and for every message before it, so a crash or a stop loses
// nothing: at least once. The messages of a fetched batch (one partition) go to the handler a slice
// at a time, the partitions a batch at a time:
// - `startBatches`: a slice of at most `batchSize` messages in one call, so that the
//   handler can take them into its store together (default 5000);
// - `start`: one call per message, `concurrency` at once (default 1: one after the other, in order);
//   with more than 1, messages of one slice may be handled in any order.
// After a failure the messages after it in its slice are handled again (handlers are idempotent; a
// dead letter among them is produced again). What becomes of each message:
// - `handled`: the offset may be committed. Each slice commits the offset after its last one.
// - `dead`: the message can never be handled. Its key, value and headers go to the dead-letter
//   topic (a slice's dead letters in one request), with `x-dead-letter-reason`,
//   `x-original-topic`, `x-original-partition` and `x-original-offset` added; its offset is
//   committed only once the broker acknowledged that.
// - the handler throws or answers `retry` (or the dead-letter topic cannot be written): nothing
//   from the message on is committed; the error is logged, the partition paused for a growing
//   delay (0.2 s doubling up to 5 s, so a failing store does not spin) and read again from it.
// A new group starts at the beginning of the topic. `stop()` lets the slice being handled finish,
// commits what was handled, leaves the group and disconnects.

import { Partitioners, type Consumer, type EachBatchPayload, type KafkaMessage, type Producer } from 'kafkajs';
import type { BatchOutcome, IncomingMessage, MessageConsumer, MessageOutcome } from '../../domain/ports.ts';
import { createKafka, headerText, type KafkaLogger } from './client.ts';

export type KafkaConsumerOptions = {
  brokers: readonly string[];
  clientId: string;
  groupId: string;
  topic: string;
  deadLetterTopic: string;
  logger?: KafkaLogger;
  /** How long the group waits for a silent member before it gives its partitions to others
   * (kafkajs default 30 s), and how often a member says it is alive (3 s). A group a member left
   * rebalances only after about that long on librdkafka's mock cluster, so tests lower both. */
  sessionTimeoutMs?: number;
  /** `start`: messages of a batch handled at once (default 1). */
  concurrency?: number;
  /** `startBatches`: the most messages handed over in one call (default 5000). */
  batchSize?: number;
  heartbeatIntervalMs?: number;
};

type Handle = (message: IncomingMessage) => Promise<MessageOutcome>;
type HandleBatch = (messages: readonly IncomingMessage[]) => Promise<BatchOutcome[]>;

/** About what one fetch of a partition brings (kafkajs takes up to 1 MiB a partition): a fetched
 * batch of small messages goes into the log in one slice, one transaction. */
const DEFAULT_BATCH_SIZE = 5000;

const BACKOFF_FIRST_MS = 200;
const BACKOFF_MAX_MS = 5_000;
// How long a fetch waits for new messages: a stop waits for the fetch under way, so kept short.
const FETCH_WAIT_MS = 500;
// How long a start waits for its topic to be made.
const TOPIC_WAIT_MS = 10_000;
// How often a batch's handling asks kafkajs for a heartbeat (sent when its own interval passed).
const HEARTBEAT_EVERY_MS = 100;

export class KafkaMessageConsumer implements MessageConsumer {
  readonly #options: KafkaConsumerOptions;
  readonly #consumer: Consumer;
  readonly #producer: Producer;
  /** Failures in a row per partition (since its last handled message): the backoff grows with them. */
  readonly #failures = new Map<number, number>();
  readonly #resumeTimers = new Set<NodeJS.Timeout>();
  #started: Promise<void> | undefined;
  #stopped: Promise<void> | undefined;
  #stopping = false;
  /** Set while `start()` waits for the group: a stop ends that wait. */
  #abortStart: (() => void) | undefined;

  constructor(options: KafkaConsumerOptions) {
    this.#options = options;
    const kafka = createKafka(options);
    this.#consumer = kafka.consumer({
      groupId: options.groupId,
      maxWaitTimeInMs: FETCH_WAIT_MS,
      ...(options.sessionTimeoutMs === undefined ? {} : { sessionTimeout: options.sessionTimeoutMs }),
      ...(options.heartbeatIntervalMs === undefined ? {} : { heartbeatInterval: options.heartbeatIntervalMs }),
    });
    // A plain producer, acknowledged by every in-sync replica (no idempotence, no transactions).
    this.#producer = kafka.producer({ allowAutoTopicCreation: true, createPartitioner: Partitioners.DefaultPartitioner });
    this.#consumer.on(this.#consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) {
        options.logger?.error(
          { err: payload.error, topic: options.topic, groupId: options.groupId },
          'Kafka consumer stopped after an error it does not restart from; the topic is no longer read',
        );
      }
    });
  }

  start(handle: Handle): Promise<void> {
    const oneByOne: HandleBatch = (messages) =>
      Promise.all(
        messages.map(async (message): Promise<BatchOutcome> => {
          try {
            return await handle(message);
          } catch (error) {
            return { kind: 'retry', error };
          }
        }),
      );
    return this.#begin(oneByOne, this.#options.concurrency ?? 1);
  }

  startBatches(handle: HandleBatch): Promise<void> {
    return this.#begin(handle, this.#options.batchSize ?? DEFAULT_BATCH_SIZE);
  }

  #begin(handle: HandleBatch, sliceSize: number): Promise<void> {
    if (this.#stopping) return Promise.reject(new Error('this Kafka consumer was stopped; make a new one'));
    this.#started ??= this.#start(handle, Math.max(1, sliceSize));
    return this.#started;
  }

  stop(): Promise<void> {
    this.#stopping = true;
    this.#stopped ??= this.#stop();
    return this.#stopped;
  }

  async #start(handle: HandleBatch, sliceSize: number): Promise<void> {
    const unlessStopped = (): void => {
      if (this.#stopping) throw new Error('the Kafka consumer was stopped before it joined its group');
    };
    await this.#producer.connect();
    unlessStopped();
    await this.#consumer.connect();
    unlessStopped();
    await this.#subscribe(unlessStopped);
    const joined = this.#joined();
    // It may settle while kafkajs's run is still joining: awaited below, not unhandled meanwhile.
    joined.catch(() => undefined);
    await this.#consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: (payload) => this.#batch(payload, handle, sliceSize),
    });
    await joined;
  }

  /** Subscribes to the topic. One not there yet is waited for: a broker that makes topics on first
   * use (auto.create.topics.enable) answers the request that makes it with "unknown topic". Past
   * TOPIC_WAIT_MS the start fails, saying so. */
  async #subscribe(unlessStopped: () => void): Promise<void> {
    const { topic } = this.#options;
    const deadline = Date.now() + TOPIC_WAIT_MS;
    for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 1_000)) {
      try {
        await this.#consumer.subscribe({ topics: [topic], fromBeginning: true });
        unlessStopped();
        return;
      } catch (error) {
        if ((error as { type?: unknown }).type !== 'UNKNOWN_TOPIC_OR_PARTITION') throw error;
        if (Date.now() + delayMs > deadline) {
          throw new Error(
            `Kafka topic ${topic} does not exist and the brokers did not make it within ${String(TOPIC_WAIT_MS / 1000)} s (auto.create.topics.enable off?): create it`,
            { cause: error },
          );
        }
      }
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      unlessStopped();
    }
  }

  /** Resolves when the consumer joined its group; rejects when it crashed for good, or was
   * stopped, before. */
  #joined(): Promise<void> {
    return new Promise((resolve, reject) => {
      const settle = (error?: Error): void => {
        for (const remove of removers) remove();
        this.#abortStart = undefined;
        if (error === undefined) resolve();
        else reject(error);
      };
      const removers = [
        this.#consumer.on(this.#consumer.events.GROUP_JOIN, () => {
          settle();
        }),
        this.#consumer.on(this.#consumer.events.CRASH, ({ payload }) => {
          if (!payload.restart) settle(payload.error);
        }),
      ];
      this.#abortStart = () => {
        settle(new Error('the Kafka consumer was stopped before it joined its group'));
      };
    });
  }

  async #stop(): Promise<void> {
    // A start under way ends first (at its next step, or once kafkajs's join returns), so that
    // nothing it connects outlives the stop.
    this.#abortStart?.();
    await this.#started?.catch(() => undefined);
    // Waits for the batch under way: it ends after the message being handled, committing.
    try {
      await this.#consumer.disconnect();
    } finally {
      for (const timer of this.#resumeTimers) clearTimeout(timer);
      this.#resumeTimers.clear();
      await this.#producer.disconnect();
    }
  }

  async #batch(payload: EachBatchPayload, handle: HandleBatch, sliceSize: number): Promise<void> {
    const { batch } = payload;
    const { messages } = batch;
    const pause = (): (() => void) => payload.pause();
    let handled = 0;
    let beatAt = Date.now() + HEARTBEAT_EVERY_MS;
    try {
      for (let i = 0; i < messages.length; i += sliceSize) {
        if (this.#stopping || !payload.isRunning() || payload.isStale()) break;
        const slice = messages.slice(i, i + sliceSize);
        // A slice may take a while on a busy machine: the member keeps saying it is alive meanwhile,
        // so that the group does not give its partitions away under it (kafkajs sends a heartbeat
        // only when its interval passed).
        const beating = setInterval(() => {
          payload.heartbeat().catch(() => undefined);
        }, HEARTBEAT_EVERY_MS);
        let failed: { index: number; error: unknown } | undefined;
        try {
          failed = await this.#slice(batch.topic, batch.partition, slice, handle);
        } finally {
          clearInterval(beating);
        }
        if (failed !== undefined) {
          handled += failed.index;
          this.#retryLater(batch.topic, batch.partition, (slice[failed.index] as KafkaMessage).offset, failed.error, pause);
          break;
        }
        handled += slice.length;
        // The partition's failures in a row end only when a whole slice went through (a message
        // after a failing one in its slice does not reset the growing pause).
        this.#failures.delete(batch.partition);
        // kafkajs sends a heartbeat only when its interval passed; asking less often saves time.
        if (Date.now() >= beatAt) {
          beatAt = Date.now() + HEARTBEAT_EVERY_MS;
          await payload.heartbeat();
        }
      }
    } finally {
      const last = messages[handled - 1];
      if (last !== undefined) {
        // The next read starts after it; the commit too (after the batch's last message: past
        // whatever kafkajs filtered out behind it).
        payload.resolveOffset(last.offset);
        const through = handled === messages.length ? batch.lastOffset() : last.offset;
        const offset = (BigInt(through) + 1n).toString();
        await payload.commitOffsetsIfNecessary({ topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset }] }] });
      }
    }
  }

  /** Hands a slice to the handler and writes its dead letters: undefined when every message of it
   * is done, else the first one that is not (read again from there) and why. */
  async #slice(
    topic: string,
    partition: number,
    slice: readonly KafkaMessage[],
    handle: HandleBatch,
  ): Promise<{ index: number; error: unknown } | undefined> {
    let outcomes: BatchOutcome[];
    try {
      outcomes = await handle(slice.map((message) => incoming(topic, partition, message)));
    } catch (error) {
      return { index: 0, error };
    }
    let upTo = outcomes.findIndex((o) => o.kind === 'retry');
    const retry = upTo === -1 ? undefined : (outcomes[upTo] as { error: unknown });
    if (upTo === -1 && outcomes.length !== slice.length) {
      return {
        index: Math.min(outcomes.length, slice.length - 1),
        error: new Error(`the handler answered ${String(outcomes.length)} outcomes for ${String(slice.length)} messages`),
      };
    }
    if (upTo === -1) upTo = slice.length;
    const dead = slice.flatMap((message, i) => {
      const outcome = outcomes[i];
      return i < upTo && outcome?.kind === 'dead' ? [{ message, reason: outcome.reason, index: i }] : [];
    });
    if (dead.length > 0) {
      try {
        await this.#deadLetters(topic, partition, dead);
      } catch (error) {
        return { index: (dead[0] as { index: number }).index, error };
      }
    }
    return retry === undefined ? undefined : { index: upTo, error: retry.error };
  }

  async #deadLetters(topic: string, partition: number, dead: readonly { message: KafkaMessage; reason: string }[]): Promise<void> {
    await this.#producer.send({
      topic: this.#options.deadLetterTopic,
      acks: -1,
      messages: dead.map(({ message, reason }) => ({
        key: message.key,
        value: message.value,
        headers: {
          ...message.headers,
          'x-dead-letter-reason': reason,
          'x-original-topic': topic,
          'x-original-partition': String(partition),
          'x-original-offset': message.offset,
        },
      })),
    });
  }

  #retryLater(topic: string, partition: number, offset: string, error: unknown, pause: () => () => void): void {
    const failures = (this.#failures.get(partition) ?? 0) + 1;
    this.#failures.set(partition, failures);
    const delayMs = Math.min(BACKOFF_FIRST_MS * 2 ** (failures - 1), BACKOFF_MAX_MS);
    this.#options.logger?.error(
      { err: error, topic, partition, offset, failures, retryInMs: delayMs },
      'Kafka message not handled; reading it again after a pause',
    );
    // Read again from this message, not after it, once the partition resumes.
    this.#consumer.seek({ topic, partition, offset });
    const resume = pause();
    const timer = setTimeout(() => {
      this.#resumeTimers.delete(timer);
      resume();
    }, delayMs);
    this.#resumeTimers.add(timer);
  }
}

function incoming(topic: string, partition: number, message: KafkaMessage): IncomingMessage {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    const text = headerText(value);
    if (text !== undefined) headers[name] = text;
  }
  return {
    topic,
    partition,
    offset: message.offset,
    key: message.key === null ? null : message.key.toString('utf8'),
    headers,
    value: message.value,
  };
}
