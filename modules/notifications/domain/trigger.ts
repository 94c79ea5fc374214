// Notification triggers (DESIGN.md "Notifications"): a request to raise the notifications of a rule,
// from REST, a Kafka message or a SYSTEM rule matching a domain event. A trigger is appended to the
// log first (`NotificationTriggered`), so an acknowledged one is never lost; the trigger reactor
// (workers/notificationTriggers.ts) then makes one notification per ACTIVE template of the rule and
// records the outcome on the trigger (`Processed` with the notifications made, or `Failed` with the
// reason). It is created under an idempotency key made from where it came from (a Kafka message's
// topic, partition and offset; a domain event's id and the rule), so its id is derived from it and a
// redelivered one makes nothing twice.

import { z } from 'zod';
import {
  command,
  created,
  defineResource,
  deleted,
  exhaustive,
  ownEvent,
  patched,
  replaced,
  type CommandOf,
  type EventOf,
  type ResourceDefinition,
} from '../../../domain/resource/defineResource.ts';
import { invalidTransition, validationFailed } from '../../../domain/shared/errors.ts';
import { jsonMap, longText, text, uuid } from '../../../domain/shared/fields.ts';
import { boundedReason as bounded, notificationTarget, relatedEntity } from './notification.ts';

export const TriggerSources = ['REST', 'KAFKA', 'SYSTEM'] as const;
export const TriggerStatuses = ['RECEIVED', 'PROCESSED', 'FAILED'] as const;

/** What a trigger carries, whatever its source: the REST body, a Kafka message's value. */
export const triggerPayload = z.strictObject({
  data: jsonMap()
    .optional()
    .meta({ description: "The data the rule's templates are rendered over (merged over what evalNotificationUrl gathers)." }),
  ownerType: text(),
  ownerId: text(),
  targets: z
    .array(notificationTarget)
    .min(1)
    .max(1000)
    .optional()
    .meta({ description: "Whom the notifications are for; absent: the owner (a USER, or a USER_GROUP's members)." }),
  relatedEntities: z.array(relatedEntity).max(1000).optional(),
  from: z.string().max(255).optional(),
});
export type TriggerPayload = z.infer<typeof triggerPayload>;

/** The outcome the reactor records: the notifications made, and what could not be made. */
const triggerCommands = {
  Complete: command(
    "The trigger reactor made the rule's notifications: their ids, and the templates that could not be rendered.",
    z.strictObject({ notificationIds: z.array(uuid()), problems: z.array(z.string()) }),
  ),
  Fail: command('The trigger could not be processed, with the reason.', z.strictObject({ reason: z.string() })),
};
export type TriggerOutcome = CommandOf<typeof triggerCommands>;

const triggerEvents = {
  NotificationTriggered: created({
    meaning:
      "A notification rule was triggered (REST, a Kafka message or a SYSTEM rule's domain event): RECEIVED, appended before anything is made, so it is never lost.",
  }),
  NotificationTriggerReplaced: replaced(),
  NotificationTriggerPatched: patched(),
  NotificationTriggerDeleted: deleted(),
  NotificationTriggerProcessed: ownEvent({
    meaning:
      "The trigger reactor made the rule's notifications: PROCESSED, with their ids, and `problems` naming templates that could not be rendered.",
    data: z.strictObject({ notificationIds: z.array(uuid()), problems: z.array(longText(2000)).max(100) }),
    evolve: (r, d) => ({
      ...r,
      fields: {
        ...r.fields,
        status: 'PROCESSED',
        notificationIds: d.notificationIds,
        ...(Array.isArray(d.problems) && d.problems.length > 0 ? { problems: d.problems } : {}),
      },
    }),
  }),
  NotificationTriggerFailed: ownEvent({
    meaning: 'The trigger could not be processed: FAILED, with the reason.',
    data: z.strictObject({ reason: longText(2000) }),
    evolve: (r, d) => ({ ...r, fields: { ...r.fields, status: 'FAILED', reason: d.reason } }),
  }),
};
export type TriggerEvent = EventOf<typeof triggerEvents>;

export const notificationTrigger: ResourceDefinition<typeof triggerEvents, typeof triggerCommands> = defineResource({
  name: 'NotificationTrigger',
  path: 'notification-triggers',
  description:
    "A trigger of a notification rule (REST: POST /api/v1/notification-rules/{code}/trigger; a Kafka message; a SYSTEM rule's domain event). " +
    "`status` is RECEIVED until the rule's ACTIVE templates have made their notifications (PROCESSED, with `notificationIds`, and `problems` " +
    'naming templates that could not be rendered) or the trigger could not be processed (FAILED, with `reason`).',
  fields: z.strictObject({
    ruleCode: text(),
    source: z.enum(TriggerSources),
    ...triggerPayload.shape,
    origin: jsonMap()
      .optional()
      .meta({
        description:
          "Where it came from: a Kafka message's topic, partition and offset; a domain event's id, type, stream and actor (who made the change).",
      }),
    status: z.enum(TriggerStatuses),
    notificationIds: z.array(uuid()).max(10_000).optional(),
    problems: z.array(longText(2000)).max(100).optional(),
    reason: longText(2000).optional(),
  }),
  indexed: ['ruleCode', 'status', 'source'],
  defaultSort: ['auditInfo.whenInserted'],
  operations: ['get', 'versions', 'history', 'byIds', 'list', 'search', 'searchPage', 'count'],
  events: triggerEvents,
  commands: triggerCommands,
  behaviour: {
    onChange(before, after) {
      if (before === undefined && after.status !== 'RECEIVED')
        throw validationFailed('A trigger starts RECEIVED', [`status: ${String(after.status)} is not RECEIVED`]);
      return after;
    },
    decide(outcome, record) {
      const from = String(record.fields.status);
      // Recorded once: a replayed reaction finds it done and records nothing.
      if (from !== 'RECEIVED') {
        if ((outcome.type === 'Complete' && from === 'PROCESSED') || (outcome.type === 'Fail' && from === 'FAILED')) return [];
        throw invalidTransition('NOTIFICATION_TRIGGER', 'status', from, outcome.type === 'Complete' ? 'PROCESSED' : 'FAILED', []);
      }
      switch (outcome.type) {
        case 'Complete':
          return [
            {
              type: 'NotificationTriggerProcessed',
              data: { notificationIds: outcome.notificationIds, problems: outcome.problems.slice(0, 100).map(bounded) },
            },
          ];
        case 'Fail':
          return [{ type: 'NotificationTriggerFailed', data: { reason: bounded(outcome.reason) } }];
        default:
          return exhaustive(outcome, 'trigger outcome');
      }
    },
  },
});
