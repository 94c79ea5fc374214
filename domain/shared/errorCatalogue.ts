// The error catalogue: every `code` the service answers in an error body, declared once with its
// HTTP status and what a client does about it. `new DomainError(code, …)` takes its status from
// here and accepts no code that is not declared (ErrorCode), and docs/errors.md is generated from
// it (`npm run docs`).
//
// One file for every module: the shared core (the HTTP error handler, the resource service, the
// read-model workers) and infra's adapters (the PDF, office and template renderers) raise codes
// that belong to modules (READ_MODEL.*, FORMATTER.*), and the shared core may not import a module;
// a single declaration here is what every layer can name. Grouped by the namespace before the dot.
//
// A key that starts `<RESOURCE>.` declares one code per resource (`USER_GROUP_TYPE.NOT_FOUND`, …):
// the resource part is the record's error prefix, or a part of one (`USER.THUMBNAIL.NOT_FOUND`);
// `<KEY>` is a unique key's name in SCREAMING_SNAKE_CASE (`USER_GROUP.LDAP_MEMBER_OF_TAKEN`).

/** The statuses an error may have, by the name the error body's `status` carries. */
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
/** The statuses under 500: the HTTP framework may refuse a request with any of them, as HTTP.<STATUS>. */
export type ClientStatusName = { [K in StatusName]: `${(typeof HttpStatus)[K]}` extends `4${string}` ? K : never }[StatusName];

export type ErrorEntry = {
  readonly status: StatusName;
  /** One line a client can act on: when it is answered, and what to do. */
  readonly meaning: string;
  /** The same code answered with another status in another situation (kept as the contract has it). */
  readonly also?: { readonly status: StatusName; readonly meaning: string };
};

export const ERROR_CATALOGUE = {
  // The request as sent.
  'REQUEST.VALIDATION_FAILED': {
    status: 'BAD_REQUEST',
    meaning:
      'The body, query, path or a header breaks the schema (also duplicate JSON members, `__proto__` members, numbers JSON cannot carry exactly, a client id that is not a UUIDv4, a bad X-Request-Id): fix the fields named in `errors`.',
  },
  'REQUEST.MALFORMED_UUID': {
    status: 'BAD_REQUEST',
    meaning: 'A field or path parameter that takes a UUID holds something else: send a UUID.',
  },
  'REQUEST.INVALID_CURSOR': {
    status: 'BAD_REQUEST',
    meaning:
      '`cursor` is not one this collection\'s `Link: rel="next"` gave out (altered, or from another collection or order): follow the Link as given, or start again without a cursor.',
  },
  'REQUEST.STALE_VERSION': {
    status: 'PRECONDITION_FAILED',
    meaning: 'If-Match names a version the record has moved past: read it again, reapply the change and send the new ETag.',
  },
  'REQUEST.IDEMPOTENCY_KEY_REUSED': {
    status: 'CONFLICT',
    meaning: 'This Idempotency-Key was used by this caller for a different request: use a new key for a new request.',
  },
  'FILTER.INVALID': {
    status: 'BAD_REQUEST',
    meaning:
      'A filter names a field that cannot be filtered, an unknown operator, or a value of the wrong type: fix the conditions named in `errors`.',
  },

  // Who calls.
  'AUTH.UNAUTHORIZED': {
    status: 'UNAUTHORIZED',
    meaning: 'No bearer token, or one that is expired, malformed or not signed by a trusted issuer: log in again.',
  },
  'AUTH.FORBIDDEN': { status: 'FORBIDDEN', meaning: "The caller's roles or access rules do not allow this operation or record." },
  'AUTH.TOO_MANY_ATTEMPTS': {
    status: 'TOO_MANY_REQUESTS',
    meaning: 'Too many failed logins for this user or from this address: wait for Retry-After.',
  },
  'AUTH.PASSWORD_CHANGE_REQUIRED': {
    status: 'FORBIDDEN',
    meaning:
      "An admin set this user's password (`mustChangePassword`): its login token may only change it (PUT /api/v1/users/{idOrCode}/password with `currentPassword`) or log out until it does.",
  },
  'AUTH.CURRENT_PASSWORD_WRONG': {
    status: 'FORBIDDEN',
    meaning:
      "`currentPassword` is not the user's password: nothing changed, and it counts as a failed login (429 AUTH.TOO_MANY_ATTEMPTS past the limit).",
  },
  'AUTH.NO_SESSION': {
    status: 'CONFLICT',
    meaning:
      'The token was not issued by a login of this service (POST /api/v1/auth/token) after sessions had ids: it has no session to end, and works until its `exp`.',
  },
  'DIRECTORY.UNAVAILABLE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning:
      'The directory (LDAP_URL) did not answer, refused the service account, or took longer than LDAP_TIMEOUT_MS: retry later (a directory login never falls back to a local password).',
  },
  'DIRECTORY.ANSWER_TOO_LARGE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'A directory search answered more entries, or an entry more values, than LDAP_SIZE_LIMIT.',
  },
  'DIRECTORY.NOT_CONFIGURED': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'No directory is configured (LDAP_URL): there is nothing to sync with.',
  },
  'DIRECTORY.SYNC_RUNNING': {
    status: 'CONFLICT',
    meaning: 'A directory sync is running already, here or in another instance: wait for its job to end.',
  },
  'AUTH.CERTIFICATE_REJECTED': {
    status: 'UNAUTHORIZED',
    meaning:
      'On the TLS listener, a request without a token whose client certificate is absent, expired, revoked, not from the configured CA, or names no enabled PKI user within its validity: `errors` says which.',
  },

  // Any record (one code per resource).
  '<RESOURCE>.NOT_FOUND': {
    status: 'NOT_FOUND',
    meaning: 'No record (or part of one, e.g. `USER.THUMBNAIL`) with this id or code, or one the caller may not read.',
  },
  '<RESOURCE>.ALREADY_EXISTS': {
    status: 'CONFLICT',
    meaning: 'A create names an id another record has (or had: a purged log keeps its id): create without an id, or with another.',
  },
  '<RESOURCE>.CODE_TAKEN': {
    status: 'CONFLICT',
    meaning: 'Another record of this resource holds this `code`: choose another code, or change that record.',
  },
  '<RESOURCE>.<KEY>_TAKEN': {
    status: 'CONFLICT',
    meaning: 'Another record holds this value of a unique key other than `code` (named in `errors`): choose another value.',
  },
  '<RESOURCE>.INVALID_TRANSITION': {
    status: 'CONFLICT',
    meaning:
      'A status move (or action) the record does not allow from its status, e.g. a retry of a job that has not FAILED: the message names the allowed moves.',
  },
  '<RESOURCE>.STILL_REFERENCED': {
    status: 'CONFLICT',
    meaning: 'Other records still refer to this one (counted in `errors`): remove those references first.',
  },
  '<RESOURCE>.CONCURRENT_MODIFICATION': {
    status: 'CONFLICT',
    meaning: 'Other writers kept changing the record while this change was retried: send the request again.',
  },
  '<RESOURCE>.REFERENCE_NOT_FOUND': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'A field names a record that does not exist or is deleted (named in `errors`): point it at an existing record.',
  },
  '<RESOURCE>.REFERENCE_NOT_VALID': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'A field names a record that exists but is not valid now (outside its validity dates): point it at a valid record.',
  },
  '<RESOURCE>.REFERENCE_CYCLE': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'The record would refer to itself through a chain of references: break the chain.',
  },
  '<RESOURCE>.TOO_LARGE': {
    status: 'PAYLOAD_TOO_LARGE',
    meaning:
      'The record (over 512 KiB of JSON), its event (over 768 KiB), or the change is larger than the event log takes at once: send a smaller record.',
  },
  '<RESOURCE>.BUSY': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'The records this change names kept changing while it was planned: send the request again.',
  },

  // Stores.
  'BLOB.TOO_LARGE': { status: 'PAYLOAD_TOO_LARGE', meaning: 'Binary content over 16 MiB: send a smaller file.' },
  'EVENT_STORE.APPEND_TOO_LARGE': {
    status: 'PAYLOAD_TOO_LARGE',
    meaning: 'A write outside a record command is larger than the event log takes at once: send less at once.',
  },
  'EVENT_STORE.UNAVAILABLE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'The event store (KurrentDB) is down, unreachable, busy or past its deadline: retry, after Retry-After when given.',
  },
  'READ_STORE.UNAVAILABLE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'The read store (MongoDB) is down, unreachable or past its deadline: retry, after Retry-After when given.',
  },
  'BLOB_STORE.UNAVAILABLE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'The blob store is down, unreachable or past its deadline: retry, after Retry-After when given.',
  },
  'HEALTH.EVENT_STORE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'Readiness: the event store does not answer; the instance should get no traffic until it does.',
  },
  'HEALTH.READ_STORE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'Readiness: the read store does not answer; the instance should get no traffic until it does.',
  },

  // Read models (/indexes, searches, minPosition).
  'READ_MODEL.LAGGING': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'The read model did not reach `minPosition` in time: retry, or read without `minPosition`.',
  },
  'READ_MODEL.REBUILDING': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'A search, count or list of a read model that is being rebuilt from the log: retry when GET /api/v1/indexes shows it live.',
    also: { status: 'CONFLICT', meaning: 'A recreate or refresh of a read model another rebuild job holds: wait for that job to end.' },
  },
  'READ_MODEL.NOT_FILTERABLE': {
    status: 'BAD_REQUEST',
    meaning: 'A filtered refresh of a read model that has no filter columns: recreate it instead.',
  },
  'READ_MODEL.NOT_REFRESHABLE': {
    status: 'BAD_REQUEST',
    meaning: 'A refresh of a read model whose documents cannot be re-folded one by one: recreate it instead.',
  },

  // Import, export and diff apply.
  'DIFF.MASS_REMOVE': {
    status: 'BAD_REQUEST',
    meaning: 'The save would delete more than MASS_REMOVE_PERCENT of the records: check the file, then send `allowMassRemove=true`.',
  },
  'DIFF.COMPARE_FIELD_NOT_UNIQUE': {
    status: 'BAD_REQUEST',
    meaning: '`compareField` does not identify one record on each side: choose a unique field.',
  },
  'DIFF.ALREADY_EXISTS': {
    status: 'CONFLICT',
    meaning: 'A record the diff would create exists here now and differs: compute the diff again.',
  },

  // Identity.
  'USER.LAST_ADMIN': {
    status: 'CONFLICT',
    meaning: 'The change would leave no enabled admin who can log in: make another user an enabled admin first.',
  },
  'USER.PASSWORD_NOT_USED': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning:
      "The user's `authentication` is not PASSWORD (a directory, a certificate or none judges its logins): no password is kept for it; change `authentication` first.",
  },
  'USER.THUMBNAIL_TOO_LARGE': { status: 'PAYLOAD_TOO_LARGE', meaning: 'The photo is over 1 MiB decoded: send a smaller image.' },

  // Jobs.
  'JOB.SERVICE_JOB': {
    status: 'CONFLICT',
    meaning:
      'Jobs of the types the service runs (READ_MODEL_*, DIFF_APPLY, DIRECTORY_SYNC) are written by the service only: start them through their route; cancel and retry are their actions.',
  },
  'JOB.NOT_RESUMABLE': {
    status: 'CONFLICT',
    meaning:
      'A retry of a job its runner cannot resume (a DIFF_APPLY whose entries are gone, a recreate another rebuild holds): start a new job.',
  },
  'JOB.UNDONE': {
    status: 'CONFLICT',
    meaning: 'The first try of this create under this Idempotency-Key failed and its job was undone: send it again under a new key.',
  },
  'JOB.CANCELLED': {
    status: 'CONFLICT',
    meaning: "In a job's state (`error`), not an answer of its own: the job was cancelled (by whom and when in `errors`).",
  },
  'JOB.FAILED': {
    status: 'INTERNAL_SERVER_ERROR',
    meaning: "In a job's state (`error`), not an answer of its own: the job failed (its reason and failed steps in `errors`); retry it.",
  },

  // Audit.
  'AUDIT.TOO_MANY_STREAMS': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'This instance serves AUDIT_STREAMS_MAX live audit streams already: retry after Retry-After, or page with JSON.',
  },
  'AUDIT.TOO_MANY_STREAMS_OF_CALLER': {
    status: 'TOO_MANY_REQUESTS',
    meaning: 'The caller holds AUDIT_STREAMS_PER_CALLER audit streams open already: close one first.',
  },

  // Notifications.
  'NOTIFICATION.TOO_MANY': { status: 'PAYLOAD_TOO_LARGE', meaning: 'Over 100 notifications in one create: split the request.' },
  'NOTIFICATION.TOO_MANY_ATTACHMENTS': { status: 'PAYLOAD_TOO_LARGE', meaning: 'Over 10 attachments on one notification: send fewer.' },
  'NOTIFICATION.ATTACHMENT_TOO_LARGE': {
    status: 'PAYLOAD_TOO_LARGE',
    meaning: 'An attachment is over 4 MiB decoded: send a smaller file.',
  },
  'NOTIFICATION.ATTACHMENT_INVALID': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning:
      'An attachment is not base64, is of a type not accepted, or its bytes are not of its type: fix the attachment named in `errors`.',
  },
  'NOTIFICATION.TEMPLATE_NOT_ACTIVE': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'The notification template named is not ACTIVE: activate it, or name another.',
  },
  'NOTIFICATION.RENDERED_INVALID': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'The template made a notification that is not valid (fields in `errors`): fix the template or the data.',
  },
  'NOTIFICATION.ATTEMPT_TAKEN': {
    status: 'CONFLICT',
    meaning: 'A delivery attempt that is not the next one (another dispatcher made it): nothing to do, it is being sent.',
  },
  'NOTIFICATION_RULE.NOT_TRIGGERABLE': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'A trigger over REST of a rule whose eventType is not REST or DIRECT.',
  },
  'NOTIFICATION_RULE.NOT_VALID': { status: 'UNPROCESSABLE_ENTITY', meaning: 'A trigger of a rule outside its validity dates.' },

  // Documents (formatter).
  'FORMATTER.TEMPLATE_INVALID': {
    status: 'BAD_REQUEST',
    meaning: 'The template text or JSONata expression does not compile (where in `errors`): fix the template.',
  },
  'FORMATTER.RENDER_FAILED': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'The data breaks the template (a bad time zone, a JSONata error, past TEMPLATE_TIMEOUT_MS): fix the data or the template.',
  },
  'FORMATTER.NOT_RENDERABLE': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning:
      'The template cannot make this: a FILE template rendered as text, or one whose office file is missing, unreadable or no longer allowed.',
  },
  'FORMATTER.FORMAT_NOT_AVAILABLE': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning:
      'The template cannot make this format (a FILE template as html, a text document as a spreadsheet): ask for one of the formats named.',
  },
  'FORMATTER.CONVERSION_FAILED': {
    status: 'UNPROCESSABLE_ENTITY',
    meaning: 'LibreOffice could not convert this document: check the template file.',
  },
  'FORMATTER.BATCH_TOO_LARGE': { status: 'PAYLOAD_TOO_LARGE', meaning: 'Over 100 documents in one batch: split the request.' },
  'FORMATTER.DOCUMENT_TOO_LARGE': {
    status: 'PAYLOAD_TOO_LARGE',
    meaning: 'The template made too large a document from this data (over 16 M characters): send less data.',
  },
  'FORMATTER.TOO_MANY_RENDERS_OF_CALLER': {
    status: 'TOO_MANY_REQUESTS',
    meaning:
      'The caller has TEMPLATE_JOBS_PER_CALLER template evaluations, PDF renders or office conversions waiting or running: retry after Retry-After.',
  },
  'FORMATTER.RENDERER_BUSY': { status: 'SERVICE_UNAVAILABLE', meaning: "The renderer's queue is full: retry after Retry-After." },
  'FORMATTER.RENDER_TIMEOUT': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'The render took longer than RENDER_TIMEOUT_MS and was stopped: retry after Retry-After, or send less data.',
  },
  'FORMATTER.RENDERER_CRASHED': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'The PDF or office renderer crashed on this document: retry after Retry-After.',
  },
  'FORMATTER.RENDERER_UNAVAILABLE': {
    status: 'SERVICE_UNAVAILABLE',
    meaning: 'No Chromium or no LibreOffice on this instance: the message says how to install it.',
  },

  // The HTTP layer: requests refused before or around a route (the framework, Node's HTTP parser).
  'HTTP.BAD_REQUEST': {
    status: 'BAD_REQUEST',
    meaning:
      'Malformed JSON, a malformed URL (invalid percent-encoding), a path parameter over 2048 characters, or a request the HTTP parser cannot read.',
  },
  'HTTP.UNAUTHORIZED': { status: 'UNAUTHORIZED', meaning: 'Refused by the HTTP framework before the route ran, as 401.' },
  'HTTP.FORBIDDEN': { status: 'FORBIDDEN', meaning: 'Refused by the HTTP framework before the route ran, as 403.' },
  'HTTP.NOT_FOUND': { status: 'NOT_FOUND', meaning: 'No such route for this method and path: the routes are listed in /openapi.json.' },
  'HTTP.METHOD_NOT_ALLOWED': {
    status: 'METHOD_NOT_ALLOWED',
    meaning: 'The path exists with other methods, listed in the Allow header (CONNECT is never served).',
  },
  'HTTP.REQUEST_TIMEOUT': { status: 'REQUEST_TIMEOUT', meaning: 'The request did not arrive in time: send it again.' },
  'HTTP.CONFLICT': { status: 'CONFLICT', meaning: 'Refused by the HTTP framework before the route ran, as 409.' },
  'HTTP.PRECONDITION_FAILED': { status: 'PRECONDITION_FAILED', meaning: 'Refused by the HTTP framework before the route ran, as 412.' },
  'HTTP.PAYLOAD_TOO_LARGE': {
    status: 'PAYLOAD_TOO_LARGE',
    meaning: 'The body is over BODY_LIMIT_BYTES, or its chunk extensions are too large: send less.',
  },
  'HTTP.UNSUPPORTED_MEDIA_TYPE': {
    status: 'UNSUPPORTED_MEDIA_TYPE',
    meaning: 'The Content-Type (or its charset) is not one the route reads: send application/json, or what the route names.',
  },
  'HTTP.EXPECTATION_FAILED': { status: 'EXPECTATION_FAILED', meaning: 'An Expect header other than 100-continue.' },
  'HTTP.UNPROCESSABLE_ENTITY': { status: 'UNPROCESSABLE_ENTITY', meaning: 'Refused by the HTTP framework before the route ran, as 422.' },
  'HTTP.TOO_MANY_REQUESTS': { status: 'TOO_MANY_REQUESTS', meaning: 'Refused by the HTTP framework before the route ran, as 429.' },
  'HTTP.REQUEST_HEADER_FIELDS_TOO_LARGE': {
    status: 'REQUEST_HEADER_FIELDS_TOO_LARGE',
    meaning: 'The request line and headers are over 16 KB (an over-long URL too): send a shorter one.',
  },
  'HTTP.INTERNAL_SERVER_ERROR': {
    status: 'INTERNAL_SERVER_ERROR',
    meaning: 'A fault of the service: details only in its log, found by `traceId`.',
  },
} as const satisfies Record<string, ErrorEntry>;

type Declared = keyof typeof ERROR_CATALOGUE;

/** A declared key as the codes it stands for: `<RESOURCE>.NOT_FOUND` is any `X.NOT_FOUND`. */
type CodesOf<K> = K extends `<RESOURCE>.<KEY>_TAKEN`
  ? `${string}.${string}_TAKEN`
  : K extends `<RESOURCE>.${infer Suffix}`
    ? `${string}.${Suffix}`
    : K;

/** Every code the service answers: what `new DomainError` takes. */
export type ErrorCode = CodesOf<Declared>;

/** The declared codes answered with this status (an exact code, not a per-resource one). */
export type CodeWithStatus<S extends StatusName> = {
  [K in Declared]: (typeof ERROR_CATALOGUE)[K]['status'] extends S ? CodesOf<K> : never;
}[Declared];

/** The other status a code may be answered with (`also`), else never. */
export type AlsoStatusOf<C> = C extends Declared ? ((typeof ERROR_CATALOGUE)[C] extends { also: { status: infer S } } ? S : never) : never;

/** The entry that declares a code: its own, else its resource's. */
export function catalogueEntry(code: string): ErrorEntry | undefined {
  const catalogue: Readonly<Record<string, ErrorEntry>> = ERROR_CATALOGUE;
  const own = catalogue[code];
  if (own !== undefined) return own;
  const dot = code.lastIndexOf('.');
  if (dot <= 0) return undefined;
  const suffix = code.slice(dot + 1);
  return (
    catalogue[`<RESOURCE>.${suffix}`] ??
    (suffix.endsWith('_TAKEN') && suffix.length > '_TAKEN'.length ? catalogue['<RESOURCE>.<KEY>_TAKEN'] : undefined)
  );
}

export const isErrorCode = (code: string): code is ErrorCode => catalogueEntry(code) !== undefined;
