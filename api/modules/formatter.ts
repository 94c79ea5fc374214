// The formatter: previews of a template text and renders of a stored formatter template, through
// the one template engine (domain/documents/templates.ts). Documents in PDF and office formats
// come with the renderers (issue 10's next parts).

import { createHash } from 'node:crypto';
import { z } from 'zod';
import { renderHandlebars, renderJsonata } from '../../domain/documents/templates.ts';
import { formatterTemplate } from '../../domain/registries/formatterTemplate.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import type { JsonObject } from '../../domain/shared/json.ts';
import { assertReadable } from '../access.ts';
import { zodRoutes, type AppDeps, type Module, type ZodRoutes } from '../module.ts';
import { errors } from '../resourceRoutes.ts';
import { serviceOf } from '../services.ts';

const tags = ['formatter'];
/** The largest template text a preview takes (as a stored template's content). */
export const MAX_TEMPLATE_CHARS = 500_000;

const data = z.record(z.string(), z.unknown()).meta({ description: 'the data the template is rendered over (a JSON object)' });

/** The text a stored template gives for some data, and the content type it is sent with. */
export async function renderTemplate(template: JsonObject & { id: string; auditInfo: { version: number } }, input: unknown): Promise<{ text: string; type: string }> {
  const content = typeof template.content === 'string' ? template.content : '';
  const type = template.documentType === 'SOURCE' ? 'text/plain; charset=utf-8' : 'text/html; charset=utf-8';
  switch (template.inputType) {
    case 'HTML':
      return { text: renderHandlebars({ key: template.id, version: template.auditInfo.version }, content, input, template.documentType === 'SOURCE' ? 'text' : 'html'), type };
    case 'SCRIPT':
      return { text: await renderJsonata(content, input), type };
    default:
      throw new DomainError('FORMATTER.NOT_RENDERABLE', 'UNPROCESSABLE_ENTITY', `A ${String(template.inputType)} template is not text: generate a document from it instead`, [
        'inputType: FILE templates are office files filled with the data (POST /api/v1/formatter/documents/{code})',
      ]);
  }
}

function previewRoute(r: ZodRoutes): void {
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
          'fails on the data (a bad time zone) a 422.',
        body: z.strictObject({ data: data.optional(), content: z.string().max(MAX_TEMPLATE_CHARS) }),
        response: { 200: z.string().meta({ description: 'text/html' }), ...errors(400, 413, 422) },
      },
    },
    async (request, reply) => {
      const { content } = request.body;
      const key = `preview:${createHash('sha256').update(content).digest('hex')}`;
      const html = renderHandlebars({ key, version: 0 }, content, request.body.data ?? {}, 'html');
      await reply.type('text/html; charset=utf-8').send(html);
    },
  );
}

function renderRoute(r: ZodRoutes, deps: AppDeps): void {
  const templates = serviceOf(deps, formatterTemplate);
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
          'and `?templateVersion=` renders an older version as it stood.',
        params: z.strictObject({ templateCode: z.string().min(1).max(255) }),
        querystring: z.strictObject({
          templateVersion: z
            .string()
            .regex(/^\d{1,9}$/, { error: 'expected a version: decimal digits' })
            .transform(Number)
            .optional()
            .meta({ description: 'render the template as it stood at this version of its stream (its auditInfo.version then): the same data gives the same text' }),
        }),
        body: data,
        response: { 200: z.string().meta({ description: 'text/html or text/plain' }), ...errors(400, 404, 413, 422) },
      },
    },
    async (request, reply) => {
      const { templateCode } = request.params;
      const { templateVersion } = request.query;
      const stored = templateVersion === undefined ? await templates.getByCode(templateCode) : await templates.get(templateCode, { version: templateVersion });
      const template = await assertReadable(deps, request, formatterTemplate, stored);
      const { text, type } = await renderTemplate(template, request.body);
      const etag = `"${createHash('sha256').update(text).digest('hex')}"`;
      await reply.type(type).header('x-template-version', String(template.auditInfo.version)).header('etag', etag).send(text);
    },
  );
}

export const formatterModule: Module = {
  name: 'formatter',
  routes(app, deps) {
    const r = zodRoutes(app);
    previewRoute(r);
    renderRoute(r, deps);
  },
};
