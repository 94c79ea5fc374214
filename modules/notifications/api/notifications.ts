// Notifications (API.md's Notifications table): created from an ACTIVE notification template, one
// or an array at a time, their subject and contents rendered by the formatter's engine in a
// template worker; moved through their state machine by PUT …/state; read by id, by owner, by
// search, with their owners and related entities. Delivery, recipients and triggers come next.

import { z } from 'zod';
import { notification, NotificationStatuses, relatedEntity, type ChangeState } from '../domain/notification.ts';
import { createPayload, renderNotification, type RenderEnv } from '../domain/render.ts';
import type { FastifyInstance } from 'fastify';
import { DomainError, notFound } from '../../../domain/shared/errors.ts';
import { text } from '../../../domain/shared/fields.ts';
import { MAX_UNPAGED_SIZE } from '../../../domain/shared/filtering.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { assertReadable, assertWritable, readScope, writeContext } from '../../../api/access.ts';
import { zodRoutes, type AppDeps, type ZodRoutes } from '../../../api/module.ts';
import { eq, recordsWhere, sendPageWhere } from '../../../api/readModelQuery.ts';
import { pagedNote, pagingQuery } from '../../../api/paging.ts';
import { position } from '../../../api/readModelWait.ts';
import { eventPosition, location, uuidParam } from '../../../api/replies.ts';
import { templateCallerOf } from '../../../api/requestContext.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { idOnly } from '../../../api/schemas.ts';

const tags = [notification.path];
const base = `/api/v1/${notification.path}`;
/** The most notifications one create makes. */
export const MAX_NOTIFICATIONS_PER_CREATE = 100;

function createRoute(r: ZodRoutes, deps: AppDeps): void {
  const notifications = deps.runtime.service(notification);
  r.post(
    base,
    {
      config: { permission: 'write', resource: notification },
      schema: {
        tags,
        summary: 'Create notifications from a template, one or an array',
        description:
          '`templateCode` must name an ACTIVE notification template (422 otherwise). Its `subject` and `content` are handlebars templates rendered ' +
          'over `data` (the content through its formatter template when it names one, with `formatterDocumentTemplateDataOverride` over the data; ' +
          'as text for SMS, HTML-escaped otherwise); a `subject` in the payload wins. Each notification starts PLAN, `created` now and ' +
          "`expirationDate` the template's `expiration` days later. An array makes every notification or none of them when one cannot be " +
          `rendered (at most ${String(MAX_NOTIFICATIONS_PER_CREATE)}, 413 beyond). \`Idempotency-Key\` is honoured; for an array each item ` +
          "is keyed by the key and its position. The templates are rendered within the caller's share of the template threads (as the formatter's " +
          'previews: 429 `FORMATTER.TOO_MANY_RENDERS_OF_CALLER` beyond TEMPLATE_JOBS_PER_CALLER, 503 `FORMATTER.RENDERER_BUSY` when the queue is full, both with `Retry-After`).',
        body: z.union([createPayload, z.array(createPayload).min(1)]),
        response: { 201: z.union([notification.record, z.array(notification.record)]), ...errors(400, 409, 413, 422, 429, 503) },
      },
    },
    async (request, reply) => {
      const many = Array.isArray(request.body);
      const payloads = Array.isArray(request.body) ? request.body : [request.body];
      if (payloads.length > MAX_NOTIFICATIONS_PER_CREATE) {
        throw new DomainError(
          'NOTIFICATION.TOO_MANY',
          `At most ${String(MAX_NOTIFICATIONS_PER_CREATE)} notifications per create, got ${String(payloads.length)}`,
        );
      }
      // Every one rendered and checked before any is written: an array is made whole or not at all.
      const env: RenderEnv = {
        records: deps.runtime,
        blobStore: deps.blobStore,
        documents: deps.documents,
        caller: templateCallerOf(request),
        readable: (def, record) => assertReadable(deps, request, def, record),
      };
      const inputs: JsonObject[] = [];
      for (const [i, payload] of payloads.entries()) inputs.push(await renderNotification(env, payload, many ? `[${String(i)}].` : ''));
      const ctx = await writeContext(deps, request, notification);
      const created: JsonObject[] = [];
      for (const [i, input] of inputs.entries()) {
        const itemCtx = many && ctx.idempotencyKey !== undefined ? { ...ctx, idempotencyKey: `${ctx.idempotencyKey}#${String(i)}` } : ctx;
        const { record, position: at } = await notifications.create(input, itemCtx);
        if (record === undefined) throw new Error('a create answered no record');
        created.push(record);
        if (!many) eventPosition(location(reply, `${base}/${record.id}`), at);
      }
      return reply.code(201).send(many ? created : (created[0] as JsonObject));
    },
  );
}

/** The notifications' routes beside the shared operation set. */
export function notificationsRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = zodRoutes(app);
  const list = { 200: z.array(notification.record), ...errors(400, 503) };
  createRoute(r, deps);

  stateRoute(r, deps);
  readRoutes(r, deps, list);
}

function stateRoute(r: ZodRoutes, deps: AppDeps): void {
  const notifications = deps.runtime.service(notification);
  r.put(
    `${base}/:id/state`,
    {
      config: { permission: 'write', resource: notification },
      schema: {
        tags,
        summary: 'Move a notification to another state',
        description:
          'PLAN → SENDING → SENT | FAILED; PLAN → CANCELLED; SENT → READ → ANSWERED; PLAN or SENT → EXPIRED. Another move is a 409 naming the ' +
          'allowed ones; the same state again changes nothing. The move is an event with the caller as actor and `reason` when given.',
        params: z.strictObject({ id: idOnly() }),
        querystring: z.strictObject({ newState: z.enum(NotificationStatuses), reason: z.string().min(1).max(1000).optional() }),
        response: { 204: z.undefined(), ...errors(400, 404, 409) },
      },
    },
    async (request, reply) => {
      const id = uuidParam(request.params.id);
      const record = await notifications.get(id);
      await assertWritable(deps, request, notification, record);
      const command: ChangeState = {
        type: 'ChangeState',
        to: request.query.newState,
        ...(request.query.reason === undefined ? {} : { reason: request.query.reason }),
      };
      const result = await notifications.execute(id, command, await writeContext(deps, request, notification));
      return eventPosition(reply, result.position).code(204).send();
    },
  );
}

function readRoutes(r: ZodRoutes, deps: AppDeps, list: Record<number, z.ZodType>): void {
  const notifications = deps.runtime.service(notification);
  r.get(
    `${base}/owners`,
    {
      config: { permission: 'read', resource: notification },
      schema: {
        tags,
        summary: 'The owner ids of an owner type that have notifications',
        description: `Distinct, in the order of their first notification; at most ${String(MAX_UNPAGED_SIZE)} notifications are looked at. Served by the read model (\`minPosition\`).`,
        querystring: z.strictObject({ ownerType: text(), minPosition: position.optional() }),
        response: { 200: z.array(z.string()), ...errors(400, 503) },
      },
    },
    async (request) => {
      const docs = await recordsWhere(deps, notification, [eq('ownerType', request.query.ownerType)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, notification),
      });
      return [...new Set(docs.map((d) => d.ownerId).filter((v): v is string => typeof v === 'string'))];
    },
  );

  r.get(
    `${base}/by-owner`,
    {
      config: { permission: 'read', resource: notification },
      schema: {
        tags,
        summary: 'Notifications of one owner',
        description: `Served by the read model (\`minPosition\` waits for a write). ${pagedNote('oldest first')}`,
        querystring: z.strictObject({ ownerType: text(), ownerId: text(), minPosition: position.optional(), ...pagingQuery }),
        response: list,
      },
    },
    async (request, reply) =>
      sendPageWhere(request, reply, deps, notification, [eq('ownerType', request.query.ownerType), eq('ownerId', request.query.ownerId)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, notification),
        paging: request.query,
      }),
  );

  r.get(
    `${base}/:id/related-entities`,
    {
      config: { permission: 'read', resource: notification },
      schema: {
        tags,
        summary: 'The related entities of a notification of one refType',
        description: 'Read from the log: every acknowledged write shows.',
        params: z.strictObject({ id: idOnly() }),
        querystring: z.strictObject({ refType: text() }),
        response: { 200: z.array(relatedEntity), ...errors(400, 404) },
      },
    },
    async (request) => {
      const id = uuidParam(request.params.id);
      const record = await assertReadable(deps, request, notification, await notifications.get(id)).catch((error: unknown) => {
        throw error instanceof DomainError && error.status === 'NOT_FOUND' ? notFound(notification.errorPrefix, id) : error;
      });
      const entities = (record.relatedEntities ?? []) as JsonObject[];
      return entities.filter((e) => e.refType === request.query.refType);
    },
  );
}
