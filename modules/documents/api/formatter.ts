// The formatter: previews of a template text, renders of a stored formatter template, and
// documents (HTML, PDF, office formats) generated from one, one or a batch at a time
// (domain/documents/generate.ts over the renderers of AppDeps.documents).

import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { CONTENT_TYPES, DocumentFormats } from '../domain/documents.ts';
import type { TemplateCaller } from '../../../domain/ports.ts';
import { inProcessTemplates } from '../domain/templateJobs.ts';
import { generateDocument, templateText, type TemplateVersion } from '../domain/generate.ts';
import { formatterTemplate } from '../../registries/domain/formatterTemplate.ts';
import { DomainError, notFound } from '../../../domain/shared/errors.ts';
import { isUuid } from '../../../domain/shared/ids.ts';
import { assertReadable } from '../../../api/access.ts';
import { toDomainError } from '../../../api/errorHandler.ts';
import { templateCallerOf } from '../../../api/requestContext.ts';
import { zodRoutes, type AppDeps, type ZodRoutes } from '../../../api/module.ts';
import { errors } from '../../../api/resourceRoutes.ts';

const tags = ['formatter'];
/** What the routes that evaluate templates say about a caller's share of the template threads (and
 * of the PDF pages and LibreOffice, for documents). */
const SHARE =
  "A caller (the token's subject) may have at most TEMPLATE_JOBS_PER_CALLER (2) template evaluations waiting or running at once, and as many " +
  'PDF renders and as many office conversions: beyond, 429 `FORMATTER.TOO_MANY_RENDERS_OF_CALLER` with `Retry-After`; a full queue is a 503 ' +
  '`FORMATTER.RENDERER_BUSY` with `Retry-After`.';
/** The largest template text a preview takes (as a stored template's content). */
export const MAX_TEMPLATE_CHARS = 500_000;

const templateVersion = z
  .string()
  .regex(/^\d{1,9}$/, { error: 'expected a version: decimal digits' })
  .transform(Number)
  .optional()
  .meta({
    description:
      'render the template as it stood at this version of its stream (its auditInfo.version then): the same data gives the same output',
  });

const data = z.record(z.string(), z.unknown()).meta({ description: 'the data the template is rendered over (a JSON object)' });

/** The text a stored template gives for some data, and the content type it is sent with. */
async function renderTemplate(
  template: TemplateVersion,
  input: unknown,
  deps: AppDeps,
  caller: TemplateCaller,
): Promise<{ text: string; type: string }> {
  const type = template.documentType === 'SOURCE' ? 'text/plain; charset=utf-8' : 'text/html; charset=utf-8';
  return { text: await templateText(template, input, deps.documents ?? {}, caller), type };
}

function previewRoute(r: ZodRoutes, deps: AppDeps): void {
  r.post(
    '/api/v1/formatter/preview',
    {
      config: { permission: 'read' },
      schema: {
        tags,
        summary: 'Render a template text over data, as HTML',
        description:
          'The text is a handlebars template, rendered with HTML escaping; helpers: formatDate (value, time zone, locale; dateStyle, timeStyle), ' +
          'formatNumber (value, locale; minimumFractionDigits, maximumFractionDigits, style, currency), eq, default, join, upper, lower. No partials, ' +
          'decorators or lookups; nothing but the data given is reachable. A text that does not compile is a 400 naming its line and column; one that ' +
          'fails on the data (a bad time zone) a 422. ' +
          SHARE,
        body: z.strictObject({ data: data.optional(), content: z.string().max(MAX_TEMPLATE_CHARS) }),
        response: {
          200: { description: 'The rendered HTML', content: { 'text/html': { schema: z.string() } } },
          ...errors(400, 413, 422, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { content } = request.body;
      const key = `preview:${createHash('sha256').update(content).digest('hex')}`;
      const html = await (deps.documents?.templates ?? inProcessTemplates).text(
        { kind: 'handlebars', key, version: 0, source: content, data: request.body.data ?? {}, mode: 'html' },
        templateCallerOf(request),
      );
      await reply.type('text/html; charset=utf-8').send(html);
    },
  );
}

/** A template by code (never by id), now or at a version of its stream, as the caller may read
 * it; every way of not finding it is the same 404, naming the code asked. */
function templateSource(deps: AppDeps) {
  const templates = deps.runtime.service(formatterTemplate);
  return async (request: FastifyRequest, code: string, version: number | undefined): Promise<TemplateVersion> => {
    try {
      if (version !== undefined && isUuid(code)) throw notFound(formatterTemplate.errorPrefix, code);
      const stored = version === undefined ? await templates.getByCode(code) : await templates.get(code, { version });
      return (await assertReadable(deps, request, formatterTemplate, stored)) as unknown as TemplateVersion;
    } catch (error) {
      if (error instanceof DomainError && error.status === 'NOT_FOUND') throw notFound(formatterTemplate.errorPrefix, code);
      throw error;
    }
  };
}

function renderRoute(r: ZodRoutes, deps: AppDeps): void {
  const templateAt = templateSource(deps);
  r.post(
    '/api/v1/formatter/templates/:templateCode/render',
    {
      config: { permission: 'read', resource: formatterTemplate },
      schema: {
        tags,
        summary: 'Render a stored template over the body as data',
        description:
          'HTML templates through handlebars (HTML-escaped unless the documentType is SOURCE), SCRIPT templates as a JSONata expression evaluated ' +
          'over the data (never run as code; at most 1 s and 500 nested calls) whose result must be text. SOURCE documents answer text/plain, the ' +
          'others text/html. Unknown code: 404; a FILE template: 422 (it makes documents, not text). The template is read from the log. ' +
          '`X-Template-Version` names the version rendered and `ETag` is the SHA-256 of the text: the same version and data give the same text, ' +
          'and `?templateVersion=` renders an older version as it stood. ' +
          SHARE,
        params: z.strictObject({ templateCode: z.string().min(1).max(255) }),
        querystring: z.strictObject({ templateVersion }),
        body: data,
        response: {
          200: {
            description: 'The rendered text: text/plain for SOURCE documents, else text/html',
            content: { 'text/html': { schema: z.string() }, 'text/plain': { schema: z.string() } },
          },
          ...errors(400, 404, 413, 422, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const template = await templateAt(request, request.params.templateCode, request.query.templateVersion);
      const { text, type } = await renderTemplate(template, request.body, deps, templateCallerOf(request));
      const etag = `"${createHash('sha256').update(text).digest('hex')}"`;
      await reply.type(type).header('x-template-version', String(template.auditInfo.version)).header('etag', etag).send(text);
    },
  );
}

/** The largest JSON body of a document request (its data; a batch's items together). */
export const MAX_DOCUMENT_DATA_BYTES = 2 * 1024 * 1024;
/** The most documents one batch asks for; more is a 413. */
export const MAX_BATCH_DOCUMENTS = 100;
/** Documents of one batch rendered at once: a batch takes no more of the renderers than this. */
const BATCH_PARALLELISM = 2;

const format = z.enum(DocumentFormats).default('pdf').meta({ description: "the document's format (default pdf)" });

const sha256Tag = (bytes: Uint8Array): string => `"${createHash('sha256').update(bytes).digest('hex')}"`;
const wantsJson = (request: FastifyRequest): boolean => /^\s*application\/json\s*(;|,|$)/i.test(request.headers.accept ?? '');

/** A document's answer: its bytes in the format's content type, or their base64 as JSON. */
const documentContent: Record<string, { schema: z.ZodType }> = {
  'application/json': { schema: z.string().meta({ description: 'the document in base64' }) },
  ...Object.fromEntries(
    [...new Set(Object.values(CONTENT_TYPES))].map((type) => [
      type.split(';')[0] ?? type,
      { schema: z.string().meta({ format: 'binary' }) },
    ]),
  ),
};

function documentRoute(r: ZodRoutes, deps: AppDeps): void {
  const templateAt = templateSource(deps);
  r.post(
    '/api/v1/formatter/documents/:documentTemplateCode',
    {
      bodyLimit: MAX_DOCUMENT_DATA_BYTES,
      config: { permission: 'read', resource: formatterTemplate },
      schema: {
        tags,
        summary: 'Generate a document from a formatter template and the body as data',
        description:
          'HTML and SCRIPT templates render their text (see the render route), which is the document for `html`, printed by Chromium for `pdf` ' +
          '(paper from documentSize: A4, LETTER, B5 = ISO B5 176 × 250 mm, PORTRAIT/LANDSCAPE = A4 in that orientation, AUTO = A4), and converted by ' +
          "LibreOffice for `docx`, `doc`, `odt` and, from the HTML's tables, `xlsx`, `xls`, `ods`. FILE templates hold a DOCX, XLSX, ODT or ODS in base64 " +
          'whose `{{placeholders}}` are filled from the data (a DOCX by docxtemplater, with `{{#list}}…{{/list}}` loops; an XLSX cell by cell as ' +
          'handlebars; ODT and ODS through DOCX and XLSX), then converted when the format differs. ' +
          'Nothing in a template can fetch anything: no script runs and no URL but `data:` loads. The answer is the file with its content type and ' +
          'a `Content-Disposition` file name, or with `Accept: application/json` a JSON string of its base64. `X-Template-Version` is the version ' +
          'rendered and `ETag` the SHA-256 of the bytes: the same version and data give the same bytes, and `?templateVersion=` regenerates a ' +
          'document as an older version made it. Limits: data ' +
          `${String(MAX_DOCUMENT_DATA_BYTES / 1024 / 1024)} MiB (413). ` +
          'A busy renderer or one past its time limit answers 503 with `Retry-After`; a format whose renderer is not installed, 503 saying how to install it. ' +
          SHARE,
        params: z.strictObject({ documentTemplateCode: z.string().min(1).max(255) }),
        querystring: z.strictObject({ format, templateVersion }),
        body: data,
        response: {
          200: {
            description: "The document in its format's content type, or with `Accept: application/json` its base64 as a JSON string",
            content: documentContent,
          },
          ...errors(400, 404, 413, 422, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const template = await templateAt(request, request.params.documentTemplateCode, request.query.templateVersion);
      const document = await generateDocument(
        template,
        request.body,
        request.query.format,
        deps.documents ?? {},
        templateCallerOf(request),
      );
      void reply.header('x-template-version', String(template.auditInfo.version)).header('etag', sha256Tag(document.bytes));
      if (wantsJson(request))
        return reply.type('application/json; charset=utf-8').send(JSON.stringify(Buffer.from(document.bytes).toString('base64')));
      void reply.header('content-disposition', `attachment; filename="${document.fileName}"`).header('x-content-type-options', 'nosniff');
      return reply.type(document.contentType).send(Buffer.from(document.bytes));
    },
  );
}

const batchItem = z.strictObject({
  documentId: z.string().min(1).max(255).meta({ description: "the caller's name for the document, answered with it" }),
  documentTemplateCode: z.string().min(1).max(255),
  data: data.optional(),
  templateVersion: z.number().int().min(0).optional().meta({ description: 'the template as it stood at this version' }),
});

const batchResult = z.union([
  z.strictObject({
    documentId: z.string(),
    data: z.string().meta({ description: 'the document in base64' }),
    contentType: z.string(),
    fileName: z.string(),
    templateVersion: z.number().int(),
    etag: z.string().meta({ description: 'SHA-256 of the bytes, quoted as an ETag' }),
  }),
  z.strictObject({
    documentId: z.string(),
    error: z
      .strictObject({ status: z.string(), code: z.string(), message: z.string(), errors: z.array(z.string()) })
      .meta({ description: 'why this document was not made; the others still were' }),
  }),
]);

function batchRoute(r: ZodRoutes, deps: AppDeps): void {
  const templateAt = templateSource(deps);
  r.post(
    '/api/v1/formatter/documents',
    {
      bodyLimit: MAX_DOCUMENT_DATA_BYTES,
      config: { permission: 'read', resource: formatterTemplate },
      schema: {
        tags,
        summary: 'Generate several documents in one format',
        description:
          `Each item is made as by the single-document route, ${String(BATCH_PARALLELISM)} at a time, and answered in the order asked with its ` +
          "document in base64, or with an `error` (the error body's status, code, message and errors) when that one failed: an unknown template, " +
          `data it cannot render, a busy renderer. At most ${String(MAX_BATCH_DOCUMENTS)} items (413 beyond) and ${String(MAX_DOCUMENT_DATA_BYTES / 1024 / 1024)} MiB of JSON.`,
        querystring: z.strictObject({ format }),
        body: z.array(batchItem),
        response: { 200: z.array(batchResult), ...errors(400, 413) },
      },
    },
    async (request) => {
      const items = request.body;
      if (items.length > MAX_BATCH_DOCUMENTS) {
        throw new DomainError(
          'FORMATTER.BATCH_TOO_LARGE',
          `At most ${String(MAX_BATCH_DOCUMENTS)} documents per batch, got ${String(items.length)}`,
        );
      }
      return mapBounded(items, BATCH_PARALLELISM, async (item) => {
        try {
          const template = await templateAt(request, item.documentTemplateCode, item.templateVersion);
          const document = await generateDocument(
            template,
            item.data ?? {},
            request.query.format,
            deps.documents ?? {},
            templateCallerOf(request),
          );
          return {
            documentId: item.documentId,
            data: Buffer.from(document.bytes).toString('base64'),
            contentType: document.contentType,
            fileName: document.fileName,
            templateVersion: template.auditInfo.version,
            etag: sha256Tag(document.bytes),
          };
        } catch (error) {
          const e = toDomainError(error);
          if (e.httpStatus >= 500 && e.retryAfterSeconds === undefined)
            request.log.error({ err: error, documentId: item.documentId }, 'document failed');
          return { documentId: item.documentId, error: { status: e.status, code: e.code, message: e.message, errors: [...e.errors] } };
        }
      });
    },
  );
}

/** `work` over every item, at most `parallel` at once, the results in the items' order. */
async function mapBounded<T, R>(items: readonly T[], parallel: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(parallel, items.length) }, lane));
  return results;
}

/** The formatter's routes: preview, render, a document, a batch. */
export function formatterRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = zodRoutes(app);
  previewRoute(r, deps);
  renderRoute(r, deps);
  documentRoute(r, deps);
  batchRoute(r, deps);
}
