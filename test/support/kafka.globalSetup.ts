// Vitest global setup: finds the Kafka the Kafka suites run against, once per run, and prints which:
// - KAFKA_BROKERS when set (comma-separated): a Kafka of the developer's;
// - else a real Apache Kafka broker (scripts/kafka.ts: the broker's jars from Maven Central, one
//   KRaft node on loopback), started here and stopped in teardown, where Java 17+ is found;
// - else librdkafka's mock cluster, started through `kcat` when it is on PATH (see
//   /work/shared/KAFKA-TESTING.md: three brokers on loopback, speaking the Kafka protocol, living in
//   the kcat process, without durability, idempotent producers or transactions), killed in teardown;
// - else none, with the reason the suites print.

import { spawn, type ChildProcess } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { startKafkaBroker } from '../../scripts/kafka.ts';

declare module 'vitest' {
  // Declaration merging needs an interface.
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions
  export interface ProvidedContext {
    /** The bootstrap brokers of the Kafka the suites use; undefined when there is none. */
    kafkaBrokers: string[] | undefined;
    /** Which Kafka that is ("KAFKA_BROKERS", "Apache Kafka 4.4.0 broker (KRaft …)", "librdkafka mock cluster (kcat)"), or why none. */
    kafkaSource: string;
    /** Undefined when there is a Kafka; otherwise why the Kafka suites skip. */
    kafkaSkipReason: string | undefined;
    /** Undefined when the Kafka is a real broker (ours or KAFKA_BROKERS); otherwise why not, for
     * the suites that need one (durability, idempotent producers, a group's rebalances). */
    kafkaNotABroker: string | undefined;
  }
}

const START_TIMEOUT_MS = 10_000;
// kcat prints: "Mock cluster enabled: original bootstrap.servers and security.protocol ignored and
// replaced with 127.0.0.1:39397,127.0.0.1:40945,127.0.0.1:44823".
const BOOTSTRAP_LINE = /Mock cluster enabled:.*replaced with (\S+)/;

export type FoundKafka = { brokers: string[]; source: string; stop?: () => Promise<void>; notABroker?: string } | { skip: string };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const found = await findKafka((line) => process.stderr.write(`${line}\n`));
  if ('skip' in found) {
    process.stderr.write(`[kafka] no Kafka for this run: ${found.skip}\n`);
    project.provide('kafkaBrokers', undefined);
    project.provide('kafkaSource', 'none');
    project.provide('kafkaSkipReason', found.skip);
    project.provide('kafkaNotABroker', found.skip);
    return () => Promise.resolve();
  }
  process.stderr.write(`[kafka] the Kafka suites run against: ${found.source} on ${found.brokers.join(',')}\n`);
  project.provide('kafkaBrokers', found.brokers);
  project.provide('kafkaSource', found.source);
  project.provide('kafkaSkipReason', undefined);
  project.provide('kafkaNotABroker', found.notABroker);
  return found.stop ?? (() => Promise.resolve());
}

/** KAFKA_BROKERS, else a real broker started here, else a mock cluster started through kcat (each
 * stopped by `stop`), else why none (also used by bench/notifications.ts). `log` hears what is
 * being fetched or started, and why a real broker could not be. */
export async function findKafka(log: (line: string) => void = () => undefined): Promise<FoundKafka> {
  const configured = (process.env.KAFKA_BROKERS ?? '')
    .split(',')
    .map((b) => b.trim())
    .filter((b) => b !== '');
  if (configured.length > 0) return { brokers: configured, source: 'KAFKA_BROKERS' };
  let noBroker: string;
  try {
    const broker = await startKafkaBroker({ log });
    return {
      brokers: broker.brokers,
      source: `${broker.source}, started in ${(broker.startMs / 1000).toFixed(1)} s, files in ${broker.dir}`,
      stop: broker.stop,
    };
  } catch (error) {
    noBroker = error instanceof Error ? error.message : String(error);
    log(`[kafka] no real Kafka broker: ${noBroker}`);
  }
  try {
    const mock = await startMockCluster();
    return { ...mock, notABroker: `this run has librdkafka's mock cluster, not a Kafka broker (${noBroker})` };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return { skip: `KAFKA_BROKERS is not set, no Kafka broker could be started (${noBroker}) and ${reason}` };
  }
}

function startMockCluster(): Promise<{ brokers: string[]; source: string; stop: () => Promise<void> }> {
  return new Promise((resolve, reject) => {
    // stdin stays an open pipe we never end: kcat -P exits at EOF on stdin, taking the cluster along.
    const child = spawn('kcat', ['-P', '-b', '127.0.0.1:1', '-t', 'boot', '-X', 'test.mock.num.brokers=3'], {
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    const fail = (reason: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(reason));
    };
    const timer = setTimeout(() => {
      fail(
        `kcat printed no mock cluster address within ${String(START_TIMEOUT_MS / 1000)} s (its output: ${stderr.trim().slice(0, 300) || 'none'})`,
      );
    }, START_TIMEOUT_MS);
    child.on('error', (error: NodeJS.ErrnoException) => {
      fail(
        error.code === 'ENOENT'
          ? "kcat is not on PATH (apt-get install kcat) to start librdkafka's mock cluster"
          : `kcat could not start: ${error.message}`,
      );
    });
    child.on('exit', (code, signal) => {
      fail(`kcat exited (${signal ?? `code ${String(code)}`}) before the mock cluster was up: ${stderr.trim().slice(0, 300)}`);
    });
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
      const match = BOOTSTRAP_LINE.exec(stderr);
      if (match?.[1] === undefined) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      child.removeAllListeners('error');
      child.on('error', () => undefined);
      // Keep reading stderr so kcat never blocks on a full pipe.
      child.stderr.removeAllListeners('data');
      child.stderr.resume();
      resolve({ brokers: match[1].split(','), source: 'librdkafka mock cluster (kcat)', stop: () => stopChild(child) });
    });
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const force = setTimeout(() => child.kill('SIGKILL'), 2_000);
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
