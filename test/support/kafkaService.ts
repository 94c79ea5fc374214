// The real service (a child process on the embedded stores, as `npm start` runs it) reading this
// run's Kafka, for the suites that signal or kill it while it takes trigger messages
// (test/api/notifications/kafkaCrash.int.spec.ts, kafkaRebalance.int.spec.ts).

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EVENT_LOG_FILE } from '../../infra/embedded.ts';
import { openSqliteEventStore } from '../../infra/sqlite/eventStore.ts';
import { notificationTrigger } from '../../modules/notifications/domain/trigger.ts';
import { committedOffsets, idempotentProducers, readTopic, uniqueName, type TestMessage } from './kafka.ts';
import { startServiceProcess, type ServiceProcess } from './serviceProcess.ts';

const configTypeId = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';

export type KafkaServiceSetup = {
  env: Record<string, string>;
  dataDir: string;
  topics: { trigger: string; dead: string; events: string };
  groupId: string;
};

/** A data folder, fresh topics and group, and the service's environment for them (a 6 s session,
 * so that a killed service's partitions go to its successor soon). */
export function kafkaServiceSetup(brokers: readonly string[], prefix: string): KafkaServiceSetup {
  const topics = { trigger: uniqueName('triggers'), dead: uniqueName('dead'), events: uniqueName('events') };
  const groupId = uniqueName('group');
  const dataDir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  const env = {
    PORT: '0',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'error',
    KAFKA_BROKERS: brokers.join(','),
    KAFKA_TRIGGER_TOPIC: topics.trigger,
    KAFKA_DEAD_LETTER_TOPIC: topics.dead,
    KAFKA_EVENTS_TOPIC: topics.events,
    KAFKA_GROUP_ID: groupId,
    KAFKA_SESSION_TIMEOUT_MS: '6000',
    KAFKA_HEARTBEAT_INTERVAL_MS: '1000',
    KAFKA_IDEMPOTENT_PRODUCER: String(idempotentProducers()),
  };
  return { env, dataDir, topics, groupId };
}

export const startService = (setup: KafkaServiceSetup): Promise<ServiceProcess> => startServiceProcess({ ...process.env, ...setup.env });

export async function api(s: ServiceProcess, method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(s.url + path, {
    method,
    headers: { authorization: `Bearer ${s.token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, body: await res.json() };
}

export const countOf = async (s: ServiceProcess, resource: string, filter: unknown[] = []): Promise<number> =>
  (await api(s, 'POST', `/api/v1/${resource}/count`, { filter })).body as number;

/** Rule `K` (eventType KAFKA) and its in-app template `K_APP`. */
export async function makeKafkaRule(s: ServiceProcess): Promise<void> {
  const rule = await api(s, 'POST', '/api/v1/notification-rules', { code: 'K', name: 'K', eventType: 'KAFKA' });
  if (rule.status !== 201) throw new Error(`rule: ${String(rule.status)}`);
  const template = await api(s, 'POST', '/api/v1/notification-templates', {
    code: 'K_APP',
    name: 'k',
    configTypeId,
    status: 'ACTIVE',
    notificationRuleCode: 'K',
    deliveryType: 'APPLICATION',
    subject: 'Ticket {{t}}',
  });
  if (template.status !== 201) throw new Error(`template: ${String(template.status)}`);
}

/** A valid trigger message of rule K for ticket `T-<i>` (distinct per i). */
export const triggerMessage = (i: number): TestMessage => ({
  key: `T-${String(i)}`,
  value: JSON.stringify({ ruleCode: 'K', ownerType: 'TICKET', ownerId: `T-${String(i)}`, data: { t: i } }),
});

/** Sends the signal and waits for the process to end. */
export async function signal(s: ServiceProcess, name: 'SIGKILL' | 'SIGTERM'): Promise<void> {
  if (s.child.exitCode !== null || s.child.signalCode !== null) return;
  const exited = new Promise((resolve) => s.child.once('exit', resolve));
  s.child.kill(name);
  await exited;
}

/** Waits until `done` holds (polling every 200 ms), or throws after `ms` with the last figure. */
export async function until(ms: number, what: string, probe: () => Promise<number>, done: (n: number) => boolean): Promise<number> {
  const deadline = Date.now() + ms;
  let last = -1;
  while (Date.now() < deadline) {
    last = await probe().catch(() => last);
    if (done(last)) return last;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${what}: ${String(last)} after ${String(ms)} ms`);
}

/** With the service stopped: the trigger topic's messages below the group's committed offsets
 * whose trigger (by its owner, one per distinct message) is not in the log. Empty when no offset
 * was committed ahead of the log. Also answers how many messages the commits covered. */
export async function committedAheadOfLog(
  brokers: readonly string[],
  setup: KafkaServiceSetup,
): Promise<{ covered: number; missing: string[] }> {
  const commits = await committedOffsets(brokers, setup.groupId, setup.topics.trigger);
  const log = openSqliteEventStore(join(setup.dataDir, EVENT_LOG_FILE));
  const owners = new Set<string>();
  try {
    for (let after = 0n; ;) {
      const events = await log.readAll({ after, limit: 10_000, types: [notificationTrigger.createdEvent] });
      const last = events.at(-1);
      if (last === undefined) break;
      for (const e of events) owners.add(String((e.data as { ownerId?: unknown }).ownerId));
      after = last.position;
    }
  } finally {
    await log.close();
  }
  const messages = await readTopic(brokers, setup.topics.trigger, { timeoutMs: 60_000 });
  const below = messages.filter((m) => BigInt(m.offset) < (commits.get(m.partition) ?? -1n));
  const ownerOf = (value: Buffer | null): string => (JSON.parse(value?.toString('utf8') ?? '{}') as { ownerId?: string }).ownerId ?? '';
  return {
    covered: below.length,
    missing: below.filter((m) => !owners.has(ownerOf(m.value))).map((m) => `${String(m.partition)}:${m.offset}`),
  };
}
