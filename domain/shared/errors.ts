// The errors of the catalogue. Every error the service answers with is one of these; handlers recognise
// errors by `code`, and the HTTP layer maps `status` to the error body of the HTTP contract. Each
// code, its status and its meaning are declared once in errorCatalogue.ts; the builders below word
// the codes several places raise.

import { catalogueEntry, HttpStatus, type AlsoStatusOf, type CodeWithStatus, type ErrorCode, type StatusName } from './errorCatalogue.ts';

export { HttpStatus, isErrorCode, type ClientStatusName, type ErrorCode, type StatusName } from './errorCatalogue.ts';

type ErrorOptions = {
  /** When to try again (the Retry-After header). */
  retryAfterSeconds?: number;
  /** The other status the catalogue declares for this code (`also`), where this is that situation. */
  status?: AlsoStatusOf<ErrorCode>;
};

export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly status: StatusName;
  readonly errors: readonly string[];
  /** When to try again (the Retry-After header): for a 503 of a busy renderer, a 429. */
  readonly retryAfterSeconds: number | undefined;

  /** The status is the catalogue's for `code` (errorCatalogue.ts), or its `also` when `options.status` names it. */
  constructor(code: ErrorCode, message: string, errors: readonly string[] = [], options: ErrorOptions = {}) {
    super(message);
    const entry = catalogueEntry(code);
    if (entry === undefined) throw new TypeError(`${code} is not in the error catalogue`);
    if (options.status !== undefined && options.status !== entry.status && options.status !== entry.also?.status)
      throw new TypeError(`${code} is not declared with status ${options.status}`);
    this.name = 'DomainError';
    this.code = code;
    this.status = options.status ?? entry.status;
    this.errors = errors;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  get httpStatus(): number {
    return HttpStatus[this.status];
  }
}

export const isDomainError = (e: unknown): e is DomainError => e instanceof DomainError;

export const validationFailed = (message: string, errors: readonly string[] = []): DomainError =>
  new DomainError('REQUEST.VALIDATION_FAILED', message, errors);

export const malformedUuid = (field: string, value: string): DomainError =>
  new DomainError('REQUEST.MALFORMED_UUID', `Wrong UUID format of '${field}': ${JSON.stringify(value.slice(0, 100))}`, [
    `${field}: expected type uuid`,
  ]);

export const invalidFilter = (errors: readonly string[]): DomainError => new DomainError('FILTER.INVALID', 'Invalid filtering', errors);

export const notFound = (resource: string, key: string): DomainError =>
  new DomainError(`${resource}.NOT_FOUND`, `${resource} ${JSON.stringify(key.length > 100 ? `${key.slice(0, 100)}…` : key)} not found`);

export const codeTaken = (resource: string, code: string): DomainError =>
  new DomainError(`${resource}.CODE_TAKEN`, `${resource} code ${JSON.stringify(code)} is already taken`, [
    `code: ${JSON.stringify(code)} is already taken`,
  ]);

/** A unique key other than `code` is held by another record: its own code (`JOB_STEP.CHUNK_ID_NAME_TAKEN`). */
export const keyTaken = (resource: string, key: string, values: Readonly<Record<string, unknown>>): DomainError => {
  const described = Object.entries(values)
    .map(([f, v]) => `${f} ${JSON.stringify(v)}`)
    .join(' and ');
  return new DomainError(
    `${resource}.${key.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()}_TAKEN`,
    `A ${resource} with ${described} already exists`,
    Object.keys(values).map((f) => `${f}: ${described} is already taken`),
  );
};

/** A status (or other state) move the record does not allow; names the moves it does. */
export const invalidTransition = (resource: string, field: string, from: string, to: string, allowed: readonly string[]): DomainError =>
  new DomainError(
    `${resource}.INVALID_TRANSITION`,
    `${resource} ${field} cannot move from ${from} to ${to}; allowed from ${from}: ${allowed.length === 0 ? 'none (it has ended)' : allowed.join(', ')}`,
    [`${field}: ${from} -> ${to} is not allowed; allowed: ${allowed.length === 0 ? 'none' : allowed.join(', ')}`],
  );

/** An action the record's status does not allow (a retry of a job that has not failed): names the
 * statuses that allow it. Same code as a status move that is not allowed. */
export const actionNotAllowed = (resource: string, action: string, from: string, allowedFrom: readonly string[]): DomainError =>
  new DomainError(
    `${resource}.INVALID_TRANSITION`,
    `A ${resource} that is ${from} cannot be ${action}; only one that is ${allowedFrom.join(' or ')}`,
    [`status: ${from}; ${action} needs ${allowedFrom.join(' or ')}`],
  );

/** A field names a record that does not exist (or is deleted). */
export const referenceMissing = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.REFERENCE_NOT_FOUND`, 'The record refers to records that do not exist', errors);

export const referenceUnusable = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.REFERENCE_NOT_VALID`, 'The record refers to records that are not valid now', errors);

export const referenceCycle = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.REFERENCE_CYCLE`, 'The record would refer to itself through a chain of references', errors);

export const stillReferenced = (resource: string, errors: readonly string[]): DomainError =>
  new DomainError(`${resource}.STILL_REFERENCED`, 'Other records still refer to this record', errors);

export const alreadyExists = (resource: string, id: string): DomainError =>
  new DomainError(`${resource}.ALREADY_EXISTS`, `${resource} with id ${id} already exists`, [`id: ${id} is already taken`]);

export const concurrentModification = (resource: string, id: string): DomainError =>
  new DomainError(`${resource}.CONCURRENT_MODIFICATION`, `${resource} ${id} was modified concurrently too many times; retry the request`);

export const staleVersion = (resource: string, expected: number, actual: number): DomainError =>
  new DomainError('REQUEST.STALE_VERSION', `${resource} is at version ${actual}, not ${expected}`, [
    `If-Match: expected version ${expected}, current version ${actual}`,
  ]);

export const idempotencyKeyReused = (): DomainError =>
  new DomainError('REQUEST.IDEMPOTENCY_KEY_REUSED', 'Idempotency-Key was already used with a different request');

export const tooLarge = (resource: string, what: string, bytes: number, limit: number): DomainError =>
  new DomainError(`${resource}.TOO_LARGE`, `${what} is ${String(bytes)} bytes of JSON; at most ${String(limit)}`, [
    `(body): ${what} is ${String(bytes)} bytes of JSON (UTF-8); at most ${String(limit)}`,
  ]);

export const blobTooLarge = (size: number, limit: number): DomainError =>
  new DomainError('BLOB.TOO_LARGE', `The content is ${String(size)} bytes; at most ${String(limit)}`, [
    `(body): the content is ${String(size)} bytes; at most ${String(limit)}`,
  ]);

export const unauthorized = (message: string): DomainError => new DomainError('AUTH.UNAUTHORIZED', message);

export const forbidden = (message: string): DomainError => new DomainError('AUTH.FORBIDDEN', message);

/** A 503 of the catalogue's: only a code declared with that status compiles. */
export const unavailable = (code: CodeWithStatus<'SERVICE_UNAVAILABLE'>, message: string): DomainError => new DomainError(code, message);

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
    super('EVENT_STORE.APPEND_TOO_LARGE', over, [`(body): ${over}`]);
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
    super(`${store}.UNAVAILABLE`, `The ${which} store is unavailable; retry the request`, [], options);
    this.name = 'StoreUnavailableError';
    this.cause = cause;
  }
}

/** The directory (LDAP_URL) did not answer: unreachable, refused the service account, or past
 * LDAP_TIMEOUT_MS. A directory login never falls back to a local password. */
export const directoryUnavailable = (reason: string): DomainError =>
  new DomainError('DIRECTORY.UNAVAILABLE', 'The directory is unavailable; retry later', [reason]);

/** A directory search answered more entries (or an entry more values) than LDAP_SIZE_LIMIT. */
export const directoryAnswerTooLarge = (what: string, limit: number): DomainError =>
  new DomainError('DIRECTORY.ANSWER_TOO_LARGE', `The directory answered more ${what} than the limit (LDAP_SIZE_LIMIT ${String(limit)})`, [
    `${what}: more than ${String(limit)}`,
  ]);

/** No directory is configured (LDAP_URL): nothing to sync with. */
export const directoryNotConfigured = (): DomainError =>
  new DomainError('DIRECTORY.NOT_CONFIGURED', 'No directory is configured: set LDAP_URL and the other LDAP_* settings (docs/directory.md)');

/** A directory sync is running already (here or in another instance): one at a time. */
export const directorySyncRunning = (): DomainError =>
  new DomainError('DIRECTORY.SYNC_RUNNING', 'A directory sync is running already: wait for its job to end', ['one sync runs at a time']);
