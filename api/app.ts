// The fastify application. Every dependency arrives as an argument; only the composition root
// (main.ts) knows which adapters run.

import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { jsonSchemaTransform, jsonSchemaTransformObject, serializerCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { unavailable } from '../domain/shared/errors.ts';
import { authorizeResource } from './access.ts';
import { allows, authenticate, authorize, type Caller, type Permission } from './auth.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { clientErrorHandler, ErrorBodySchema, frameworkErrorHandler, installErrorHandling, installServerAnswers } from './errorHandler.ts';
import type { AppDeps } from './module.ts';
import { installJsonParsing } from './jsonBody.ts';
import { withProtocol } from './openapiProtocol.ts';
import { resourceRoutes } from './resourceRoutes.ts';
import { genReqId, installRequestContext } from './requestContext.ts';
import { validatorCompiler } from './validation.ts';

declare module 'fastify' {
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions -- module augmentation merges only into an interface
  interface FastifyContextConfig {
    permission?: Permission;
    /** Without a permission: the route still needs a caller (a bearer token, or what a module
     * recognises), and decides the rest itself (the logout, a user's own password). */
    signedIn?: boolean;
    /** The resource whose records the route serves: a caller without the built-in permission
     * may still reach it through access rules naming it. */
    resource?: ResourceDefinition;
    /** Values a JSON body of this route may hold, when more than the default (api/jsonBody.ts):
     * the bodies of export/diff and diff/apply carry whole data sets. */
    maxJsonValues?: number;
  }
}

const MAX_PARAM_LENGTH = 2048;

/** Open: liveness, and readiness with each read model's position and lag. */
function healthRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.get('/health/live', { schema: { tags: ['health'], security: [], response: { 200: z.object({ status: z.literal('UP') }) } } }, () => ({
    status: 'UP' as const,
  }));
  r.get(
    '/health/ready',
    {
      schema: {
        tags: ['health'],
        security: [],
        response: {
          200: z.object({
            status: z.literal('UP'),
            head: z.string(),
            readModels: z.array(
              z.object({
                name: z.string(),
                active: z
                  .boolean()
                  .meta({ description: 'this instance holds the projection lease and writes the model; false = standing by' }),
                position: z.string(),
                lag: z.int(),
                lagMs: z.number(),
                skipped: z.int(),
              }),
            ),
          }),
          503: ErrorBodySchema,
        },
      },
    },
    async () => {
      const head = await deps.eventStore.headPosition().catch((e: unknown) => {
        throw unavailable('HEALTH.EVENT_STORE', `Event store unreachable: ${e instanceof Error ? e.message : String(e)}`);
      });
      await deps.readStore.checkpoint('health').catch((e: unknown) => {
        throw unavailable('HEALTH.READ_STORE', `Read store unreachable: ${e instanceof Error ? e.message : String(e)}`);
      });
      return {
        status: 'UP' as const,
        head: head.toString(),
        readModels: deps.readModels
          .statuses()
          .map(({ name, active, position, lag, lagMs, failures }) => ({ name, active, position, lag, lagMs, skipped: failures.length })),
      };
    },
  );
}

/** The caller a request without a bearer token presents otherwise (a client certificate), by the
 * first module that recognises it. */
async function presentedCaller(request: FastifyRequest, deps: AppDeps): Promise<Caller | undefined> {
  for (const module of deps.modules) {
    const caller = await module.presented?.(request, deps);
    if (caller !== undefined) return caller;
  }
  return undefined;
}

export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const app = Fastify({
    logger: deps.logger ?? false,
    genReqId,
    requestIdHeader: false,
    bodyLimit: deps.bodyLimit ?? 6 * 1024 * 1024,
    trustProxy: deps.trustProxy ?? false,
    // Long enough that an over-long idOrCode reaches its schema and gets the contract's 400.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Errors fastify raises before routing (a malformed URL) and those of Node's HTTP parser
    // (oversized headers) answer with the error body too.
    frameworkErrors: frameworkErrorHandler(() => deps.clock.now(), MAX_PARAM_LENGTH),
    clientErrorHandler: clientErrorHandler(() => deps.clock.now()),
    // A body that never finishes is answered 408 (fastify's default is to wait for ever).
    requestTimeout: 30_000,
    ajv: { customOptions: { removeAdditional: false } },
    // fastify types an HTTPS server as another server type; to everything here it is an http.Server.
    ...(deps.https === undefined ? {} : ({ https: deps.https } as object)),
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  installJsonParsing(app);
  installRequestContext(app);
  installErrorHandling(app, () => deps.clock.now());
  installServerAnswers(app, () => deps.clock.now());

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Administration API',
        version: '1.0.0',
        description:
          'Event-sourced administration back end: every write is an event; `auditInfo.version` is the stream revision. ' +
          'Single-record reads reflect every acknowledged write; search, count and list may lag by the projection lag ' +
          '(use `X-Event-Position` with `?minPosition=`, or `?immediatelyRefresh=true` on writes). ' +
          'A JSON body is refused with 400 when it holds a number that cannot be stored exactly (an integer beyond ' +
          '±9007199254740991, more digits than a double keeps, a value out of its range, -0), an object with a ' +
          'duplicate key, or a member named `__proto__` (or `prototype` in a `constructor` object), naming its path; send such numbers as strings. ' +
          'Roles: `admin` (everything), `editor` (read and write records), `viewer` (read), `auditor` (read, and the audit feed). Any other role that equals the code of an access rule ' +
          'valid now grants READ or READ_WRITE on the resource its `entityName` names, on every record (`fullAccess`) or on those its `expression` ' +
          '(filter items) matches: reads see only covered records (an uncovered one is 404), writes need READ_WRITE coverage of the record before and ' +
          'after (else 403), and a resource no rule names is 403.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' },
          // OpenAPI 3.1's mutualTLS scheme, which the typings of @fastify/swagger (openapi-types) predate.
          clientCertificate: {
            type: 'mutualTLS',
            description:
              'Only where the service listens with HTTPS and asks for client certificates (TLS_CLIENT_CA; docs/pki.md): a request without a bearer token is the user ' +
              'with authentication PKI whose code the certificate names (TLS_CLIENT_USER_FIELD, default the subject CN), if that user is ENABLE and inside its validity, ' +
              'with its effective roles. A certificate that is absent, expired, revoked, from another CA, or names no such user: 401 AUTH.CERTIFICATE_REJECTED.',
          } as unknown as { type: 'http'; scheme: string },
        },
      },
      security: [{ bearer: [] }, { clientCertificate: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: (document) => withProtocol(jsonSchemaTransformObject(document) as Record<string, unknown>),
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, () => app.swagger());

  app.addHook('onRequest', async (request) => {
    const { permission, signedIn } = request.routeOptions.config;
    if (permission === undefined && signedIn !== true) return;
    let caller =
      (request.headers.authorization === undefined ? await presentedCaller(request, deps) : undefined) ??
      (await authenticate(request.headers.authorization, deps.verifyToken));
    for (const module of deps.modules) if (module.authenticated !== undefined) caller = await module.authenticated(caller, deps, request);
    request.caller = caller;
    if (permission === undefined) return;
    const resource = request.routeOptions.config.resource;
    if (resource === undefined || allows(caller, permission)) authorize(caller, permission);
    else await authorizeResource(deps, request, resource, permission);
  });

  healthRoutes(app, deps);
  if (deps.serveApi === false) return app;
  for (const module of deps.modules) {
    for (const served of module.resources ?? []) resourceRoutes(app, served.definition, deps, served.routes);
    module.routes?.(app, deps);
  }
  return app;
}
