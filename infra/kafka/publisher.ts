// Publishes to Kafka topics through one plain kafkajs producer (no idempotence, no transactions:
// repeats are told apart by the `message-id` header each message carries, from its deterministic
// id). It connects on the first publish; `publish` resolves once every in-sync replica
// acknowledged the messages (acks -1) and rejects otherwise, leaving the retry to the caller.

import { Partitioners, type Producer } from 'kafkajs';
import type { MessagePublisher, PublishedMessage } from '../../domain/ports.ts';
import { createKafka, type KafkaLogger } from './client.ts';

export type KafkaPublisherOptions = { brokers: readonly string[]; clientId: string; logger?: KafkaLogger };

export class KafkaMessagePublisher implements MessagePublisher {
  readonly #producer: Producer;
  #connected: Promise<void> | undefined;
  #closed = false;

  constructor(options: KafkaPublisherOptions) {
    // The partitioner of Kafka's Java client (murmur2 of the key): a key's messages share a partition.
    this.#producer = createKafka(options).producer({ allowAutoTopicCreation: true, createPartitioner: Partitioners.DefaultPartitioner });
  }

  async publish(topic: string, messages: readonly PublishedMessage[]): Promise<void> {
    if (this.#closed) throw new Error('this Kafka publisher was closed');
    if (messages.length === 0) return;
    await this.#connect();
    await this.#producer.send({
      topic,
      acks: -1,
      messages: messages.map((m) => ({ key: m.key, value: m.value, headers: { ...m.headers, 'message-id': m.id } })),
    });
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
