// The Kafka adapters' contract (test/support/kafkaContract.ts) against a real Kafka broker in a
// container started through testcontainers (Confluent's image in KRaft mode: the image
// @testcontainers/kafka drives), where a container engine exists; skipped with the reason where
// none does. kafka.int.spec.ts runs the same contract against this run's Kafka (KAFKA_BROKERS, the
// real broker of scripts/kafka.ts, or the mock cluster).

import { KafkaContainer, type StartedKafkaContainer } from '@testcontainers/kafka';
import { afterAll, beforeAll, describe, inject, it } from 'vitest';
import { IMAGES } from '../../support/containers.ts';
import { kafkaContract } from '../../support/kafkaContract.ts';

const missing = inject('containerRuntimeMissing');

if (missing !== undefined) {
  process.stderr.write(`[containers] skipping the Kafka container contract suite: ${missing}\n`);
  describe.skip(`Kafka adapters in a Kafka container (skipped: ${missing})`, () => {
    it('runs where a container engine is available', () => undefined);
  });
} else {
  let container: StartedKafkaContainer | undefined;
  let brokers: string[] = [];
  beforeAll(async () => {
    container = await new KafkaContainer(IMAGES.kafka).withKraft().start();
    brokers = [`${container.getHost()}:${String(container.getMappedPort(9093))}`];
  }, 240_000);
  afterAll(async () => {
    await container?.stop();
  });
  kafkaContract('Kafka adapters in a Kafka container (testcontainers)', () => brokers);
}
