// What every route shares at the protocol level, added to the OpenAPI document once instead of in
// each route's schema: the headers the service reads (Idempotency-Key, If-Match, If-None-Match,
// X-Request-Id, X-Correlation-Id) and answers (ETag, Location, X-Event-Position, the echoed ids), and the errors
// any route can answer (400 for a malformed header, parameter or body; 401 and 403 behind a token;
// 413 and 415 with a body; 412 with If-Match; 503 where a read waits for a read model). A client
// generated from the document then knows everything the server does.

import { NEXT_PAGE_HEADER } from './paging.ts';

type Json = Record<string, unknown>;
type Operation = { parameters?: Json[]; responses?: Record<string, Json>; requestBody?: unknown; security?: unknown[] };

const ERROR = { $ref: '#/components/schemas/Error' };
const ref = (kind: 'parameters' | 'headers', name: string) => ({ $ref: `#/components/${kind}/${name}` });

const parameters: Json = {
  IdempotencyKey: {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description:
      'Makes the write safe to retry: a retry with the same key and the same request (same operation, resource, record, and body up to member order) answers the first result and writes nothing. ' +
      "A key belongs to its caller (the token's subject) and names one request across all resources: reused for any other request it answers 409 `REQUEST.IDEMPOTENCY_KEY_REUSED`. " +
      'A key is taken by the first request that writes under it.',
    schema: { type: 'string', minLength: 1, maxLength: 200, pattern: '^[\\x21-\\x7e]+$' },
  },
  IfMatch: {
    name: 'If-Match',
    in: 'header',
    required: false,
    description:
      'The version (`auditInfo.version`, as in the ETag) the write applies to; another current version answers 412. `*` or absent: the latest.',
    schema: { type: 'string', pattern: '^\\s*(\\*|(W/)?"?[0-9]{1,15}"?)\\s*$', examples: ['"3"'] },
  },
  IfNoneMatch: {
    name: 'If-None-Match',
    in: 'header',
    required: false,
    description:
      'ETags the client holds (a list, or `*` for any): when one matches the current ETag by weak comparison (RFC 9110 §13.1.2, ' +
      '`W/"3"` matches `"3"`), 304 with no body and the ETag. An answer that embeds other records as they are now ' +
      "(`expand`, a group region's group) is always sent whole: its ETag names the record's version only.",
    schema: { type: 'string', examples: ['"3"'] },
  },
  RequestId: {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    description: 'Echoed back and stored in the metadata of every event the request writes; generated when absent.',
    schema: { type: 'string', maxLength: 200, pattern: '^[\\x21-\\x7e]+$' },
  },
  CorrelationId: {
    name: 'X-Correlation-Id',
    in: 'header',
    required: false,
    description: 'Echoed back and stored in the metadata of every event the request writes; defaults to the request id.',
    schema: { type: 'string', maxLength: 200, pattern: '^[\\x21-\\x7e]+$' },
  },
};

const headers: Json = {
  ETag: {
    description: 'The record\'s version (`auditInfo.version`, its stream revision) as `"<n>"`: send it back in If-Match.',
    schema: { type: 'string' },
  },
  Location: { description: "The created record's URL.", schema: { type: 'string' } },
  EventPosition: {
    description:
      'The log position of this write: opaque decimal digits (at most 40). Pass it as `?minPosition=` to a search, count or list to wait until they reflect the write.',
    schema: { type: 'string', pattern: '^\\d{1,40}$' },
  },
  RequestId: { description: 'The request id (sent or generated).', schema: { type: 'string' } },
  CorrelationId: { description: 'The correlation id (sent, else the request id).', schema: { type: 'string' } },
  NextPage: NEXT_PAGE_HEADER,
};

const ERROR_TEXT: Record<string, string> = {
  '400': 'Malformed request: the error body names each violated field',
  '401': 'No or invalid bearer token',
  '403': "The token's roles do not allow this",
  '409':
    'A conflict: a unique value taken, the record still referred to, a move its state forbids, or the Idempotency-Key used for another request',
  '412': 'If-Match names a version that is not the current one',
  '413': 'Body or record over its limit (request bodies: BODY_LIMIT_BYTES; a record: 512 KiB of JSON)',
  '415': 'Not application/json',
  '431': 'The request line and headers together are over 16 KiB (a query string that long included)',
  '503': 'A store is unavailable, or `minPosition` was not reached in time',
};

function addError(op: Operation, status: string): void {
  op.responses ??= {};
  op.responses[status] ??= { description: ERROR_TEXT[status] ?? 'Error', content: { 'application/json': { schema: ERROR } } };
}

function addHeaders(op: Operation, names: readonly string[]): void {
  for (const [status, response] of Object.entries(op.responses ?? {})) {
    if (!status.startsWith('2')) continue;
    const own = (response.headers ?? {}) as Json;
    response.headers = { ...own, ...Object.fromEntries(names.map((n) => [headerName(n), ref('headers', n)])) };
  }
}

const headerName = (name: string): string =>
  ({
    ETag: 'ETag',
    Location: 'Location',
    EventPosition: 'X-Event-Position',
    RequestId: 'X-Request-Id',
    CorrelationId: 'X-Correlation-Id',
    NextPage: 'Link',
  })[name] ?? name;

function addParameters(op: Operation, names: readonly string[]): void {
  op.parameters = [...(op.parameters ?? []), ...names.map((n) => ref('parameters', n))];
}

/** A read the client may make conditional (its route declares 304): If-None-Match, and the 304
 * with the ETag it matched and the echoed ids. */
function describeConditional(op: Operation): void {
  addParameters(op, ['IfNoneMatch']);
  op.responses = {
    ...op.responses,
    '304': {
      description: 'Not Modified: If-None-Match holds the current ETag; no body',
      headers: {
        ETag: { description: 'The current ETag, as a 200 would carry it.', schema: { type: 'string' } },
        'X-Request-Id': ref('headers', 'RequestId'),
        'X-Correlation-Id': ref('headers', 'CorrelationId'),
      },
    },
  };
}

/** A GET: one record's carries its version as ETag; one declaring 304 is conditional. */
function describeRead(path: string, op: Operation, record: boolean): void {
  if (record || /\/(by-code\/\{code\}|versions\/\{version\})$/.test(path)) addHeaders(op, ['ETag']);
  if (op.responses?.['304'] !== undefined) describeConditional(op);
}

/** Creates and changes of one record: keyed, versioned, positioned in the log. */
function describeWrite(method: string, op: Operation, change: boolean): void {
  addParameters(op, change ? ['IdempotencyKey', 'IfMatch'] : ['IdempotencyKey']);
  addHeaders(op, !change ? ['Location', 'ETag', 'EventPosition'] : method === 'delete' ? ['EventPosition'] : ['ETag', 'EventPosition']);
  addError(op, '503');
  addError(op, '409');
  if (change) addError(op, '412');
}

/** The protocol-level part of one operation, by what it is. */
function describe(method: string, path: string, op: Operation): void {
  const record = path.endsWith('/{idOrCode}');
  const create = method === 'post' && op.responses?.['201'] !== undefined;
  const change = ['put', 'patch', 'delete'].includes(method) && record;
  addParameters(op, ['RequestId', 'CorrelationId']);
  addHeaders(op, ['RequestId', 'CorrelationId']);
  // Every operation reads headers the service checks (the id headers at least): any can be a 400.
  addError(op, '400');
  addError(op, '401');
  addError(op, '403');
  // Node's parser refuses any request whose line and headers pass its limit, before any route.
  addError(op, '431');
  if (op.requestBody !== undefined) for (const status of ['413', '415']) addError(op, status);
  if (create || change) describeWrite(method, op, change);
  else if (method === 'get') describeRead(path, op, record);
  if ((op.parameters ?? []).some((p) => p.name === 'minPosition')) addError(op, '503');
  // A paged read (api/paging.ts): its 200 may name the next page.
  if ((op.parameters ?? []).some((p) => p.name === 'cursor' && p.in === 'query')) addHeaders(op, ['NextPage']);
}

export function withProtocol<T extends Json>(document: T): T {
  const paths = (document.paths ?? {}) as Record<string, Record<string, Operation>>;
  for (const [path, item] of Object.entries(paths)) {
    if (!path.startsWith('/api/')) continue;
    for (const [method, op] of Object.entries(item)) describe(method, path, op);
  }
  const components = (document.components ?? {}) as Json;
  return {
    ...document,
    components: {
      ...components,
      parameters: { ...((components.parameters ?? {}) as Json), ...parameters },
      headers: { ...((components.headers ?? {}) as Json), ...headers },
    },
  };
}
