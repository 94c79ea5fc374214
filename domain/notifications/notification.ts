// Notifications (SPEC.md "Notification"): a message made from a notification template for an
// owner and its targets, as an event-sourced record whose status moves through a state machine;
// every move is an event with its actor and reason, so a notification's history is its delivery
// log. Created from a template only (api/modules/notifications.ts renders it), never replaced or
// patched.

import { z } from 'zod';
import { invalidTransition, validationFailed } from '../shared/errors.ts';
import { dateTime, email, jsonMap, longText, phoneNumber, text, uuid } from '../shared/fields.ts';
import { defineResource, type ResourceDefinition } from '../resource/defineResource.ts';
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
  .meta({ description: 'Whom a notification is for: an address (email, phone) used as given, or an owner (a USER, a USER_GROUP) resolved at delivery.' });

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

/** The command of a state move: to a status, with the reason (for the history). */
export type ChangeState = { type: 'ChangeState'; to: NotificationStatus; reason?: string };

const addDays = (at: Date, days: number): string => new Date(at.getTime() + days * 86_400_000).toISOString();

export const notification: ResourceDefinition = defineResource({
  name: 'Notification',
  path: 'notifications',
  description:
    'A message made from a notification template (POST /api/v1/notifications renders its subject and contents from the data). `status` ' +
    'starts PLAN and moves only through PUT /api/v1/notifications/{id}/state: PLAN → SENDING → SENT | FAILED; PLAN → CANCELLED; SENT → READ → ' +
    'ANSWERED; PLAN or SENT → EXPIRED; any other move is a 409 naming the allowed ones. Every move is an event with its actor and reason (the ' +
    'history is the delivery log). `created` is when it was made, `expirationDate` that plus the template\'s `expiration` days, `sent` when it became SENT.',
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
    params: jsonMap().optional().meta({ description: 'What the notification was made from: the template\'s version, delivery type and expiration days.' }),
    created: dateTime().optional(),
    expirationDate: dateTime().optional(),
    sent: dateTime().optional(),
    deliveryFromTime: dateTime().optional(),
    deliveryToTime: dateTime().optional(),
  }),
  indexed: ['ownerType', 'ownerId', 'status', 'templateCode', 'expirationDate', 'created'],
  defaultSort: ['auditInfo.whenInserted'],
  operations: ['get', 'versions', 'history', 'byIds', 'list', 'search', 'searchPage', 'count'],
  behaviour: {
    // A notification is made PLAN, dated now, and expires after its template's days.
    onChange(before, after, ctx) {
      if (before !== undefined) return after;
      if (after.status !== 'PLAN') throw validationFailed('A notification starts PLAN', [`status: ${String(after.status)} is not PLAN`]);
      const days = (after.params as { expiration?: unknown } | undefined)?.expiration;
      return { ...after, created: ctx.now.toISOString(), ...(typeof days === 'number' ? { expirationDate: addDays(ctx.now, days) } : {}) };
    },
    events: {
      StateChanged: {
        evolve: (r, d) => ({ ...r, fields: { ...r.fields, status: d.to, ...(d.to === 'SENT' ? { sent: d.at } : {}) } }),
      },
    },
    decide(command, record, ctx) {
      if (command.type !== 'ChangeState') throw new Error(`unknown notification command ${JSON.stringify(command.type)}`);
      const c = command as ChangeState;
      const from = record.fields.status as NotificationStatus;
      if (from === c.to) return [];
      if (!STATE_MOVES[from].includes(c.to)) throw invalidTransition('NOTIFICATION', 'status', from, c.to, STATE_MOVES[from]);
      return [{ type: 'StateChanged', data: { from, to: c.to, at: ctx.now.toISOString(), ...(c.reason === undefined ? {} : { reason: c.reason }) } }];
    },
  },
});
