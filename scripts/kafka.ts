// A real Apache Kafka broker for the tests, the benches and development: the broker's own jars from
// Maven Central (org.apache.kafka:kafka_2.13 with a log4j2 backend), fetched once by Maven into
// .tools/kafka-<version>/libs (git-ignored, kept across `npm ci`), run as one KRaft node (broker and
// controller in one JVM, its storage formatted first) on two free loopback ports, with its data,
// configuration and log in a fresh temporary folder removed when it stops.
//
//   npm run kafka                      fetch if needed, start, print the bootstrap address; Ctrl-C stops
//   npm run kafka -- --port 9092       the same on a fixed port (KAFKA_BROKERS=127.0.0.1:9092)
//   npm run kafka -- --install         only fetch the jars (.ci/run does this before `npm test`)
//
// The test run's global setup (test/support/kafka.globalSetup.ts) and bench/notifications.ts start
// one through `startKafkaBroker`. Java 17 or later is needed (JAVA_HOME, else `java` on PATH), and
// Maven (`mvn`) the first time; without them the callers fall back to librdkafka's mock cluster.

import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
// kafkajs's request queues, armed only when they have something to check (see the file).
import '../infra/kafka/requestQueue.ts';

export const KAFKA_VERSION = '4.4.0';
const LOG4J_VERSION = '2.26.1';
// kafka_2.13 brings slf4j-api 1.7, which does not find log4j-slf4j2-impl: its 2.x is named here.
const SLF4J_VERSION = '2.0.17';
const MIN_JAVA = 17;
const START_TIMEOUT_MS = 60_000;

const root = join(import.meta.dirname, '..');
/** Where the jars are cached (git-ignored). */
export const kafkaHome = join(root, '.tools', `kafka-${KAFKA_VERSION}`);
const libs = join(kafkaHome, 'libs');

export type RunningBroker = {
  /** Bootstrap address, one broker: `127.0.0.1:<port>`. */
  brokers: string[];
  /** Which peer this is, for the test output and the bench's. */
  source: string;
  /** The folder holding its configuration, data and log (removed by `stop`). */
  dir: string;
  logFile: string;
  /** Milliseconds from launching the format step to the broker answering. */
  startMs: number;
  stop: () => Promise<void>;
};

type Missing = { missing: string };

/** The java to run (JAVA_HOME's, else PATH's) when it is 17 or later; else why not. */
export function findJava(): { java: string; version: number } | Missing {
  const java = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
  const probe = spawnSync(java, ['-XshowSettings:properties', '-version'], { encoding: 'utf8' });
  if (probe.error !== undefined)
    return {
      missing: `no Java (${process.env.JAVA_HOME ? `JAVA_HOME=${process.env.JAVA_HOME}: ` : ''}${java} not found) to run a Kafka broker`,
    };
  const version = Number(/java\.specification\.version = (\d+)/.exec(probe.stderr)?.[1] ?? NaN);
  if (!(version >= MIN_JAVA))
    return {
      missing: `${java} is Java ${Number.isNaN(version) ? '(unknown version)' : String(version)}; a Kafka ${KAFKA_VERSION} broker needs ${String(MIN_JAVA)} or later`,
    };
  return { java, version };
}

/** The broker's jars, fetched by Maven into .tools/ unless there already; else why they are not. */
export function installKafka(log: (line: string) => void = () => undefined): { libs: string } | Missing {
  if (existsSync(join(libs, `kafka_2.13-${KAFKA_VERSION}.jar`))) return { libs };
  if (spawnSync('mvn', ['--version'], { stdio: 'ignore' }).error !== undefined)
    return { missing: `the Kafka ${KAFKA_VERSION} jars are not in ${libs} and Maven (mvn) is not on PATH to fetch them` };
  mkdirSync(kafkaHome, { recursive: true });
  const pom = join(kafkaHome, 'pom.xml');
  writeFileSync(pom, brokerPom());
  const partial = `${libs}.partial`;
  rmSync(partial, { recursive: true, force: true });
  log(`[kafka] fetching Apache Kafka ${KAFKA_VERSION} (kafka_2.13) and log4j2 ${LOG4J_VERSION} from Maven Central into ${libs}`);
  const started = Date.now();
  const mvn = spawnSync(
    'mvn',
    ['-q', '-B', '-f', pom, 'dependency:copy-dependencies', `-DoutputDirectory=${partial}`, '-DincludeScope=runtime'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  if (mvn.status !== 0)
    return {
      missing: `Maven could not fetch the Kafka ${KAFKA_VERSION} jars (exit ${String(mvn.status)}): ${`${mvn.stdout}${mvn.stderr}`.trim().slice(-600)}`,
    };
  // Renamed when complete, so that an interrupted fetch is never taken for an installed broker.
  renameSync(partial, libs);
  log(`[kafka] fetched in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  return { libs };
}

function brokerPom(): string {
  const dependency = (group: string, artifact: string, version: string): string =>
    `    <dependency><groupId>${group}</groupId><artifactId>${artifact}</artifactId><version>${version}</version></dependency>`;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<!-- Generated by scripts/kafka.ts: the Kafka broker and its runtime dependencies, for copy-dependencies. -->',
    '<project xmlns="http://maven.apache.org/POM/4.0.0">',
    '  <modelVersion>4.0.0</modelVersion>',
    '  <groupId>local.telecom-admin</groupId><artifactId>kafka-broker</artifactId><version>1</version><packaging>pom</packaging>',
    '  <dependencies>',
    dependency('org.apache.kafka', 'kafka_2.13', KAFKA_VERSION),
    dependency('org.apache.logging.log4j', 'log4j-core', LOG4J_VERSION),
    dependency('org.apache.logging.log4j', 'log4j-slf4j2-impl', LOG4J_VERSION),
    dependency('org.slf4j', 'slf4j-api', SLF4J_VERSION),
    '  </dependencies>',
    '</project>',
    '',
  ].join('\n');
}

/** Fetches the jars if needed, formats a fresh KRaft storage and starts the broker; resolves once
 * it answers a client, rejects with the reason (Java or Maven missing, or the broker's own words). */
/** A KRaft cluster id: 16 random bytes in base64url, never starting with `-`, which the format
 * tool's argument parser would take for an option ("--cluster-id: expected one argument"; Kafka's
 * own Uuid.randomUuid draws again for it): the first character comes from the first byte's top six
 * bits, so that byte's top bit is cleared (0-31: `A`-`f`). */
export function kafkaClusterId(bytes: Buffer = randomBytes(16)): string {
  const id = Buffer.from(bytes);
  id[0] = (id[0] ?? 0) & 0x7f;
  return id.toString('base64url');
}

export async function startKafkaBroker(options: { port?: number; log?: (line: string) => void } = {}): Promise<RunningBroker> {
  const log = options.log ?? (() => undefined);
  const java = findJava();
  if ('missing' in java) throw new Error(java.missing);
  const installed = installKafka(log);
  if ('missing' in installed) throw new Error(installed.missing);
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'kafka-broker-'));
  try {
    const [port, controllerPort] = await freePorts(options.port === undefined ? 2 : 1);
    const brokerPort = options.port ?? port ?? 0;
    const files = writeBrokerFiles(dir, brokerPort, controllerPort ?? port ?? 0);
    const classpath = join(installed.libs, '*');
    const jvm = [
      '-Xmx512m',
      '-Xms128m',
      '-XX:+UseG1GC',
      '-Djava.awt.headless=true',
      `-Dlog4j2.configurationFile=${files.log4j}`,
      '-cp',
      classpath,
    ];
    const clusterId = kafkaClusterId();
    // The format tool runs for a second: compiled by C1 alone it starts twice as fast on a busy machine.
    const format = spawnSync(
      java.java,
      [
        ...jvm,
        '-XX:TieredStopAtLevel=1',
        'kafka.tools.StorageTool',
        'format',
        '--cluster-id',
        clusterId,
        '--config',
        files.properties,
        '--ignore-formatted',
      ],
      { encoding: 'utf8' },
    );
    if (format.status !== 0)
      throw new Error(
        `formatting the KRaft storage failed (exit ${String(format.status)}): ${`${format.stdout}${format.stderr}`.trim().slice(-600)}`,
      );
    const broker = launch(java.java, [...jvm, 'kafka.Kafka', files.properties], join(dir, 'jvm.out'));
    const brokers = [`127.0.0.1:${String(brokerPort)}`];
    try {
      await untilAnswering(brokers, broker.exited, files.logFile);
    } catch (error) {
      await broker.stop();
      throw error;
    }
    let stopped: Promise<void> | undefined;
    return {
      brokers,
      source: `Apache Kafka ${KAFKA_VERSION} broker (KRaft, Java ${String(java.version)})`,
      dir,
      logFile: files.logFile,
      startMs: Date.now() - started,
      stop: () =>
        (stopped ??= broker.stop().finally(() => {
          rmSync(dir, { recursive: true, force: true });
        })),
    };
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** server.properties and the log4j2 configuration of a one-node KRaft cluster on loopback, with
 * the group and internal-topic settings a one-node test cluster needs. */
function writeBrokerFiles(dir: string, port: number, controllerPort: number): { properties: string; log4j: string; logFile: string } {
  const properties = join(dir, 'server.properties');
  const log4j = join(dir, 'log4j2.properties');
  const logFile = join(dir, 'broker.log');
  const settings: Record<string, string | number> = {
    'process.roles': 'broker,controller',
    'node.id': 1,
    'controller.quorum.voters': `1@127.0.0.1:${String(controllerPort)}`,
    listeners: `PLAINTEXT://127.0.0.1:${String(port)},CONTROLLER://127.0.0.1:${String(controllerPort)}`,
    'advertised.listeners': `PLAINTEXT://127.0.0.1:${String(port)}`,
    'controller.listener.names': 'CONTROLLER',
    'inter.broker.listener.name': 'PLAINTEXT',
    'listener.security.protocol.map': 'PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    'log.dirs': join(dir, 'data'),
    // A topic made by its first producer or consumer has 3 partitions, so a group's members share them.
    'num.partitions': 3,
    'auto.create.topics.enable': 'true',
    // One node: every internal topic has one replica; few partitions, so they are made quickly.
    'offsets.topic.replication.factor': 1,
    'offsets.topic.num.partitions': 5,
    'transaction.state.log.replication.factor': 1,
    'transaction.state.log.min.isr': 1,
    'transaction.state.log.num.partitions': 5,
    'share.coordinator.state.topic.replication.factor': 1,
    'share.coordinator.state.topic.min.isr': 1,
    // A new group starts at once instead of waiting 3 s for more members.
    'group.initial.rebalance.delay.ms': 0,
  };
  writeFileSync(
    properties,
    Object.entries(settings)
      .map(([k, v]) => `${k}=${String(v)}`)
      .join('\n') + '\n',
  );
  // The broker logs to a file only, so the test output stays the tests'.
  writeFileSync(
    log4j,
    [
      'status = warn',
      'appender.file.type = File',
      'appender.file.name = FILE',
      `appender.file.fileName = ${logFile}`,
      'appender.file.layout.type = PatternLayout',
      'appender.file.layout.pattern = [%d] %p %m (%c)%n',
      'rootLogger.level = INFO',
      'rootLogger.appenderRef.file.ref = FILE',
      '',
    ].join('\n'),
  );
  return { properties, log4j, logFile };
}

/** Ports free on loopback now (the broker binds them a moment later). */
async function freePorts(n: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve, reject) => {
          const s = createServer();
          s.once('error', reject);
          s.listen(0, '127.0.0.1', () => {
            resolve(s);
          });
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as AddressInfo).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

/** Runs the JVM under a shell that holds our end of a pipe: when this process ends, however it
 * ends (a test run killed included), the pipe closes and the shell stops the broker, so no JVM
 * outlives its user. `stop` closes the pipe itself and waits; a broker still there after 20 s
 * (a controlled shutdown takes a few) is killed. */
function launch(java: string, args: readonly string[], outFile: string): { exited: Promise<string>; stop(): Promise<void> } {
  const script = '"$@" >"$OUT" 2>&1 & pid=$!; echo "$pid"; cat >/dev/null; kill "$pid" 2>/dev/null; wait "$pid"';
  const shell = spawn('sh', ['-c', script, 'kafka-broker', java, ...args], {
    env: { ...process.env, OUT: outFile },
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  let jvmPid: number | undefined;
  shell.stdout.setEncoding('utf8');
  shell.stdout.once('data', (line: string) => {
    jvmPid = Number(line.trim());
  });
  const exited = new Promise<string>((resolve) => {
    shell.once('exit', (code, signal) => {
      resolve(signal ?? `code ${String(code)}`);
    });
  });
  return {
    exited,
    stop: async () => {
      shell.stdin.end();
      const timer = setTimeout(() => {
        try {
          if (jvmPid !== undefined) process.kill(jvmPid, 'SIGKILL');
        } catch {
          // gone meanwhile
        }
      }, 20_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Resolves when the broker answers a metadata request; rejects if it exits first or is not up
 * within a minute, with the end of its log. */
async function untilAnswering(brokers: string[], exited: Promise<string>, logFile: string): Promise<void> {
  let gone: string | undefined;
  void exited.then((how) => (gone = how));
  const deadline = Date.now() + START_TIMEOUT_MS;
  const kafka = new Kafka({ clientId: 'kafka-start', brokers, logLevel: logLevel.NOTHING, retry: { retries: 0 }, connectionTimeout: 1000 });
  const tail = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8').trim().split('\n').slice(-15).join('\n') : '(no log)');
  for (;;) {
    if (gone !== undefined) throw new Error(`the Kafka broker exited (${gone}) before it answered; its log ends:\n${tail()}`);
    if (Date.now() > deadline)
      throw new Error(
        `the Kafka broker did not answer on ${brokers.join(',')} within ${String(START_TIMEOUT_MS / 1000)} s; its log ends:\n${tail()}`,
      );
    const admin = kafka.admin();
    try {
      await admin.connect();
      const cluster = await admin.describeCluster();
      if (cluster.brokers.length > 0) return;
    } catch {
      // not up yet
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) {
  const { values } = parseArgs({ options: { install: { type: 'boolean', default: false }, port: { type: 'string' } } });
  const say = (line: string): void => {
    console.log(line);
  };
  if (values.install) {
    // Fails (exit 1, saying why) where no broker could run: no Java 17+, or the jars not fetched.
    const fail = (why: string): never => {
      console.error(`[kafka] ${why}`);
      process.exit(1);
    };
    const java = findJava();
    if ('missing' in java) fail(java.missing);
    else {
      const installed = installKafka(say);
      if ('missing' in installed) fail(installed.missing);
      else
        console.log(
          `[kafka] Apache Kafka ${KAFKA_VERSION} jars in ${installed.libs}; Java ${String(java.version)} (${java.java}) runs them`,
        );
    }
    process.exit(0);
  }
  const broker = await startKafkaBroker({ ...(values.port === undefined ? {} : { port: Number(values.port) }), log: say });
  console.log(`[kafka] ${broker.source} on ${broker.brokers.join(',')}, started in ${(broker.startMs / 1000).toFixed(1)} s`);
  console.log(`[kafka] data, configuration and log (broker.log) in ${broker.dir}; removed when it stops`);
  console.log(`[kafka] KAFKA_BROKERS=${broker.brokers.join(',')}   (Ctrl-C stops it)`);
  const stop = (): void => {
    void broker.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  // Nothing else keeps this process waiting for Ctrl-C.
  setInterval(() => undefined, 1 << 30);
}
