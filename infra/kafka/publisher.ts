// Publishes to Kafka topics through one kafkajs producer, idempotent unless told otherwise: the
// broker gives it a producer id and numbers its batches per partition, so a batch sent again after
// a lost acknowledgement is written once and nothing behind it overtakes it. With it, one request
// in flight per connection (kafkajs numbers a partition's batches as the broker acknowledges them,
// so a second request under way would reuse a number: publishes are sent one after the other) and acks from every in-sync replica, which
// idempotence requires. A message's key chooses its partition (murmur2, as Kafka's Java client),
// so one key's messages keep their order. Across a restart of the service a message may still be
// sent twice (the checkpoint of what was sent moves after the acknowledgement): repeats are told
// apart by the `message-id` header each message carries, from its deterministic id. It connects
// on the first publish; `publish` resolves once every in-sync replica acknowledged the messages
// and rejects otherwise, leaving the retry to the caller.

import { Partitioners, type Producer } from 'kafkajs';
import type { MessagePublisher, PublishedMessage } from '../../domain/ports.ts';
import { createKafka, type KafkaLogger } from './client.ts';

export type KafkaPublisherOptions = {
  brokers: readonly string[];
  clientId: string;
  logger?: KafkaLogger;
  /** Default true. False only for a broker that grants no producer ids (librdkafka's mock cluster). */
  idempotent?: boolean;
};

/** The producer settings of a publisher. */
const producerSettings = (idempotent: boolean) => ({ idempotent, maxInFlightRequests: idempotent ? 1 : 5, acks: -1 }) as const;

export class KafkaMessagePublisher implements MessagePublisher {
  readonly #producer: Producer;
  readonly #settings: ReturnType<typeof producerSettings>;
  #connected: Promise<void> | undefined;
  #tail: Promise<unknown> = Promise.resolve();
  #closed = false;

  constructor(options: KafkaPublisherOptions) {
    this.#settings = producerSettings(options.idempotent ?? true);
    const { idempotent, maxInFlightRequests } = this.#settings;
    this.#producer = createKafka(options).producer({
      allowAutoTopicCreation: true,
      createPartitioner: Partitioners.DefaultPartitioner,
      idempotent,
      maxInFlightRequests,
    });
  }

  publish(topic: string, messages: readonly PublishedMessage[]): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('this Kafka publisher was closed'));
    if (messages.length === 0) return Promise.resolve();
    // One send at a time, in the order asked: see the file's comment.
    const sent = this.#tail.then(async () => {
      await this.#connect();
      await this.#producer.send({
        topic,
        acks: this.#settings.acks,
        messages: messages.map((m) => ({ key: m.key, value: m.value, headers: { ...m.headers, 'message-id': m.id } })),
      });
    });
    this.#tail = sent.catch(() => undefined);
    return sent;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#connected === undefined) return;
    await this.#connected.catch(() => undefined);
    await this.#producer.disconnect();
  }

  #connect(): Promise<void> {
    // A failed connection is not kept: the next publish tries again.
    this.#connected ??= this.#producer.connect().catch((error: unknown) => {
      this.#connected = undefined;
      throw error;
    });
    return this.#connected;
  }
}
