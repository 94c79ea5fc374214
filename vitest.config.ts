import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Looks for a container engine once; *.containers.spec.ts skip with its reason when none.
    // Finds a Kafka once (KAFKA_BROKERS, else librdkafka's mock cluster through kcat); the Kafka
    // suites skip with its reason when none.
    // Starts one FerretDB (built by scripts/ferretdb.ts) for the MongoDB peer suites; they skip
    // with its reason where Go is missing.
    // Starts one OpenLDAP (Debian's slapd, scripts/openldap.ts) for the directory suites; they skip
    // with its reason where slapd is not installed.
    globalSetup: [
      'test/support/containerRuntime.globalSetup.ts',
      'test/support/kafka.globalSetup.ts',
      'test/support/ferretdb.globalSetup.ts',
      'test/support/openldap.globalSetup.ts',
    ],
  },
});
