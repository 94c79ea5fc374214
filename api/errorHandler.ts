// One error handler: every error of every route answers with the error body of the HTTP contract and a
// matching HTTP status; 5xx never leaks internals.

import { maxHeaderSize, STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DomainError, HttpStatus, malformedUuid, type ClientStatusName } from '../domain/shared/errors.ts';
import { issueLines, issuePath } from '../domain/shared/validation.ts';
import { routeTable } from './methodNotAllowed.ts';
import { traceIdOf } from './requestContext.ts';

export const ErrorBodySchema = z
  .object({
    status: z.string(),
    timestamp: z.string(),
    message: z.string(),
    traceId: z.string(),
    errors: z.array(z.string()),
    code: z
      .string()
      .meta({
        description:
          'Which error this is, from the catalogue (e.g. USER_GROUP_TYPE.CODE_TAKEN, REQUEST.IDEMPOTENCY_KEY_REUSED, REQUEST.STALE_VERSION): tells one 409 from another without reading the message.',
      }),
  })
  .meta({ id: 'Error', description: 'Body of every error response.' });
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

/** A request part that failed its schema; fastify adds its own fields to it, so it is a plain class. */
export class RequestValidationError extends Error {
  readonly part: string;
  readonly issues: readonly z.core.$ZodIssue[];
  readonly input: unknown;
  constructor(part: string, issues: readonly z.core.$ZodIssue[], input: unknown) {
    super('Request does not match the schema');
    this.part = part;
    this.issues = issues;
    this.input = input;
  }
}

const PART_PREFIX: Record<string, string> = { querystring: 'query', params: 'path', headers: 'header' };

/** The statuses under 500, which a framework refusal keeps as HTTP.<STATUS>. */
const byStatus = new Map<number, ClientStatusName>(
  Object.entries(HttpStatus)
    .filter(([, code]) => code < 500)
    .map(([name, code]) => [code, name as ClientStatusName]),
);

function fromValidation(error: RequestValidationError): DomainError {
  const prefix = PART_PREFIX[error.part];
  const lines = issueLines(error.issues, prefix === undefined ? [] : [prefix]);
  const isUuidIssue = (i: z.core.$ZodIssue) => i.code === 'invalid_format' && i.format === 'uuid';
  const [first] = error.issues;
  if (first !== undefined && error.issues.every(isUuidIssue)) {
    const value = first.path.reduce<unknown>((v, k) => (v as Record<PropertyKey, unknown> | undefined)?.[k], error.input);
    const e = malformedUuid(issuePath(first.path), typeof value === 'string' ? value : '');
    return new DomainError(
      e.code,
      e.message,
      lines.map((l) => l.replace(/: .*$/, ': expected type uuid')),
    );
  }
  return new DomainError('REQUEST.VALIDATION_FAILED', error.message, lines);
}

/** What is wrong with a JSON text, without quoting it: V8's messages may show a stretch of the
 * text, and a body may hold a password. */
export function jsonProblem(message: string): string {
  if (/Unexpected end/i.test(message)) return 'unexpected end of input';
  const what =
    /^(Expected [^"\n]{1,80}?|Unterminated string|Bad control character|Bad escaped character|Exponent part is missing a number|Unterminated fractional number|No number after minus sign)(?= in JSON| at|$)/.exec(
      message,
    )?.[1] ?? 'unexpected character';
  const at = /at position \d+(?: \(line \d+ column \d+\))?/.exec(message)?.[0];
  return at === undefined ? what : `${what} ${at}`;
}

export function toDomainError(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  if (error instanceof RequestValidationError) return fromValidation(error);
  const fe = error as Partial<FastifyError>;
  const code = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  const name = byStatus.get(code);
  if (code >= 400 && code < 500 && name) {
    const malformed = fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error instanceof SyntaxError;
    return new DomainError(`HTTP.${name}`, malformed ? `Malformed JSON: ${jsonProblem(fe.message ?? '')}` : (fe.message ?? name));
  }
  return new DomainError('HTTP.INTERNAL_SERVER_ERROR', 'Internal server error');
}

export function errorBody(error: DomainError, traceId: string, now: Date): ErrorBody {
  return {
    status: error.status,
    timestamp: now.toISOString(),
    message: error.message,
    traceId,
    errors: [...error.errors],
    code: error.code,
  };
}

export function installErrorHandling(app: FastifyInstance, now: () => Date): void {
  const routes = routeTable(app);
  const methodsOf = routes.methodsOf.bind(routes);
  app.addHook('onRequest', (request, reply, done) => {
    // Answered here, the request goes no further (a callback hook that replies calls no done).
    if (routes.shadowed(request)) answerNoRoute(request, reply, methodsOf, now);
    else done();
  });
  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    // No route took the request: what is wrong is the route, whatever its body (fastify refuses a
    // QUERY without Content-Type before the not-found handler runs).
    if (request.is404) {
      answerNoRoute(request, reply, methodsOf, now);
      return;
    }
    const domain = toDomainError(error);
    if (domain.retryAfterSeconds !== undefined) {
      // Overload is expected and says when to come back; it is not a failure of the service.
      void reply.header('retry-after', String(domain.retryAfterSeconds));
      if (domain.httpStatus >= 500) request.log.warn({ code: domain.code }, domain.message);
    } else if (domain.httpStatus >= 500) request.log.error({ err: error }, 'request failed');
    void reply
      .code(domain.httpStatus)
      .type('application/json')
      .send(errorBody(domain, request.traceId, now()));
  });
  app.setNotFoundHandler((request, reply) => {
    answerNoRoute(request, reply, methodsOf, now);
  });
}

function answerNoRoute(request: FastifyRequest, reply: FastifyReply, methodsOf: (url: string) => string[], now: () => Date): void {
  const allowed = methodsOf(request.url);
  if (allowed.length > 0) {
    // RFC 9110: a path that exists answers 405 naming the methods it has, not 404.
    const e = new DomainError('HTTP.METHOD_NOT_ALLOWED', `${request.method} is not a method of this path: it has ${allowed.join(', ')}`);
    void reply
      .code(405)
      .header('allow', allowed.join(', '))
      .type('application/json')
      .send(errorBody(e, request.traceId, now()));
    return;
  }
  // The path is not repeated: the caller has it, and an error body is no place to reflect input.
  const e = new DomainError('HTTP.NOT_FOUND', `No such route for ${request.method}: the routes are listed in /openapi.json`);
  void reply
    .code(404)
    .type('application/json')
    .send(errorBody(e, request.traceId, now()));
}

/** Fastify's messages for these carry the whole URL, which an answer must not echo back. */
function frameworkDomainError(error: FastifyError, url: string, maxParamLength: number): DomainError {
  switch (error.code) {
    case 'FST_ERR_BAD_URL':
      return new DomainError(
        'HTTP.BAD_REQUEST',
        url.startsWith('/')
          ? 'Malformed URL: invalid percent-encoding'
          : 'Malformed URL: the request target is neither a path nor an absolute URL',
      );
    case 'FST_ERR_MAX_PARAM_LENGTH':
      // A 400, as an over-long idOrCode below this length gets from its schema.
      return new DomainError('HTTP.BAD_REQUEST', `Malformed URL: a path parameter is longer than ${String(maxParamLength)} characters`);
    default: {
      const name = byStatus.get(error.statusCode ?? 500);
      if (name !== undefined && HttpStatus[name] < 500)
        return new DomainError(`HTTP.${name}`, `Request refused before routing (${error.code})`);
      return new DomainError('HTTP.INTERNAL_SERVER_ERROR', 'Internal server error');
    }
  }
}

/**
 * fastify's `frameworkErrors`: errors raised before routing, so before the onRequest hook gave the
 * request its trace id; the id is derived here the same way.
 */
export function frameworkErrorHandler(now: () => Date, maxParamLength: number) {
  return (error: FastifyError, request: FastifyRequest, reply: FastifyReply): void => {
    request.traceId = traceIdOf(request.headers.traceparent);
    const domain = frameworkDomainError(error, request.url, maxParamLength);
    if (domain.httpStatus >= 500) request.log.error({ err: error }, 'request failed');
    void reply
      .code(domain.httpStatus)
      .type('application/json')
      .send(errorBody(domain, request.traceId, now()));
  };
}

function clientDomainError(error: ConnectionError): DomainError {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return new DomainError(
        'HTTP.REQUEST_HEADER_FIELDS_TOO_LARGE',
        `Request line and headers are larger than ${String(maxHeaderSize)} bytes`,
      );
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return new DomainError('HTTP.PAYLOAD_TOO_LARGE', 'Chunk extensions of the request body are too large');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new DomainError('HTTP.REQUEST_TIMEOUT', 'The request did not arrive in time');
    default:
      // Parser codes (HPE_INVALID_METHOD, …) say what is wrong without repeating the request.
      return new DomainError('HTTP.BAD_REQUEST', `Malformed HTTP request (${error.code})`);
  }
}

/** Whether a response on this socket has begun: a second one written after it would corrupt the
 * stream, so Node's own handler writes nothing then, and neither does this one. */
const responseStarted = (socket: Socket): boolean =>
  (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage?.headersSent === true;

/**
 * fastify's `clientErrorHandler`: errors of Node's HTTP parser (oversized headers, a malformed
 * request), raised before fastify sees a request, answered as a raw response with the error body,
 * as fastify's default handler does with its own body. Bound to the fastify instance.
 */
/**
 * Requests Node's HTTP server answers by itself, without fastify: an `Expect` other than
 * 100-continue (Node's answer is an empty 417) and CONNECT (Node closes the socket without a word).
 * Both get the error body here.
 */
export function installServerAnswers(app: FastifyInstance, now: () => Date): void {
  const body = (e: DomainError): string => JSON.stringify(errorBody(e, traceIdOf(undefined), now()));
  app.server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const e = new DomainError('HTTP.EXPECTATION_FAILED', 'Only Expect: 100-continue is supported');
    const text = body(e);
    res.writeHead(417, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), connection: 'close' }).end(text);
  });
  app.server.on('connect', (_req: IncomingMessage, socket: Socket) => {
    const text = body(new DomainError('HTTP.METHOD_NOT_ALLOWED', 'CONNECT is not supported'));
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\nContent-Type: application/json\r\nContent-Length: ${String(Buffer.byteLength(text))}\r\nConnection: close\r\n\r\n${text}`,
    );
  });
}

export function clientErrorHandler(now: () => Date) {
  return function answerClientError(this: FastifyInstance, error: ConnectionError, socket: Socket): void {
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const domain = clientDomainError(error);
    // The request never reached fastify, so neither did its traceparent: a fresh id, logged with
    // the error so the answer can be traced.
    const traceId = traceIdOf(undefined);
    this.log.info({ err: error, traceId }, 'client error');
    if (socket.writable && !responseStarted(socket)) {
      const status = domain.httpStatus;
      const body = JSON.stringify(errorBody(domain, traceId, now()));
      socket.write(
        `HTTP/1.1 ${String(status)} ${STATUS_CODES[status] ?? domain.status}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${String(Buffer.byteLength(body))}\r\nConnection: close\r\n\r\n${body}`,
      );
    }
    socket.destroy(error);
  };
}
