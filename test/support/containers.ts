// Where the production adapters' contract suites run: against EVENTSTORE_URL / MONGODB_URL when
// set, else in a container started through testcontainers when an engine exists, else skipped with
// the reason printed once. The images are the ones docker-compose.yml pins.

import { inject } from 'vitest';

export const IMAGES = {
  kurrentdb: 'docker.kurrent.io/kurrent-latest/kurrentdb:25.0.1',
  mongodb: 'mongo:8.0.4',
  // docker-compose.yml runs apache/kafka; @testcontainers/kafka drives Confluent's image (KRaft).
  kafka: 'confluentinc/cp-kafka:7.8.0',
} as const;

export type Target = { url: string; stop: () => Promise<void> };

export type TargetPlan = { kind: 'url'; url: string } | { kind: 'container' } | { kind: 'skip'; reason: string };

/** Decides, without starting anything, where a suite for `envVar`'s adapter runs. */
export function planTarget(envVar: 'EVENTSTORE_URL' | 'MONGODB_URL'): TargetPlan {
  const url = process.env[envVar];
  if (url !== undefined && url !== '') return { kind: 'url', url };
  const missing = inject('containerRuntimeMissing');
  if (missing !== undefined) {
    const reason = `${envVar} is not set and ${missing}`;
    process.stderr.write(`[containers] skipping the ${envVar === 'EVENTSTORE_URL' ? 'KurrentDB' : 'MongoDB'} contract suites: ${reason}\n`);
    return { kind: 'skip', reason };
  }
  return { kind: 'container' };
}
