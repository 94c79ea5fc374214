// The error catalogue. Every error the service answers with is one of these; handlers recognise
// errors by `code`, and the HTTP layer maps `status` to the error body of the HTTP contract.

export const HttpStatus = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  REQUEST_TIMEOUT: 408,
  CONFLICT: 409,
  PRECONDITION_FAILED: 412,
  PAYLOAD_TOO_LARGE: 413,
  UNSUPPORTED_MEDIA_TYPE: 415,
  EXPECTATION_FAILED: 417,
  UNPROCESSABLE_ENTITY: 422,
  TOO_MANY_REQUESTS: 429,
  REQUEST_HEADER_FIELDS_TOO_LARGE: 431,
  INTERNAL_SERVER_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
} as const;
export type StatusName = keyof typeof HttpStatus;

export class DomainError extends Error {
  readonly code: string;
  readonly status: StatusName;
  readonly errors: readonly string[];
  /** When to try again (the Retry-After header): for a 503 of a busy renderer, a 429. */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: string, status: StatusName, message: string, errors: readonly string[] = [], options: { retryAfterSeconds?: number } = {}) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.status = status;
    this.errors = errors;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get httpStatus(): number {
    return HttpStatus[this.status];
  }
}

export const isDomainError = (e: unknown): e is DomainError => e instanceof DomainError;

export const validationFailed = (message: string, errors: readonly string[] = []): DomainError =>
  new DomainError('REQUEST.VALIDATION_FAILED', 'BAD_REQUEST', message, errors);

export const malformedUuid = (field: string, value: string): DomainError =>
  new DomainError(
    'REQUEST.MALFORMED_UUID',
    'BAD_REQUEST',
    `Wrong UUID format of '${field}': ${JSON.stringify(value.slice(0, 100))}`,
    [`${field}: expected type uuid`],
  );

export const invalidFilter = (errors: readonly string[]): DomainError =>
  new DomainError('FILTER.INVALID', 'BAD_REQUEST', 'Invalid filtering', errors);

export const notFound = (resource: string, key: string): DomainError =>
  new DomainError(`${resource}.NOT_FOUND`, 'NOT_FOUND', `${resource} ${JSON.stringify(key.length > 100 ? `${key.slice(0, 100)}…` : key)} not found`);

export const codeTaken = (resource: string, code: string): DomainError =>
  new DomainError(`${resource}.CODE_TAKEN`, 'CONFLICT', `${resource} code ${JSON.stringify(code)} is already taken`, [
    `code: ${JSON.stringify(code)} is already taken`,
  ]);

/** A unique key other than `code` is held by another record: its own code (`JOB_STEP.CHUNK_ID_NAME_TAKEN`). */
export const keyTaken = (resource: string, key: string, values: Readonly<Record<string, unknown>>): DomainError => {
  const described = Object.entries(values).map(([f, v]) => `${f} ${JSON.stringify(v)}`).join(' and ');
  return new DomainError(
    `${resource}.${key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()}_TAKEN`,
    'CONFLICT',
    `A ${resource} with ${described} already exists`,
    Object.keys(values).map((f) => `${f}: ${described} is already taken`),
  );
};

/** A status (or other state) move the record does not allow; names the moves it does. */
export const invalidTransition = (resource: string, field: string, from: string, to: string, allowed: readonly string[]): DomainError =>
  new DomainError(
    `${resource}.INVALID_TRANSITION`,
    'CONFLICT',
    `${resource} ${field} cannot move from ${from} to ${to}; allowed from ${from}: ${allowed.length === 0 ? 'none (it has ended)' : allowed.join(', ')}`,
    [`${field}: ${from} -> ${to} is not allowed; allowed: ${allowed.length === 0 ? 'none' : allowed.join(', ')}`],
  );

/** An action the record's status does not allow (a retry of a job that has not failed): names the
 * statuses that allow it. Same code as a status move that is not allowed. */
export const actionNotAllowed = (resource: string, action: string, from: string, allowedFrom: readonly string[]): DomainError =>
  new DomainError(`${resource}.INVALID_TRANSITION`, 'CONFLICT', `A ${resource} that is ${from} cannot be ${action}; only one that is ${allowedFrom.join(' or ')}`, [
    `status: ${from}; ${action} needs ${allowedFrom.join(' or ')}`,
  ]);

/** A field names a record that does not exist (or is deleted). */
export const referenceMissing = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.REFERENCE_NOT_FOUND`, 'UNPROCESSABLE_ENTITY', 'The record refers to records that do not exist', errors);

export const referenceUnusable = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.REFERENCE_NOT_VALID`, 'UNPROCESSABLE_ENTITY', 'The record refers to records that are not valid now', errors);

export const referenceCycle = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.REFERENCE_CYCLE`, 'UNPROCESSABLE_ENTITY', 'The record would refer to itself through a chain of references', errors);

export const stillReferenced = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.STILL_REFERENCED`, 'CONFLICT', 'Other records still refer to this record', errors);

export const alreadyExists = (resource: string, id: string): DomainError =>
  new DomainError(`${resource}.ALREADY_EXISTS`, 'CONFLICT', `${resource} with id ${id} already exists`, [
    `id: ${id} is already taken`,
  ]);

export const concurrentModification = (resource: string, id: string): DomainError =>
  new DomainError(
    `${resource}.CONCURRENT_MODIFICATION`,
    'CONFLICT',
    `${resource} ${id} was modified concurrently too many times; retry the request`,
  );

export const staleVersion = (resource: string, expected: number, actual: number): DomainError =>
  new DomainError('REQUEST.STALE_VERSION', 'PRECONDITION_FAILED', `${resource} is at version ${actual}, not ${expected}`, [
    `If-Match: expected version ${expected}, current version ${actual}`,
  ]);

export const idempotencyKeyReused = (): DomainError =>
  new DomainError(
    'REQUEST.IDEMPOTENCY_KEY_REUSED',
    'CONFLICT',
    'Idempotency-Key was already used with a different request',
  );

export const tooLarge = (resource: string, what: string, bytes: number, limit: number): DomainError =>
  new DomainError(`${resource}.TOO_LARGE`, 'PAYLOAD_TOO_LARGE', `${what} is ${String(bytes)} bytes of JSON; at most ${String(limit)}`, [
    `(body): ${what} is ${String(bytes)} bytes of JSON (UTF-8); at most ${String(limit)}`,
  ]);

export const blobTooLarge = (size: number, limit: number): DomainError =>
  new DomainError('BLOB.TOO_LARGE', 'PAYLOAD_TOO_LARGE', `The content is ${String(size)} bytes; at most ${String(limit)}`, [
    `(body): the content is ${String(size)} bytes; at most ${String(limit)}`,
  ]);

export const unauthorized = (message: string): DomainError =>
  new DomainError('AUTH.UNAUTHORIZED', 'UNAUTHORIZED', message);

export const forbidden = (message: string): DomainError => new DomainError('AUTH.FORBIDDEN', 'FORBIDDEN', message);

export const unavailable = (code: string, message: string): DomainError =>
  new DomainError(code, 'SERVICE_UNAVAILABLE', message);

/** An append over what the log takes at once (KurrentDB's MaxAppendSize for a whole append, or
 * MaxAppendEventSize for one event): `bytes` as the log counts them, `limit` and the `setting` that
 * sets it. The command handler answers it as the resource's TOO_LARGE (413); elsewhere it is a 413
 * of its own. */
export class AppendTooLargeError extends DomainError {
  readonly bytes: number | undefined;
  readonly limit: number | undefined;
  readonly setting: string;
  constructor(bytes: number | undefined, limit: number | undefined, setting: string) {
    const size = bytes === undefined ? 'over' : `${String(bytes)} bytes,`;
    const over = `The change is ${size} more than the event log takes at once (${setting}${limit === undefined ? '' : `: ${String(limit)} bytes`})`;
    super('EVENT_STORE.APPEND_TOO_LARGE', 'PAYLOAD_TOO_LARGE', over, [`(body): ${over}`]);
    this.name = 'AppendTooLargeError';
    this.bytes = bytes;
    this.limit = limit;
    this.setting = setting;
  }
}

/** A store did not answer (down, unreachable, past its deadline): the request may be retried. The
 * adapters throw it for their clients' transient failures, keeping the client's error as `cause`;
 * a store that said it is busy or not ready, or did not answer within its deadline, says when to
 * come back (`retryAfterSeconds`, the Retry-After header). */
export class StoreUnavailableError extends DomainError {
  constructor(store: 'EVENT_STORE' | 'READ_STORE' | 'BLOB_STORE', cause: unknown, options: { retryAfterSeconds?: number } = {}) {
    const which = { EVENT_STORE: 'event', READ_STORE: 'read', BLOB_STORE: 'blob' }[store];
    super(`${store}.UNAVAILABLE`, 'SERVICE_UNAVAILABLE', `The ${which} store is unavailable; retry the request`, [], options);
    this.name = 'StoreUnavailableError';
    this.cause = cause;
  }
}

/** The directory (LDAP_URL) did not answer: unreachable, refused the service account, or past
 * LDAP_TIMEOUT_MS. A directory login never falls back to a local password. */
export const directoryUnavailable = (reason: string): DomainError =>
  new DomainError('DIRECTORY.UNAVAILABLE', 'SERVICE_UNAVAILABLE', 'The directory is unavailable; retry later', [reason]);

/** A directory search answered more entries (or an entry more values) than LDAP_SIZE_LIMIT. */
export const directoryAnswerTooLarge = (what: string, limit: number): DomainError =>
  new DomainError('DIRECTORY.ANSWER_TOO_LARGE', 'SERVICE_UNAVAILABLE', `The directory answered more ${what} than the limit (LDAP_SIZE_LIMIT ${String(limit)})`, [
    `${what}: more than ${String(limit)}`,
  ]);

/** No directory is configured (LDAP_URL): nothing to sync with. */
export const directoryNotConfigured = (): DomainError =>
  new DomainError('DIRECTORY.NOT_CONFIGURED', 'SERVICE_UNAVAILABLE', 'No directory is configured: set LDAP_URL and the other LDAP_* settings (docs/directory.md)');

/** A directory sync is running already (here or in another instance): one at a time. */
export const directorySyncRunning = (): DomainError =>
  new DomainError('DIRECTORY.SYNC_RUNNING', 'CONFLICT', 'A directory sync is running already: wait for its job to end', ['one sync runs at a time']);
