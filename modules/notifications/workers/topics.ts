// Notifications over topics (Kafka when KAFKA_BROKERS is set).
//
// In: a consumer group reads the trigger topic. A message's value is a JSON trigger (the schema
// `NotificationTriggerMessage` of the OpenAPI document); its rule is named by a `ruleCode` header or
// field (the header wins). A valid message naming a rule of eventType KAFKA or DIRECT that is valid
// now is appended to the log as a NotificationTriggered event under an idempotency key: the
// message's `idempotency-key` header, else the SHA-256 of its key, rule and value. So a message delivered
// again after a crash or a rebalance, and the same message sent twice by a producer, name the same
// trigger and make nothing twice (where it was read, topic, partition and offset, is kept on the
// trigger as `origin`). Its offset is committed only once the trigger is in the log (the consumer
// adapter's contract). A message that is not JSON, fails the schema, or names an
// unknown, invalid or non-Kafka rule goes to the dead-letter topic with the reason in its headers.
//
// Out: every NotificationCreated and NotificationStateChanged event is published to the events
// topic, keyed by the notification's id, with the event's id as its message id, by a follower of the
// log that moves its checkpoint only after the broker acknowledged the batch: at least once, and a
// repeat carries the same message id.

import type { ResourceService } from '../../../application/resourceService.ts';
import type { Runtime } from '../../../application/runtime.ts';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { notification, type NotificationEvent } from '../domain/notification.ts';
import { notificationTrigger, triggerPayload } from '../domain/trigger.ts';
import type {
  BatchOutcome,
  IncomingMessage,
  MessageConsumer,
  MessageOutcome,
  MessagePublisher,
  PublishedMessage,
  ReadStore,
  RecordedEvent,
} from '../../../domain/ports.ts';
import type { LiveRecord } from '../../../domain/resource/defineResource.ts';
import { keyedRecordId } from '../../../domain/resource/service.ts';
import { notificationRule } from '../../registries/domain/notificationRule.ts';
import { isDomainError } from '../../../domain/shared/errors.ts';
import { text, withinPeriod } from '../../../domain/shared/fields.ts';
import { scanJsonText } from '../../../domain/shared/jsonText.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { idIn } from '../../../domain/shared/streams.ts';
import type { ProcessorHandler } from '../../../workers/processor.ts';

/** A trigger message's value. */
export const triggerMessage = triggerPayload
  .extend({ ruleCode: text().optional().meta({ description: 'The rule, unless the `ruleCode` header names it.' }) })
  .meta({ id: 'NotificationTriggerMessage' });

/** Rules a topic may trigger. */
const TOPIC_RULE_TYPES = new Set(['KAFKA', 'DIRECT']);
/** The largest message value handled (a bigger one is a dead letter). */
const MAX_MESSAGE_BYTES = 1024 * 1024;

export const KAFKA_TRIGGER_ACTOR = 'system:kafka-triggers';

export type TriggerMessageDeps = { runtime: Runtime; now: () => Date; newId: () => string };

const dead = (reason: string): MessageOutcome => ({ kind: 'dead', reason: reason.slice(0, 1000) });

/** Containers a message may nest (as a request body may), and values it may hold. */
const MAX_DEPTH = 32;
const MAX_VALUES = 50_000;
const utf8 = new TextDecoder('utf-8', { fatal: true });

function parsed(message: IncomingMessage): { payload: z.infer<typeof triggerMessage>; ruleCode: string } | MessageOutcome {
  if (message.value === null) return dead('no value');
  if (message.value.length > MAX_MESSAGE_BYTES) return dead(`value over ${String(MAX_MESSAGE_BYTES)} bytes`);
  let text: string;
  try {
    text = utf8.decode(message.value);
  } catch {
    return dead('value is not UTF-8');
  }
  // Read as a request body is: nothing nested so deep that validating it would overflow the stack,
  // no number a double cannot hold, no key twice.
  const scan = scanJsonText(text, MAX_DEPTH, 5, MAX_VALUES);
  if (scan.tooDeep) return dead(`value nests deeper than ${String(MAX_DEPTH)} levels`);
  if (scan.tooMany) return dead(`value holds more than ${String(MAX_VALUES)} values`);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return dead('value is not valid JSON');
  }
  if (scan.errors.length > 0) return dead(`value cannot be stored exactly: ${scan.errors.join('; ')}`);
  const checked = triggerMessage.safeParse(json);
  if (!checked.success)
    return dead(
      `value does not match NotificationTriggerMessage: ${checked.error.issues
        .slice(0, 5)
        .map((i) => `${i.path.join('.') || '(value)'}: ${i.message}`)
        .join('; ')}`,
    );
  const header = message.headers.ruleCode;
  if (header !== undefined && (header === '' || header.length > 255)) return dead('ruleCode header is empty or longer than 255 characters');
  const ruleCode = header ?? checked.data.ruleCode;
  if (ruleCode === undefined || ruleCode === '') return dead('no rule: neither a ruleCode header nor a ruleCode field');
  return { payload: checked.data, ruleCode };
}

/** What identifies a trigger message: its `idempotency-key` header, else its key, the rule it
 * names and its value. */
function idempotencyKeyOf(message: IncomingMessage, ruleCode: string): string {
  const given = message.headers['idempotency-key'];
  if (given !== undefined && given !== '') return `kafka:${message.topic}:key:${given.slice(0, 255)}`;
  const hash = createHash('sha256');
  hash.update(JSON.stringify([message.key, ruleCode]));
  hash.update('\u0000');
  if (message.value !== null) hash.update(message.value);
  return `kafka:${message.topic}:sha256:${hash.digest('hex')}`;
}

/** Messages of a slice decided and appended together (see triggerBatchHandler). */
const STEP = 500;

/** What becomes of the trigger messages of one batch (see the file's comment), one outcome each, in
 * order: `retry` for one a store failed on (nothing durable was done for it: it comes again). Each
 * rule is read once per batch, and the batch's triggers are created together (createMany): decided
 * without reading their streams, which are new but for repeats, and appended at once, which the
 * embedded log commits as one transaction (one fsync). Nothing more is needed for exactly once: a
 * trigger's id and event id derive from its message, so a batch taken again after a crash (its
 * offsets not yet committed) appends nothing twice, on the embedded log as on KurrentDB (where the
 * appends are one per trigger, issued together). */
export function triggerBatchHandler(deps: TriggerMessageDeps): (messages: readonly IncomingMessage[]) => Promise<BatchOutcome[]> {
  const rules = deps.runtime.service(notificationRule);
  const triggers = deps.runtime.service(notificationTrigger);
  return async (messages) => {
    const now = deps.now();
    const read = new Map<string, Promise<LiveRecord | undefined>>();
    const ruleOf = (code: string): Promise<LiveRecord | undefined> => {
      let rule = read.get(code);
      if (rule === undefined) {
        rule = rules.live(code, true);
        read.set(code, rule);
      }
      return rule;
    };
    // A step at a time: its triggers decided, then appended (createMany hands them to the log before
    // it answers, and the embedded log's writer thread commits them while the next step is
    // decided). Nothing between two steps waits for more than the microtasks of the reads, so the
    // slice holds the event loop as one piece would, and its appends overlap its decisions.
    const steps: Promise<BatchOutcome[]>[] = [];
    for (let i = 0; i < messages.length; i += STEP) {
      const some = messages.slice(i, i + STEP);
      const taken = await Promise.all(
        some.map((message) => takeTrigger(message, ruleOf, now).catch((error: unknown): BatchOutcome => ({ kind: 'retry', error }))),
      );
      const creates = taken.flatMap((t) => ('input' in t ? [t] : []));
      const made = triggers.createMany(
        creates.map(({ input, key }) => ({
          input,
          ctx: { actor: KAFKA_TRIGGER_ACTOR, now, newId: deps.newId, requestId: deps.newId(), correlationId: key, idempotencyKey: key },
        })),
      );
      const answered = made.then(async (settled) => {
        const outcomes = new Map(
          await Promise.all(creates.map(async (c, n) => [c, await createdOutcome(settled[n], c.key, triggers)] as const)),
        );
        return taken.map((t) => ('input' in t ? (outcomes.get(t) as BatchOutcome) : t));
      });
      // Settled as outcomes at once: a failed step must not be an unhandled rejection while the next is decided.
      steps.push(answered.catch((error: unknown) => some.map((): BatchOutcome => ({ kind: 'retry', error }))));
    }
    return (await Promise.all(steps)).flat();
  };
}

/** One message at a time (the batch handler over a batch of one): throws where it answers `retry`. */
export function triggerMessageHandler(deps: TriggerMessageDeps): (message: IncomingMessage) => Promise<MessageOutcome> {
  const batch = triggerBatchHandler(deps);
  return async (message) => {
    const [outcome] = await batch([message]);
    if (outcome === undefined) throw new Error('no outcome for the message');
    if (outcome.kind === 'retry') throw outcome.error;
    return outcome;
  };
}

/** A message's trigger to create under its key, or why it is a dead letter. Throws when a store fails. */
async function takeTrigger(
  message: IncomingMessage,
  ruleOf: (code: string) => Promise<LiveRecord | undefined>,
  now: Date,
): Promise<MessageOutcome | { input: Record<string, unknown>; key: string }> {
  const read = parsed(message);
  if ('kind' in read) return read;
  const { payload, ruleCode } = read;
  const rule = await ruleOf(ruleCode);
  if (rule === undefined) return dead(`no notification rule ${ruleCode}`);
  if (!withinPeriod(rule.fields.validityFrom, rule.fields.validityTo, now)) return dead(`notification rule ${ruleCode} is not valid now`);
  if (!TOPIC_RULE_TYPES.has(String(rule.fields.eventType)))
    return dead(
      `notification rule ${ruleCode} has eventType ${typeof rule.fields.eventType === 'string' ? rule.fields.eventType : '(none)'}, not KAFKA or DIRECT`,
    );
  const { ruleCode: _code, ...fields } = payload;
  const origin = {
    topic: message.topic,
    partition: message.partition,
    offset: message.offset,
    ...(message.key === null ? {} : { key: message.key.slice(0, 255) }),
  };
  return { input: { ...fields, ruleCode, source: 'KAFKA', origin, status: 'RECEIVED' }, key: idempotencyKeyOf(message, ruleCode) };
}

/** What a trigger's create means for its message: a message seen before (redelivered, or sent
 * again) names a trigger already in the log, which the create under its key answers as the first
 * one did, writing nothing. Throws (`retry`) when a store failed. */
async function createdOutcome(
  made: PromiseSettledResult<unknown> | undefined,
  key: string,
  triggers: ResourceService,
): Promise<BatchOutcome> {
  if (made === undefined) return { kind: 'retry', error: new Error('no outcome for the trigger') };
  if (made.status === 'fulfilled') return { kind: 'handled' };
  const error: unknown = made.reason;
  if (!isDomainError(error) || error.httpStatus >= 500) return { kind: 'retry', error };
  try {
    // A copy of it handled at the same moment (another partition): the trigger is there.
    if (error.status === 'CONFLICT' && (await triggers.live(keyedRecordId(notificationTrigger, KAFKA_TRIGGER_ACTOR, key))) !== undefined)
      return { kind: 'handled' };
  } catch (failed) {
    return { kind: 'retry', error: failed };
  }
  // Refused by the domain (a record over the size limit): it never will be taken.
  return dead(`${error.message}${error.errors.length === 0 ? '' : `: ${error.errors.slice(0, 5).join('; ')}`}`);
}

/** The trigger topic's consumer as a worker of the process. */
export function triggerConsumer(consumer: MessageConsumer, deps: TriggerMessageDeps): { start(): Promise<void>; stop(): Promise<void> } {
  const handle = triggerBatchHandler(deps);
  return { start: () => consumer.startBatches(handle), stop: () => consumer.stop() };
}

const PUBLISHED = new Set<string>(['NotificationCreated', 'NotificationStateChanged'] satisfies NotificationEvent['type'][]);

/** The message of a notification event, or undefined for events that are not published. */
function eventMessage(event: RecordedEvent): PublishedMessage | undefined {
  const id = idIn(notification.category, event.stream);
  if (id === undefined || !PUBLISHED.has(event.type)) return undefined;
  const d = event.data as JsonObject;
  const change =
    event.type === notification.createdEvent
      ? { to: 'PLAN', ownerType: d.ownerType, ownerId: d.ownerId, templateCode: d.templateCode, deliveryType: d.deliveryType }
      : { from: d.from, to: d.to, reason: d.reason };
  const value = {
    eventId: event.id,
    type: event.type,
    notificationId: id,
    version: event.revision,
    position: event.position.toString(),
    at: event.metadata.at,
    actor: event.metadata.actor,
    ...change,
  };
  return { key: id, id: event.id, value: JSON.stringify(value), headers: { 'event-type': event.type } };
}

/** Publishes the notifications' state changes to `topic`, then moves its checkpoint. */
export function notificationEventsPublisher(publisher: MessagePublisher, topic: string, reads: ReadStore): ProcessorHandler {
  const name = 'notification-events-publisher';
  return {
    name,
    categories: [notification.category],
    eventTypes: [...PUBLISHED],
    async handle(events, batch, ctx) {
      const messages = events.flatMap((e) => eventMessage(e) ?? []);
      // In requests of at most 100 messages, each well under a broker's message.max.bytes.
      for (let i = 0; i < messages.length; i += 100) {
        ctx.assertLease();
        await publisher.publish(topic, messages.slice(i, i + 100));
      }
      ctx.assertLease();
      await reads.saveCheckpoint(name, batch.to);
    },
  };
}
