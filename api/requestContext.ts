// Per-request identity: request, correlation and trace ids (echoed back, stored in every event the
// request writes), the authenticated caller, and the command context handed to the domain.

import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import { validationFailed } from '../domain/shared/errors.ts';
import type { Clock, IdGenerator, TemplateCaller } from '../domain/ports.ts';
import { activeTraceId } from '../workers/tracing.ts';
import { allows, type Caller } from './auth.ts';

declare module 'fastify' {
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions -- module augmentation merges only into an interface
  interface FastifyRequest {
    traceId: string;
    correlationId: string;
    caller: Caller | undefined;
  }
}

const HEADER_ID = /^[\x21-\x7e]{1,200}$/;

export const headerId = (value: unknown): string | undefined => (typeof value === 'string' && HEADER_ID.test(value) ? value : undefined);

export const genReqId = (req: { headers: Record<string, unknown> }): string => headerId(req.headers['x-request-id']) ?? randomUUID();

/** The trace id of a W3C `traceparent` header, or a fresh one when it is absent or malformed. */
export function traceIdOf(traceparent: unknown): string {
  const m = typeof traceparent === 'string' ? /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(traceparent) : null;
  // W3C trace context: version ff, and an all-zero trace or parent id, are invalid: ignored.
  const valid = m?.[1] !== 'ff' && m?.[2] !== ZERO_TRACE && m?.[3] !== ZERO_PARENT;
  // randomUUID draws from a pooled entropy buffer; randomBytes per request cost a tenth of a read.
  return valid && m?.[2] !== undefined ? m[2] : randomUUID().replaceAll('-', '');
}

/** The API's contract (openapi.json) gives the id headers 1..200 printable ASCII characters: a
 * value outside it is refused, not silently replaced by a generated id the caller would not know. */
function malformedIdHeader(request: FastifyRequest): Error | undefined {
  const wrong = ['x-request-id', 'x-correlation-id'].filter(
    (name) => request.headers[name] !== undefined && headerId(request.headers[name]) === undefined,
  );
  if (wrong.length === 0) return undefined;
  return validationFailed(
    'Invalid request id header',
    wrong.map((name) => `header.${name}: 1..200 printable ASCII characters`),
  );
}

const ZERO_TRACE = '0'.repeat(32);
const ZERO_PARENT = '0'.repeat(16);

export function installRequestContext(app: FastifyInstance): void {
  app.decorateRequest('traceId', '');
  app.decorateRequest('correlationId', '');
  app.decorateRequest('caller', undefined);
  // With traces on (the preload registered @fastify/otel, which decorates every request), the id is
  // that of the request's span: the caller's when its traceparent is valid, else the one the SDK
  // drew. Decided once here, so with telemetry off a request does exactly what it did without it.
  const tracing = app.hasRequestDecorator('opentelemetry');
  app.addHook('onRequest', (request, reply, done) => {
    request.traceId = (tracing ? activeTraceId() : undefined) ?? traceIdOf(request.headers.traceparent);
    request.correlationId = headerId(request.headers['x-correlation-id']) ?? request.id;
    void reply.header('x-request-id', request.id).header('x-correlation-id', request.correlationId);
    done(request.url.startsWith('/api/') ? malformedIdHeader(request) : undefined);
  });
}

/** A request's template work is its caller's: within the caller's share of the template threads. */
export const templateCallerOf = (request: FastifyRequest): TemplateCaller => ({ subject: request.caller?.sub ?? 'anonymous' });

export function commandContext(request: FastifyRequest, clock: Clock, newId: IdGenerator): CommandContext {
  const ctx: CommandContext = {
    actor: request.caller?.sub ?? 'anonymous',
    now: clock.now(),
    newId,
    requestId: request.id,
    correlationId: request.correlationId,
    privileged: request.caller !== undefined && allows(request.caller, 'admin'),
  };
  const key = request.headers['idempotency-key'];
  if (key !== undefined) {
    if (typeof key !== 'string' || !HEADER_ID.test(key)) {
      throw validationFailed('Invalid Idempotency-Key', ['header.idempotency-key: 1..200 printable ASCII characters']);
    }
    // The request's hash is the service's to make: it knows the record the request means.
    ctx.idempotencyKey = key;
  }
  return ctx;
}

/** `If-Match: "3"` (or W/"3", or 3) pins the version a write applies to; `*` pins nothing. */
export function ifMatchVersion(request: FastifyRequest): number | undefined {
  const raw = request.headers['if-match'];
  if (raw === undefined || raw.trim() === '*') return undefined;
  const m = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(raw);
  if (!m?.[1]) throw validationFailed('Invalid If-Match', ['header.if-match: expected "<version>"']);
  return Number(m[1]);
}
