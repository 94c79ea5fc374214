// Notifications (API.md's Notifications table): created from an ACTIVE notification template, one
// or an array at a time, their subject and contents rendered by the formatter's engine in a
// template worker; moved through their state machine by PUT …/state; read by id, by owner, by
// search, with their owners and related entities. Delivery, recipients and triggers come next.

import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { templateText, type TemplateVersion } from '../../domain/documents/generate.ts';
import { inProcessTemplates } from '../../domain/documents/templateJobs.ts';
import { ATTACHMENT_TYPES, checkedAttachments, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS } from '../../domain/notifications/attachments.ts';
import { notification, notificationTarget, NotificationStatuses, relatedEntity, type ChangeState } from '../../domain/notifications/notification.ts';
import { formatterTemplate } from '../../domain/registries/formatterTemplate.ts';
import { notificationTemplate } from '../../domain/registries/notificationTemplate.ts';
import { DomainError, malformedUuid, notFound } from '../../domain/shared/errors.ts';
import { jsonMap, text, uuid } from '../../domain/shared/fields.ts';
import { MAX_UNPAGED_SIZE, toQuery, type FilterItem } from '../../domain/shared/filtering.ts';
import type { JsonObject } from '../../domain/shared/json.ts';
import { isUuid } from '../../domain/shared/ids.ts';
import { assertReadable, assertWritable, readScope, writeContext } from '../access.ts';
import { sendDocuments } from '../documentStream.ts';
import { zodRoutes, type AppDeps, type Module, type ModuleContext, type ZodRoutes } from '../module.ts';
import { dueInReadModel, type Schedule } from '../../workers/scheduler.ts';
import { dispatchSchedule } from '../../workers/notificationDispatcher.ts';
import { resourceService } from '../../domain/resource/service.ts';
import { eq, idsWhere, recordsWhere } from '../readModelQuery.ts';
import { position } from '../readModelWait.ts';
import { errors } from '../resourceRoutes.ts';
import { serviceOf } from '../services.ts';

const tags = [notification.path];
const base = `/api/v1/${notification.path}`;
/** The most notifications one create makes. */
export const MAX_NOTIFICATIONS_PER_CREATE = 100;

const createPayload = z.strictObject({
  id: uuid().optional(),
  ownerType: text(),
  ownerId: text(),
  notificationTo: z.array(notificationTarget).min(1).max(1000),
  relatedEntities: z.array(relatedEntity).max(1000).optional(),
  data: jsonMap().optional(),
  formatterDocumentTemplateDataOverride: jsonMap().optional(),
  from: z.string().max(255).optional(),
  templateCode: text(),
  subject: z.string().max(255).optional().meta({ description: 'Overrides the subject the template would render.' }),
  attachments: z
    .array(z.strictObject({ name: text(), mimeType: text(), data: z.string().meta({ description: 'the bytes in base64' }) }))
    .max(1000)
    .optional()
    .meta({
      description:
        `At most ${String(MAX_ATTACHMENTS)} (413 beyond), each at most ${String(MAX_ATTACHMENT_BYTES / 1024 / 1024)} MiB decoded (413), of a type its bytes prove ` +
        `(422 otherwise): ${ATTACHMENT_TYPES.join(', ')}. Stored in the blob store; the notification keeps name, type, size and SHA-256.`,
    }),
});
type CreatePayload = z.infer<typeof createPayload>;

const missingTemplate = (code: string): DomainError =>
  new DomainError('NOTIFICATION.REFERENCE_NOT_FOUND', 'UNPROCESSABLE_ENTITY', `No notification template ${JSON.stringify(code)}`, [`templateCode: ${code} does not exist`]);

const inactive = (code: string): DomainError =>
  new DomainError('NOTIFICATION.TEMPLATE_NOT_ACTIVE', 'UNPROCESSABLE_ENTITY', `Notification template ${JSON.stringify(code)} is not ACTIVE`, [`templateCode: ${code} is not ACTIVE`]);

/** The notification template a payload names, ACTIVE and readable by the caller (422 otherwise). */
async function activeTemplate(deps: AppDeps, request: FastifyRequest, code: string): Promise<JsonObject & { id: string; auditInfo: { version: number } }> {
  const template = await serviceOf(deps, notificationTemplate).getByCode(code).catch((error: unknown) => {
    if (error instanceof DomainError && error.status === 'NOT_FOUND') throw missingTemplate(code);
    throw error;
  });
  // A template the caller may not read is answered as one that does not exist.
  const readable = await assertReadable(deps, request, notificationTemplate, template).catch((error: unknown) => {
    if (error instanceof DomainError && error.status === 'NOT_FOUND') throw missingTemplate(code);
    throw error;
  });
  if (readable.status !== 'ACTIVE') throw inactive(code);
  return readable;
}

/** The contents: through the template's formatter template when it names one (the override over
 * the data), else its own content (as text for SMS, HTML-escaped otherwise). */
async function contentsOf(deps: AppDeps, request: FastifyRequest, template: JsonObject & { id: string; auditInfo: { version: number } }, payload: CreatePayload): Promise<string | undefined> {
  const data = payload.data ?? {};
  if (typeof template.formatterDocumentTemplateId === 'string') {
    const document = await assertReadable(deps, request, formatterTemplate, await serviceOf(deps, formatterTemplate).get(template.formatterDocumentTemplateId));
    return templateText(document as unknown as TemplateVersion, { ...data, ...(payload.formatterDocumentTemplateDataOverride ?? {}) }, deps.documents ?? {});
  }
  if (typeof template.content !== 'string') return undefined;
  const mode = template.deliveryType === 'SMS' ? 'text' : 'html';
  return (deps.documents?.templates ?? inProcessTemplates).text({ kind: 'handlebars', key: `${template.id}:content`, version: template.auditInfo.version, source: template.content, data, mode });
}

/** The stored notification a payload makes: its template ACTIVE, subject and contents rendered. */
async function rendered(deps: AppDeps, request: FastifyRequest, payload: CreatePayload): Promise<JsonObject> {
  const template = await activeTemplate(deps, request, payload.templateCode);
  const version = template.auditInfo.version;
  const renderedSubject = async (source: string) =>
    (deps.documents?.templates ?? inProcessTemplates).text({ kind: 'handlebars', key: `${template.id}:subject`, version, source, data: payload.data ?? {}, mode: 'text' });
  const subject = payload.subject ?? (typeof template.subject === 'string' ? await renderedSubject(template.subject) : undefined);
  const contents = await contentsOf(deps, request, template, payload);
  // Checked before anything is stored; each blob is written before the event that names it.
  const attachments = await Promise.all(
    checkedAttachments(payload.attachments ?? []).map(async (a) => {
      const ref = await deps.blobStore.put(a.bytes, a.mimeType);
      return { name: a.name, mimeType: a.mimeType, size: ref.size, sha256: ref.sha256 };
    }),
  );
  const { id: _id, subject: _subject, attachments: _attachments, ...rest } = payload;
  const optional = (key: string, value: unknown) => (value === undefined ? {} : { [key]: value });
  return {
    ...rest,
    ...optional('subject', subject),
    ...optional('contents', contents),
    ...(attachments.length === 0 ? {} : { attachments }),
    ...optional('from', payload.from ?? (typeof template.from === 'string' ? template.from : undefined)),
    ...optional('deliveryType', template.deliveryType),
    status: 'PLAN',
    params: { templateVersion: version, ...optional('deliveryType', template.deliveryType), ...optional('expiration', template.expiration) },
  };
}

function createRoute(r: ZodRoutes, deps: AppDeps): void {
  const notifications = serviceOf(deps, notification);
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
          '`expirationDate` the template\'s `expiration` days later. An array makes every notification or none of them when one cannot be ' +
          `rendered (at most ${String(MAX_NOTIFICATIONS_PER_CREATE)}, 413 beyond). \`Idempotency-Key\` is honoured; for an array each item ` +
          'is keyed by the key and its position.',
        body: z.union([createPayload, z.array(createPayload).min(1)]),
        response: { 201: z.union([notification.record, z.array(notification.record)]), ...errors(400, 409, 413, 422) },
      },
    },
    async (request, reply) => {
      const many = Array.isArray(request.body);
      const payloads = Array.isArray(request.body) ? request.body : [request.body];
      if (payloads.length > MAX_NOTIFICATIONS_PER_CREATE) {
        throw new DomainError('NOTIFICATION.TOO_MANY', 'PAYLOAD_TOO_LARGE', `At most ${String(MAX_NOTIFICATIONS_PER_CREATE)} notifications per create, got ${String(payloads.length)}`);
      }
      // Every one rendered before any is written: an array is made whole or not at all.
      const inputs: JsonObject[] = [];
      for (const [i, payload] of payloads.entries()) {
        const input = { ...(payload.id === undefined ? {} : { id: payload.id }), ...(await rendered(deps, request, payload)) };
        // What was rendered is checked as the record it makes before any is written (a 422: the
        // template made it so, not the request).
        const { id: _id, ...fields } = input;
        const checked = notification.fields.safeParse(fields);
        if (!checked.success) {
          const at = many ? `[${String(i)}].` : '';
          throw new DomainError('NOTIFICATION.RENDERED_INVALID', 'UNPROCESSABLE_ENTITY', 'The template made a notification that is not valid', checked.error.issues.map((issue) => `${at}${issue.path.join('.')}: ${issue.message}`));
        }
        inputs.push(input);
      }
      const ctx = await writeContext(deps, request, notification);
      const created: JsonObject[] = [];
      for (const [i, input] of inputs.entries()) {
        const itemCtx = many && ctx.idempotencyKey !== undefined ? { ...ctx, idempotencyKey: `${ctx.idempotencyKey}#${String(i)}` } : ctx;
        const { record, position: at } = await notifications.create(input, itemCtx);
        if (record === undefined) throw new Error('a create answered no record');
        created.push(record);
        if (!many) void reply.header('location', `${base}/${record.id}`).header('x-event-position', String(at));
      }
      return reply.code(201).send(many ? created : (created[0] as JsonObject));
    },
  );
}

/** The actor of the service's own moves of notifications (expiry). */
export const NOTIFICATION_EXPIRY_ACTOR = 'system:notification-expiry';

/** PLAN or SENT notifications whose expirationDate has passed become EXPIRED: due work read from
 * the read model at every tick, so it survives restarts and runs once across instances. */
function expirySchedule(ctx: ModuleContext): Schedule {
  const service = resourceService(notification, ctx.eventStore);
  return {
    name: 'notification-expiry',
    due: (now) => {
      const filter: FilterItem[] = [
        { column: 'status', operator: 'IN', values: ['PLAN', 'SENT'] },
        { column: 'expirationDate', operator: 'LTE', value: now.toISOString() },
      ];
      return dueInReadModel(ctx.readStore, ctx.readModels, notification.collection, toQuery({ filter, sort: [] }, notification.columns, notification.defaultSort));
    },
    run: async (item, now) => {
      const command: ChangeState = { type: 'ChangeState', to: 'EXPIRED', reason: `expirationDate ${String(item.expirationDate)} passed` };
      try {
        await service.execute(item.id, command, { actor: NOTIFICATION_EXPIRY_ACTOR, now, newId: ctx.newId, requestId: ctx.newId(), idempotencyKey: `expire:${item.id}` });
      } catch (error) {
        // Moved on meanwhile (READ, CANCELLED): nothing to expire.
        if (!(error instanceof DomainError && error.status === 'CONFLICT')) throw error;
      }
      return true;
    },
  };
}

export const notificationsModule: Module = {
  name: 'notifications',
  resources: [{ definition: notification, routes: {} }],
  schedules: (ctx) => [expirySchedule(ctx), dispatchSchedule(ctx)],
  routes(app, deps) {
    const r = zodRoutes(app);
    const list = { 200: z.array(notification.record), ...errors(400, 503) };
    createRoute(r, deps);

    stateRoute(r, deps);
    readRoutes(r, deps, list);
  },
};

function stateRoute(r: ZodRoutes, deps: AppDeps): void {
  const notifications = serviceOf(deps, notification);
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
        params: z.strictObject({ id: z.string().max(255) }),
        querystring: z.strictObject({ newState: z.enum(NotificationStatuses), reason: z.string().min(1).max(1000).optional() }),
        response: { 204: z.undefined(), ...errors(400, 404, 409) },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      if (!isUuid(id)) throw malformedUuid('id', id);
      const record = await notifications.get(id);
      await assertWritable(deps, request, notification, record);
      const command: ChangeState = { type: 'ChangeState', to: request.query.newState, ...(request.query.reason === undefined ? {} : { reason: request.query.reason }) };
      const result = await notifications.execute(id, command, await writeContext(deps, request, notification));
      return reply.header('x-event-position', String(result.position)).code(204).send();
    },
  );
}

function readRoutes(r: ZodRoutes, deps: AppDeps, list: Record<number, z.ZodType>): void {
  const notifications = serviceOf(deps, notification);
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
      const docs = await recordsWhere(deps, notification, [eq('ownerType', request.query.ownerType)], { minPosition: request.query.minPosition, within: await readScope(deps, request, notification) });
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
        description: `At most ${String(MAX_UNPAGED_SIZE)}, oldest first; served by the read model (\`minPosition\` waits for a write).`,
        querystring: z.strictObject({ ownerType: text(), ownerId: text(), minPosition: position.optional() }),
        response: list,
      },
    },
    async (request, reply) => {
      const { collection, ids } = await idsWhere(deps, notification, [eq('ownerType', request.query.ownerType), eq('ownerId', request.query.ownerId)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, notification),
      });
      sendDocuments(reply, deps.readStore, collection, ids);
      return reply;
    },
  );

  r.get(
    `${base}/:id/related-entities`,
    {
      config: { permission: 'read', resource: notification },
      schema: {
        tags,
        summary: 'The related entities of a notification of one refType',
        description: 'Read from the log: every acknowledged write shows.',
        params: z.strictObject({ id: z.string().max(255) }),
        querystring: z.strictObject({ refType: text() }),
        response: { 200: z.array(relatedEntity), ...errors(400, 404) },
      },
    },
    async (request) => {
      const { id } = request.params;
      if (!isUuid(id)) throw malformedUuid('id', id);
      const record = await assertReadable(deps, request, notification, await notifications.get(id)).catch((error: unknown) => {
        throw error instanceof DomainError && error.status === 'NOT_FOUND' ? notFound(notification.errorPrefix, id) : error;
      });
      const entities = (record.relatedEntities ?? []) as JsonObject[];
      return entities.filter((e) => e.refType === request.query.refType);
    },
  );
}
