// Notifications (SPEC.md "Notification"): a message made from a notification template for an
// owner and its targets, as an event-sourced record whose status moves through a state machine;
// every move is an event with its actor and reason, so a notification's history is its delivery
// log. Created from a template only (api/modules/notifications.ts renders it), never replaced or
// patched.

import { z } from 'zod';
import { DomainError, invalidTransition, validationFailed } from '../../../domain/shared/errors.ts';
import { dateTime, email, jsonMap, longText, phoneNumber, text, uuid } from '../../../domain/shared/fields.ts';
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
  type OwnEventOf,
  type ResourceDefinition,
} from '../../../domain/resource/defineResource.ts';
import { MAX_ATTACHMENTS } from './attachments.ts';

export const NotificationStatuses = ['PLAN', 'SENDING', 'SENT', 'FAILED', 'CANCELLED', 'READ', 'ANSWERED', 'EXPIRED'] as const;
export type NotificationStatus = (typeof NotificationStatuses)[number];

/** The moves a status allows: PLAN → SENDING → SENT | FAILED; PLAN → CANCELLED; SENT → READ →
 * ANSWERED; PLAN or SENT → EXPIRED. FAILED, CANCELLED, ANSWERED and EXPIRED are final. */
export const STATE_MOVES: Readonly<Record<NotificationStatus, readonly NotificationStatus[]>> = {
  PLAN: ['SENDING', 'CANCELLED', 'EXPIRED'],
  SENDING: ['SENT', 'FAILED'],
  SENT: ['READ', 'EXPIRED'],
  READ: ['ANSWERED'],
  FAILED: [],
  CANCELLED: [],
  ANSWERED: [],
  EXPIRED: [],
};

export const notificationTarget = z
  .strictObject({
    id: uuid().optional(),
    ownerType: text().optional(),
    ownerId: text().optional(),
    email: email().optional(),
    emailType: text().optional(),
    phone: phoneNumber().optional(),
    address: jsonMap().optional(),
    notificationId: uuid().optional(),
  })
  .meta({
    description:
      'Whom a notification is for: an address (email, phone) used as given, or an owner (a USER, a USER_GROUP) resolved at delivery.',
  });

export const relatedEntity = z.strictObject({
  id: uuid().optional(),
  name: text().optional(),
  refId: text().optional(),
  refType: text().optional(),
  type: text().optional(),
  subType: text().optional(),
  data: jsonMap().optional(),
  placeId: uuid().optional(),
  gpsLat: z.number().min(-90).max(90).optional(),
  gpsLon: z.number().min(-180).max(180).optional(),
  notificationId: uuid().optional(),
});

/** A state move: to a status, with the reason (for the history). */
const move = z.strictObject({ to: z.enum(NotificationStatuses), reason: z.string().optional() });

const notificationCommands = {
  ChangeState: command(
    'Move the notification to a status (PUT /api/v1/notifications/{id}/state, the dispatcher, the expiry pass), with the reason.',
    move,
  ),
  /** Moves made one after another as one change (one append): a channel that needs no attempt goes
   * from PLAN through SENDING to its outcome at once. Those up to where the notification is already
   * are made; each other is judged as a ChangeState from where the previous one left it. */
  ChangeStates: command(
    'Moves made one after another as one change (a channel that needs no attempt: PLAN through SENDING to its outcome).',
    z.strictObject({ moves: z.array(move).readonly() }),
  ),
  /** The dispatcher's commands: an attempt recorded before it is made (outbox), a transient failure
   * deferring the next one. */
  Attempt: command(
    'The dispatcher records delivery attempt n before it makes it (n is the next one, else 409).',
    z.strictObject({ attempt: z.int().min(1) }),
  ),
  Defer: command(
    'The dispatcher defers the next attempt after a transient failure.',
    z.strictObject({ reason: z.string(), nextAttemptAt: dateTime() }),
  ),
};
/** The commands of a notification: its state moves, and the dispatcher's delivery records. */
export type DeliveryCommand = CommandOf<typeof notificationCommands>;
export type ChangeState = Extract<DeliveryCommand, { type: 'ChangeState' }>;
export type ChangeStates = Extract<DeliveryCommand, { type: 'ChangeStates' }>;

const notificationEvents = {
  NotificationCreated: created({
    meaning: 'A notification was made from a template (POST /api/v1/notifications, or a trigger): PLAN, its subject and contents rendered.',
  }),
  NotificationReplaced: replaced(),
  NotificationPatched: patched(),
  NotificationDeleted: deleted(),
  NotificationStateChanged: ownEvent({
    meaning:
      'The notification moved from one status to another, with the reason: the delivery log. SENT sets `sent`, SENDING makes it due for an attempt at once, ' +
      'FAILED keeps the reason as `lastError`. Published on the notifications topic.',
    data: z.strictObject({
      from: z.enum(NotificationStatuses),
      to: z.enum(NotificationStatuses),
      at: dateTime(),
      reason: z.string().optional(),
    }),
    evolve: (r, d) => {
      const { nextAttemptAt: _next, ...fields } = r.fields;
      const reason = typeof d.reason === 'string' && d.to === 'FAILED' ? { lastError: d.reason } : {};
      // SENDING is due for its first attempt at once; any other state is not due at all.
      return {
        ...r,
        fields: {
          ...fields,
          status: d.to,
          ...(d.to === 'SENT' ? { sent: d.at } : {}),
          ...(d.to === 'SENDING' ? { nextAttemptAt: d.at } : {}),
          ...reason,
        },
      };
    },
  }),
  NotificationDeliveryAttempted: ownEvent({
    meaning:
      'Delivery attempt `attempt` is about to be made (recorded first); it holds the notification until `holdUntil` (events written before holds carry none).',
    data: z.strictObject({ attempt: z.int().min(1), at: dateTime(), holdUntil: dateTime().optional() }),
    // The attempt holds the notification (older events carry no hold: due as before).
    evolve: (r, d) => ({
      ...r,
      fields: { ...r.fields, attempts: d.attempt, ...(typeof d.holdUntil === 'string' ? { nextAttemptAt: d.holdUntil } : {}) },
    }),
  }),
  NotificationDeliveryDeferred: ownEvent({
    meaning: 'An attempt failed for a reason that may pass: the next one is due at `nextAttemptAt`, and `reason` is kept as `lastError`.',
    data: z.strictObject({ attempt: z.int().min(0), reason: z.string(), nextAttemptAt: dateTime() }),
    evolve: (r, d) => ({ ...r, fields: { ...r.fields, nextAttemptAt: d.nextAttemptAt, lastError: d.reason } }),
  }),
};
export type NotificationEvent = EventOf<typeof notificationEvents>;

/** The event of a move from `from`, none when it is there already; a move the state machine does
 * not allow is a 409. */
function moved(from: NotificationStatus, c: z.output<typeof move>, now: Date): OwnEventOf<typeof notificationEvents>[] {
  if (from === c.to) return [];
  if (!STATE_MOVES[from].includes(c.to)) throw invalidTransition('NOTIFICATION', 'status', from, c.to, STATE_MOVES[from]);
  return [
    {
      type: 'NotificationStateChanged',
      data: { from, to: c.to, at: now.toISOString(), ...(c.reason === undefined ? {} : { reason: c.reason }) },
    },
  ];
}

/** How long an attempt holds its notification: not due again (to this or another instance) until
 * its outcome is recorded or this passes, which is longer than any channel's timeout. An attempt
 * whose outcome never came (a crash mid-send) is made again after it. */
export const ATTEMPT_HOLD_MS = 120_000;

/** A reason recorded on a notification or a trigger: at most 2,000 characters (cut with a mark). */
export const boundedReason = (reason: string): string => (reason.length > 2000 ? `${reason.slice(0, 1980)}… (cut)` : reason);

/** Delivery attempts before a transient failure is final. */
export const MAX_ATTEMPTS = 5;
/** The wait before attempt n + 1 (n ≥ 1): exponential from 2 s, capped at 10 min, with ±25% jitter. */
export function backoffMs(attempt: number, random: number): number {
  const base = Math.min(600_000, 2000 * 2 ** (attempt - 1));
  return Math.round(base * (0.75 + 0.5 * random));
}

const addDays = (at: Date, days: number): string => new Date(at.getTime() + days * 86_400_000).toISOString();

export const notification: ResourceDefinition<typeof notificationEvents, typeof notificationCommands> = defineResource({
  name: 'Notification',
  path: 'notifications',
  description:
    'A message made from a notification template (POST /api/v1/notifications renders its subject and contents from the data). `status` ' +
    'starts PLAN and moves only through PUT /api/v1/notifications/{id}/state: PLAN → SENDING → SENT | FAILED; PLAN → CANCELLED; SENT → READ → ' +
    'ANSWERED; PLAN or SENT → EXPIRED; any other move is a 409 naming the allowed ones. Every move is an event with its actor and reason (the ' +
    "history is the delivery log). `created` is when it was made, `expirationDate` that plus the template's `expiration` days, `sent` when it became SENT.",
  fields: z.strictObject({
    ownerType: text(),
    ownerId: text(),
    templateCode: text(),
    subject: longText(2000).optional(),
    contents: longText(500_000).optional(),
    notificationTo: z.array(notificationTarget).min(1).max(1000),
    relatedEntities: z.array(relatedEntity).max(1000).optional(),
    data: jsonMap().optional(),
    formatterDocumentTemplateDataOverride: jsonMap().optional(),
    from: z.string().max(255).optional(),
    attachments: z
      .array(z.strictObject({ name: text(), mimeType: text(), size: z.int().min(0), sha256: z.string().regex(/^[0-9a-f]{64}$/) }))
      .max(MAX_ATTACHMENTS)
      .optional()
      .meta({ description: 'The attachments given on create: their bytes are in the blob store under `sha256`, never in an event.' }),
    fromUserId: uuid().optional(),
    status: z.enum(NotificationStatuses),
    params: jsonMap()
      .optional()
      .meta({ description: "What the notification was made from: the template's version, delivery type and expiration days." }),
    created: dateTime().optional(),
    expirationDate: dateTime().optional(),
    sent: dateTime().optional(),
    deliveryType: z
      .enum(['SMS', 'EMAIL', 'LETTER', 'APPLICATION', 'USER_COMMENT'])
      .optional()
      .meta({ description: 'The channel, from the template.' }),
    attempts: z.int().min(0).optional().meta({ description: 'Delivery attempts made (each recorded before it is made).' }),
    nextAttemptAt: dateTime().optional().meta({ description: 'When a SENDING notification is next attempted.' }),
    lastError: longText(2000).optional().meta({ description: 'Why the last attempt failed.' }),
    deliveryFromTime: dateTime().optional(),
    deliveryToTime: dateTime().optional(),
  }),
  indexed: ['ownerType', 'ownerId', 'status', 'templateCode', 'expirationDate', 'created', 'deliveryType', 'nextAttemptAt'],
  defaultSort: ['auditInfo.whenInserted'],
  operations: ['get', 'versions', 'history', 'byIds', 'list', 'search', 'searchPage', 'count'],
  events: notificationEvents,
  commands: notificationCommands,
  behaviour: {
    // A notification is made PLAN, dated now, and expires after its template's days.
    onChange(before, after, ctx) {
      if (before !== undefined) return after;
      if (after.status !== 'PLAN') throw validationFailed('A notification starts PLAN', [`status: ${String(after.status)} is not PLAN`]);
      const days = (after.params as { expiration?: unknown } | undefined)?.expiration;
      return { ...after, created: ctx.now.toISOString(), ...(typeof days === 'number' ? { expirationDate: addDays(ctx.now, days) } : {}) };
    },
    decide(own, record, ctx) {
      const attempts = typeof record.fields.attempts === 'number' ? record.fields.attempts : 0;
      switch (own.type) {
        case 'Attempt': {
          // Only a SENDING notification is attempted: a dispatcher that read it stale sends nothing.
          if (record.fields.status !== 'SENDING')
            throw invalidTransition('NOTIFICATION', 'status', String(record.fields.status), 'SENDING (an attempt)', []);
          // Attempt n is made once: a second dispatcher (or a retried command) asking for it again
          // is refused, so it never sends what another is sending.
          if (own.attempt !== attempts + 1)
            throw new DomainError(
              'NOTIFICATION.ATTEMPT_TAKEN',
              `Attempt ${String(own.attempt)} is not the next one: ${String(attempts)} made`,
            );
          const holdUntil = new Date(ctx.now.getTime() + ATTEMPT_HOLD_MS).toISOString();
          return [{ type: 'NotificationDeliveryAttempted', data: { attempt: own.attempt, at: ctx.now.toISOString(), holdUntil } }];
        }
        case 'Defer':
          return record.fields.status === 'SENDING'
            ? [
                {
                  type: 'NotificationDeliveryDeferred',
                  data: { attempt: attempts, reason: own.reason.slice(0, 2000), nextAttemptAt: own.nextAttemptAt },
                },
              ]
            : [];
        case 'ChangeState':
          return moved(record.fields.status as NotificationStatus, own, ctx.now);
        case 'ChangeStates': {
          let from = record.fields.status as NotificationStatus;
          // Where the notification is on the way already, the moves up to there are made.
          return own.moves.slice(own.moves.findLastIndex((move) => move.to === from) + 1).flatMap((move) => {
            const events = moved(from, move, ctx.now);
            from = move.to;
            return events;
          });
        }
        default:
          return exhaustive(own, 'notification command');
      }
    },
  },
});
