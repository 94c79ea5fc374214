// The Kafka adapters' contract (test/support/kafkaContract.ts) against this run's Kafka:
// KAFKA_BROKERS when set, else the real Apache Kafka broker, else librdkafka's mock cluster started
// through kcat (test/support/kafka.globalSetup.ts), else skipped with the reason.

import { inject } from 'vitest';
import { describeKafka, requireKafkaBrokers } from '../../support/kafka.ts';
import { kafkaContract } from '../../support/kafkaContract.ts';

describeKafka('Kafka adapters (infra/kafka)', () => {
  kafkaContract('contract', requireKafkaBrokers, { mockCluster: inject('kafkaNotABroker') !== undefined });
});
