// One error handler: every error of every route answers with the error body of API.md and a
// matching HTTP status; 5xx never leaks internals.

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { DomainError, HttpStatus, malformedUuid, type StatusName } from '../domain/shared/errors.ts';
import { issueLines, issuePath } from '../domain/shared/validation.ts';

export const ErrorBodySchema = z
  .object({
    status: z.string(),
    timestamp: z.string(),
    message: z.string(),
    traceId: z.string(),
    errors: z.array(z.string()),
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

const byStatus = new Map<number, StatusName>(
  Object.entries(HttpStatus).map(([name, code]) => [code, name as StatusName]),
);

function fromValidation(error: RequestValidationError): DomainError {
  const prefix = PART_PREFIX[error.part];
  const lines = issueLines(error.issues, prefix === undefined ? [] : [prefix]);
  const isUuidIssue = (i: z.core.$ZodIssue) => i.code === 'invalid_format' && i.format === 'uuid';
  const [first] = error.issues;
  if (first !== undefined && error.issues.every(isUuidIssue)) {
    const value = first.path.reduce<unknown>((v, k) => (v as Record<PropertyKey, unknown> | undefined)?.[k], error.input);
    const e = malformedUuid(issuePath(first.path), typeof value === 'string' ? value : '');
    return new DomainError(e.code, e.status, e.message, lines.map((l) => l.replace(/: .*$/, ': expected type uuid')));
  }
  return new DomainError('REQUEST.VALIDATION_FAILED', 'BAD_REQUEST', error.message, lines);
}

function toDomainError(error: unknown): DomainError {
  if (error instanceof DomainError) return error;
  if (error instanceof RequestValidationError) return fromValidation(error);
  const fe = error as Partial<FastifyError>;
  const code = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  const name = byStatus.get(code);
  if (code >= 400 && code < 500 && name) {
    const malformed = fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error instanceof SyntaxError;
    return new DomainError(`HTTP.${name}`, name, malformed ? `Malformed JSON: ${fe.message ?? ''}` : (fe.message ?? name));
  }
  return new DomainError('HTTP.INTERNAL_SERVER_ERROR', 'INTERNAL_SERVER_ERROR', 'Internal server error');
}

export function errorBody(error: DomainError, traceId: string, now: Date): ErrorBody {
  return { status: error.status, timestamp: now.toISOString(), message: error.message, traceId, errors: [...error.errors] };
}

export function installErrorHandling(app: FastifyInstance, now: () => Date): void {
  app.setErrorHandler((error: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const domain = toDomainError(error);
    if (domain.httpStatus >= 500) request.log.error({ err: error }, 'request failed');
    void reply.code(domain.httpStatus).type('application/json').send(errorBody(domain, request.traceId, now()));
  });
  app.setNotFoundHandler((request, reply) => {
    const e = new DomainError('HTTP.NOT_FOUND', 'NOT_FOUND', `No route ${request.method} ${request.url.split('?')[0] ?? ''}`);
    void reply.code(404).send(errorBody(e, request.traceId, now()));
  });
}
