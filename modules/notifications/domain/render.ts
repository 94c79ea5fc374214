// How a notification is made from its template, whoever asks: the create route (with the caller's
// read access to the templates) and the trigger reactor (the service's own work). The template must
// be ACTIVE; subject and contents are rendered by the formatter's engine (in the template worker
// when the service has one), the content through the template's formatter template when it names
// one; attachments go to the blob store; and what was rendered is checked as the record it makes.

import { z } from 'zod';
import { templateText, type TemplateVersion } from '../../documents/domain/generate.ts';
import { inProcessTemplates } from '../../documents/domain/templateJobs.ts';
import type { BlobStore, DocumentRenderers, TemplateCaller } from '../../../domain/ports.ts';
import type { ResourceDefinition, ResourceRecordLike } from '../../../domain/resource/defineResource.ts';
import { formatterTemplate } from '../../registries/domain/formatterTemplate.ts';
import { notificationTemplate } from '../../registries/domain/notificationTemplate.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import { jsonMap, text, uuid } from '../../../domain/shared/fields.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { ATTACHMENT_TYPES, checkedAttachments, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS } from './attachments.ts';
import { notification, notificationTarget, relatedEntity } from './notification.ts';

export const createPayload = z.strictObject({
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
export type CreatePayload = z.infer<typeof createPayload>;

type Template = JsonObject & { id: string; auditInfo: { version: number } };

/** Reads of single records, by resource (the resource services of the runtime). */
export type RecordReads = {
  service(def: ResourceDefinition): { get(id: string): Promise<ResourceRecordLike>; getByCode(code: string): Promise<ResourceRecordLike> };
};

export type RenderEnv = {
  records: RecordReads;
  blobStore: BlobStore;
  documents?: DocumentRenderers | undefined;
  /** Whose rendering it is: the caller's (its share of the template threads) or the service's. */
  caller: TemplateCaller;
  /** The caller's read access to a template (NOT_FOUND when it may not read it); absent for the
   * service's own work. */
  readable?: (def: ResourceDefinition, record: ResourceRecordLike) => Promise<ResourceRecordLike>;
};

export const missingTemplate = (code: string): DomainError =>
  new DomainError('NOTIFICATION.REFERENCE_NOT_FOUND', `No notification template ${JSON.stringify(code)}`, [
    `templateCode: ${code} does not exist`,
  ]);

const missingFormatterTemplate = (code: string, id: string): DomainError =>
  new DomainError('NOTIFICATION.REFERENCE_NOT_FOUND', `Notification template ${JSON.stringify(code)} names no formatter template`, [
    `templateCode: ${code} names formatterDocumentTemplateId ${id}, which does not exist`,
  ]);

const inactive = (code: string): DomainError =>
  new DomainError('NOTIFICATION.TEMPLATE_NOT_ACTIVE', `Notification template ${JSON.stringify(code)} is not ACTIVE`, [
    `templateCode: ${code} is not ACTIVE`,
  ]);

const asMissing =
  (code: string) =>
  (error: unknown): never => {
    if (error instanceof DomainError && error.status === 'NOT_FOUND') throw missingTemplate(code);
    throw error;
  };

/** The notification template of a code, ACTIVE and readable (422 otherwise: a template one may not
 * read is answered as one that does not exist). */
async function activeTemplate(env: RenderEnv, code: string): Promise<Template> {
  const found = await env.records.service(notificationTemplate).getByCode(code).catch(asMissing(code));
  const readable = env.readable === undefined ? found : await env.readable(notificationTemplate, found).catch(asMissing(code));
  if (readable.status !== 'ACTIVE') throw inactive(code);
  return readable as Template;
}

/** The contents: through the template's formatter template when it names one (the override over
 * the data), else its own content (as text for SMS, HTML-escaped otherwise). */
async function contentsOf(env: RenderEnv, template: Template, payload: CreatePayload, extra: JsonObject): Promise<string | undefined> {
  const data = { ...(payload.data ?? {}), ...extra };
  if (typeof template.formatterDocumentTemplateId === 'string') {
    const id = template.formatterDocumentTemplateId;
    // The request names the notification template; a formatter template it names that is gone (or
    // that the caller may not read) is a 422 of that reference, not a 404 of the request.
    const missing = (error: unknown): never => {
      if (error instanceof DomainError && error.status === 'NOT_FOUND') throw missingFormatterTemplate(String(template.code), id);
      throw error;
    };
    const found = await env.records.service(formatterTemplate).get(id).catch(missing);
    const document = env.readable === undefined ? found : await env.readable(formatterTemplate, found).catch(missing);
    return templateText(
      document as unknown as TemplateVersion,
      { ...data, ...(payload.formatterDocumentTemplateDataOverride ?? {}) },
      env.documents ?? {},
      env.caller,
    );
  }
  if (typeof template.content !== 'string') return undefined;
  const mode = template.deliveryType === 'SMS' ? 'text' : 'html';
  return (env.documents?.templates ?? inProcessTemplates).text(
    { kind: 'handlebars', key: `${template.id}:content`, version: template.auditInfo.version, source: template.content, data, mode },
    env.caller,
  );
}

const optional = (key: string, value: unknown) => (value === undefined ? {} : { [key]: value });

/** The notification a payload makes (its id, when given, included): its template ACTIVE, subject
 * and contents rendered, attachments stored, and the result checked as a record (422
 * NOTIFICATION.RENDERED_INVALID naming the fields, prefixed with `at` in an array). `extra` is
 * rendered over the data but not kept in the notification's `data`. */
export async function renderNotification(env: RenderEnv, payload: CreatePayload, at = '', extra: JsonObject = {}): Promise<JsonObject> {
  const template = await activeTemplate(env, payload.templateCode);
  const version = template.auditInfo.version;
  const renderedSubject = async (source: string) =>
    (env.documents?.templates ?? inProcessTemplates).text(
      { kind: 'handlebars', key: `${template.id}:subject`, version, source, data: { ...(payload.data ?? {}), ...extra }, mode: 'text' },
      env.caller,
    );
  const subject = payload.subject ?? (typeof template.subject === 'string' ? await renderedSubject(template.subject) : undefined);
  const contents = await contentsOf(env, template, payload, extra);
  // Checked before anything is stored; each blob is written before the event that names it.
  const attachments = await Promise.all(
    checkedAttachments(payload.attachments ?? []).map(async (a) => {
      const ref = await env.blobStore.put(a.bytes, a.mimeType);
      return { name: a.name, mimeType: a.mimeType, size: ref.size, sha256: ref.sha256 };
    }),
  );
  const { id, subject: _subject, attachments: _attachments, ...rest } = payload;
  const fields: JsonObject = {
    ...rest,
    ...optional('subject', subject),
    ...optional('contents', contents),
    ...(attachments.length === 0 ? {} : { attachments }),
    ...optional('from', payload.from ?? (typeof template.from === 'string' ? template.from : undefined)),
    ...optional('deliveryType', template.deliveryType),
    status: 'PLAN',
    params: {
      templateVersion: version,
      ...optional('deliveryType', template.deliveryType),
      ...optional('expiration', template.expiration),
    },
  };
  // A 422: the template made it so, not the request.
  const checked = notification.fields.safeParse(fields);
  if (!checked.success) {
    throw new DomainError(
      'NOTIFICATION.RENDERED_INVALID',
      'The template made a notification that is not valid',
      checked.error.issues.map((issue) => `${at}${issue.path.join('.')}: ${issue.message}`),
    );
  }
  return { ...optional('id', id), ...fields };
}
