// Topics over Kafka (KAFKA_BROKERS): the Messaging port as the composition root hands it to the
// modules: consumers made on demand (one per module worker) and one shared publisher.

import type { Messaging } from '../../domain/ports.ts';
import type { KafkaLogger } from './client.ts';
import { KafkaMessageConsumer } from './consumer.ts';
import { KafkaMessagePublisher } from './publisher.ts';

export type KafkaMessagingOptions = {
  brokers: readonly string[];
  clientId: string;
  logger?: KafkaLogger;
  /** Passed to every consumer (tests lower the group's session timeout). */
  sessionTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  /** Messages of a batch a consumer handles at once (default 16: triggers are independent, and
   * their appends then share the log's group commits). */
  concurrency?: number;
};

/** KAFKA_BROKERS as a list of host:port. */
export const brokerList = (value: string): string[] =>
  value
    .split(',')
    .map((b) => b.trim())
    .filter((b) => b !== '');

export function kafkaMessaging(options: KafkaMessagingOptions): Messaging {
  const { brokers, clientId, logger, sessionTimeoutMs, heartbeatIntervalMs } = options;
  const common = { brokers, clientId, ...(logger === undefined ? {} : { logger }) };
  const publisher = new KafkaMessagePublisher(common);
  return {
    consumer: (c) =>
      new KafkaMessageConsumer({
        ...common,
        ...c,
        ...(sessionTimeoutMs === undefined ? {} : { sessionTimeoutMs }),
        ...(heartbeatIntervalMs === undefined ? {} : { heartbeatIntervalMs }),
        concurrency: options.concurrency ?? 16,
      }),
    publisher,
    close: () => publisher.close(),
  };
}
