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
  /** `startBatches`: the most messages handed over at once (default 5000). */
  batchSize?: number;
  /** The publisher's producer is idempotent (default true; see KafkaPublisherOptions). */
  idempotentProducer?: boolean;
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
  const publisher = new KafkaMessagePublisher({ ...common, idempotent: options.idempotentProducer ?? true });
  return {
    consumer: (c) =>
      new KafkaMessageConsumer({
        ...common,
        ...c,
        ...(sessionTimeoutMs === undefined ? {} : { sessionTimeoutMs }),
        ...(heartbeatIntervalMs === undefined ? {} : { heartbeatIntervalMs }),
        ...(options.batchSize === undefined ? {} : { batchSize: options.batchSize }),
      }),
    publisher,
    close: () => publisher.close(),
  };
}
