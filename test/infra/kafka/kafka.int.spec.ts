// The Kafka adapters' contract (test/support/kafkaContract.ts) against this run's Kafka:
// KAFKA_BROKERS when set, else librdkafka's mock cluster started through kcat
// (test/support/kafka.globalSetup.ts), else skipped with the reason.

import { describeKafka, requireKafkaBrokers } from '../../support/kafka.ts';
import { kafkaContract } from '../../support/kafkaContract.ts';

describeKafka('Kafka adapters (infra/kafka)', () => {
  kafkaContract('contract', requireKafkaBrokers);
});
