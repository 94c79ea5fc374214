// The interfaces infra implements. Nothing outside infra/ and the composition root knows which
// adapter is behind them; every adapter of a port passes the same contract suite (test/support).

import type { Query } from './shared/filtering.ts';

/** Global position in the log. Opaque to clients (sent as a decimal string), ordered here: the
 * embedded log numbers its events 1, 2, 3…; KurrentDB's (commit, prepare) pair is packed as
 * commit·2^64 + prepare, which keeps the order. */
export type Position = bigint;

export type EventMetadata = {
  actor: string;
  at: string;
  requestId?: string;
  correlationId?: string;
  causationId?: string;
  idempotencyKey?: string;
  /** Hash of the request that wrote the event when an Idempotency-Key was given. */
  requestHash?: string;
};

export type NewEvent = {
  /** Event id; derived from the Idempotency-Key when one is given so a retry is a no-op. */
  id: string;
  type: string;
  schemaVersion: number;
  data: Record<string, unknown>;
  metadata: EventMetadata;
};

export type RecordedEvent = NewEvent & {
  stream: string;
  /** 0-based revision of the event within its stream. */
  revision: number;
  position: Position;
};

/** Exact revision of the stream's last event, or 'no_stream' when the stream must not exist. */
export type ExpectedRevision = number | 'no_stream';

/** A unique code reserved for a record, atomically with the append that needs it. */
export type CodeReservation = { scope: string; code: string };

export type AppendRequest = {
  stream: string;
  expected: ExpectedRevision;
  events: readonly NewEvent[];
  /** Codes this append takes for the stream; taken by another stream = CodeTakenError. */
  claim?: readonly CodeReservation[];
  /** Codes this stream holds and gives up with this append. */
  release?: readonly CodeReservation[];
};

export type AppendResult = {
  /** Revision of the last event of the stream after the append. */
  revision: number;
  /** Position of the last event appended (or of the original append for an idempotent retry). */
  position: Position;
  /** True when every event id was already in the stream: a retry, nothing was written. */
  duplicate?: boolean;
};

/** What became of one append of `appendMany`: its result, or the error `append` would have thrown. */
export type AppendOutcome = { ok: true; result: AppendResult } | { ok: false; error: unknown };

export class WrongExpectedRevisionError extends Error {
  readonly stream: string;
  readonly expected: ExpectedRevision;
  readonly actual: number | 'no_stream';
  constructor(stream: string, expected: ExpectedRevision, actual: number | 'no_stream') {
    super(`stream ${stream}: expected revision ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
    this.stream = stream;
    this.expected = expected;
    this.actual = actual;
  }
}

export class CodeTakenError extends Error {
  readonly scope: string;
  readonly code: string;
  constructor(scope: string, code: string) {
    super(`code ${code} in ${scope} is taken`);
    this.name = 'CodeTakenError';
    this.scope = scope;
    this.code = code;
  }
}

export type ReadAllOptions = {
  /** Exclusive lower bound. */
  after: Position;
  limit: number;
  /** Stream categories (the part of the stream name before the first dash); absent = all. */
  categories?: readonly string[];
  /** Event types; absent = all. `limit` counts the events that match, so a read answering fewer
   * than `limit` has seen every matching event up to the log's end. */
  types?: readonly string[];
};

export type EventStore = {
  append(request: AppendRequest): Promise<AppendResult>;
  /** Appends issued together, each to its own stream and judged alone as `append` judges it
   * (expected revision, claims, ids already there: a request whose ids are in its stream answers
   * the first result, `duplicate`), answering each one's outcome in order; one refused or failed
   * leaves the others alone. Not a transaction across streams: the embedded log commits them in
   * one transaction (one fsync), KurrentDB takes one append per stream, all issued at once (it has
   * no multi-stream transaction before 25.1). For many new streams at once (a batch of Kafka
   * triggers) without a promise and a queue entry each. */
  appendMany(requests: readonly AppendRequest[]): Promise<AppendOutcome[]>;
  /** Events of one stream in revision order, from revision `from` (0 when absent), at most `limit`
   * of them (all when absent); empty when the stream does not exist or has no event from there. */
  readStream(stream: string, options?: { from?: number; limit?: number }): Promise<RecordedEvent[]>;
  readAll(options: ReadAllOptions): Promise<RecordedEvent[]>;
  /** Position of the newest event in the log (0n when empty). */
  headPosition(): Promise<Position>;
  /** The stream holding a code, if any. */
  findCode(reservation: CodeReservation): Promise<string | undefined>;
  /** How far `to` is ahead of `from`, for lag figures: events in the embedded log, bytes of the
   * transaction log in KurrentDB; 0 when `to` is not ahead. */
  distance(from: Position, to: Position): number;
  /** Removes every event of the given streams for good (log retention) and answers how many it
   * removed (KurrentDB: how many the stream truncation covers; the server frees them at its next
   * scavenge). Afterwards a read of such a stream answers nothing, positions are never handed out
   * again (an append gets a position above every earlier one) and headPosition never goes back.
   * readAll may still return purged events until the store has reclaimed them (KurrentDB before a
   * scavenge), so a follower of the log must fold the same result with or without them. */
  purge(streams: readonly string[]): Promise<number>;
  /** Called after every committed append; the log's live subscription is built on it. */
  onAppended(listener: (position: Position) => void): () => void;
  close(): Promise<void>;
};

/** A document of a read model: the record as the API shows it. */
export type Document = Record<string, unknown> & { id: string };

/** A write of a read model's document. `position` is optional: the global log position of the
 * event that made the write, stored with the document when the write lands (the version guard
 * decides, as without it), for read models that fold several streams into one document and guard
 * replays by the log position rather than by a stream revision. */
export type DocumentWrite = (
  | { kind: 'upsert'; id: string; version: number; doc: Document; position?: Position }
  | { kind: 'delete'; id: string; version: number; position?: Position }
) & {
  /** A document re-folded from the log to repair drift: lands when its version is at least the
   * stored one (not only above it), so the same version can be written again. */
  repair?: boolean;
};

export type Page = { offset: number; limit: number };

/** A document at its version, or the tombstone of a deleted one (`doc: null`), with the log
 * position last written with it when that write carried one. */
export type VersionedDocument = { id: string; version: number; doc: Document | null; position?: Position };

export type CollectionOptions = {
  /** The indexed paths searched as text (LIKE, autocomplete); where the store can, they also get a
   * case-insensitive index and a substring (trigram) index. Absent: every indexed path. */
  textPaths?: readonly string[] | undefined;
};

/** A keyset page of documents as JSON text (ReadStore.scanJson). */
export type JsonPage = { json: string; count: number; last: string | undefined };

export type ReadStore = {
  /** Declares a collection and the column paths worth an index; idempotent. Indexes missing from a
   * collection that has documents are built from them. */
  ensureCollection(collection: string, indexedPaths: readonly string[], options?: CollectionOptions): Promise<void>;
  /** Version-guarded writes to a collection plus the checkpoint of the projection that made them
   * (named after the collection unless given), atomically where the store can. */
  applyBatch(collection: string, writes: readonly DocumentWrite[], checkpoint: Position, projection?: string): Promise<void>;
  checkpoint(projection: string): Promise<Position>;
  /** Moves a processor's checkpoint forward (never back): for processors that write no documents
   * (reactors), whose work is idempotent commands instead. */
  saveCheckpoint(processor: string, position: Position): Promise<void>;
  /** Stored versions of the given ids, for folding a batch: tombstones of deleted documents come
   * back with `doc: null` and their version, so the version guard still holds for them. `position`
   * is the one last written with the document (upsert or tombstone), absent when that write had none. */
  getMany(collection: string, ids: readonly string[]): Promise<Map<string, Omit<VersionedDocument, 'id'>>>;
  find(collection: string, query: Query, page: Page): Promise<Document[]>;
  /** The ids `find` would answer, in its order: large results are then read a few at a time. */
  findIds(collection: string, query: Query, page: Page): Promise<string[]>;
  count(collection: string, query: Query): Promise<number>;
  /** Distinct values of the given string columns that start with or contain `term`, best first. */
  autocomplete(collection: string, paths: readonly string[], term: string, limit: number): Promise<string[]>;
  /** Number of live documents. */
  size(collection: string): Promise<number>;
  /** Live documents in `id` order (binary) strictly after `after`, at most `limit`: a keyset page,
   * for export and rebuild. Paging on from the last id of each page returns every document live
   * throughout exactly once, whatever is written or deleted between pages. With `query`, only the
   * documents its conditions select (its sort is ignored: always id order), read along the id
   * index, so paging through a whole selection is one pass over the collection whatever the
   * filter (an export of a filtered selection; a page by the filter's own index sorted by id would
   * sort every match again for each page). */
  scan(collection: string, options: { after?: string; limit: number; query?: Query }): Promise<Document[]>;
  /** The same page as `scan`, as JSON text: the documents' JSON joined by commas (the inside of an
   * array; empty for no document), how many, and the last id. An export writes it as it is: no
   * document is parsed and serialized again, so a page is one string rather than thousands of
   * objects. */
  scanJson(collection: string, options: { after?: string; limit: number; query?: Query }): Promise<JsonPage>;
  /** Replaces a collection's documents and tombstones with `documents` (each id at most once, or
   * the load fails) and sets the projection's checkpoint (named after the collection unless given),
   * for a rebuild that folded the log in memory. Indexes are dropped for the load and built after
   * it. Not atomic: until it settles, readers see the collection partly loaded; if it fails, the
   * checkpoint is gone, so the projection folds the collection again from the start. */
  bulkLoad(
    collection: string,
    documents: Iterable<VersionedDocument> | AsyncIterable<VersionedDocument>,
    checkpoint: Position,
    projection?: string,
  ): Promise<void>;
  /** Drops a collection's documents and the named projection's checkpoint (MongoDB drops the
   * collection with its indexes: whoever writes it again calls ensureCollection first). */
  reset(collection: string, projection: string): Promise<void>;
  /** Takes or renews the lease that lets one instance run a projection: true when `owner` holds it
   * for the next `ttlMs` (it was free, lapsed, or already the owner's), false when another holds it. */
  tryLease(projection: string, owner: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up early (a clean shutdown), if `owner` holds it. */
  releaseLease(projection: string, owner: string): Promise<void>;
  close(): Promise<void>;
};

/** What an event holds of large binary content (thumbnails, attachments, FILE templates): the
 * content itself lives in the BlobStore, so events stay far below MAX_EVENT_BYTES. */
export type BlobRef = {
  /** SHA-256 of the content, 64 lowercase hex digits: the blob's name. */
  sha256: string;
  /** Bytes of content. */
  size: number;
  contentType: string;
};

/** Content-addressed storage of immutable bytes, at most MAX_BLOB_BYTES (domain/shared/blobs.ts)
 * each. A blob is written before the event that names it, and nothing deletes one: an event may
 * name it forever. */
export type BlobStore = {
  /** Stores the bytes under their SHA-256 and answers the ref; the same bytes stored again are the
   * same blob, and keep the content type they were first stored with (the ref answered says which).
   * Over MAX_BLOB_BYTES: a DomainError BLOB.TOO_LARGE; a content type that is empty or over 255
   * characters: a RangeError. */
  put(content: Uint8Array, contentType: string): Promise<BlobRef>;
  /** The blob, or undefined when none has that hash; a hash that is not 64 lowercase hex digits is
   * a RangeError. */
  get(sha256: string): Promise<{ ref: BlobRef; content: Uint8Array } | undefined>;
  has(sha256: string): Promise<boolean>;
  close(): Promise<void>;
};

export type Clock = { now(): Date };

export type IdGenerator = () => string;

/** Paper a PDF is printed on, in millimetres, portrait or landscape (domain/documents/documents.ts
 * maps a template's documentSize to it). */
export type Paper = { name: string; widthMm: number; heightMm: number; landscape: boolean };

/** Prints HTML to PDF (Chromium). The HTML fetches nothing: no script runs and no request leaves
 * the renderer except for `data:` URLs. Busy: DomainError FORMATTER.RENDERER_BUSY (503 with a
 * retry delay); over the time limit: FORMATTER.RENDER_TIMEOUT; no browser: FORMATTER.RENDERER_UNAVAILABLE. */
export type PdfRenderer = {
  /** `caller`: whose the render is (each caller has a share of the pages; 429 beyond it). */
  pdf(html: string, paper: Paper, caller?: TemplateCaller): Promise<Uint8Array>;
  close(): Promise<void>;
};

/** The office formats a converter writes, and what it reads: HTML (a Writer document, or a Calc
 * one from its tables) and the office files themselves. */
export type OfficeFormat = 'docx' | 'doc' | 'odt' | 'xlsx' | 'xls' | 'ods' | 'pdf';
export type OfficeInput = 'html-text' | 'html-table' | 'docx' | 'odt' | 'xlsx' | 'ods';

/** Converts documents between office formats (LibreOffice), with the same busy, timeout and
 * unavailable errors as PdfRenderer; the input fetches nothing. `date` becomes the document's
 * creation and modification date and that of its date fields (the template version's), so that
 * it does not vary by run; `paper`, when given, becomes the size of every page style. */
export type OfficeConverter = {
  /** `caller`: whose the conversion is (each caller has a share of the converter, and the HTML's
   * cleaning before it runs as its template job). */
  convert(
    input: Uint8Array,
    from: OfficeInput,
    to: OfficeFormat,
    options?: { date?: Date; paper?: Paper; caller?: TemplateCaller },
  ): Promise<Uint8Array>;
  close(): Promise<void>;
};

/** One evaluation of a template over data (domain/documents/templateJobs.ts): a text from
 * handlebars or JSONata, or a DOCX or XLSX filled. Dates are ISO strings and bytes plain arrays so
 * that a job crosses a thread boundary as it is. */
export type TemplateJob =
  | { kind: 'handlebars'; key: string; version: number; source: string; data: unknown; mode: 'html' | 'text' }
  | { kind: 'jsonata'; source: string; data: unknown }
  | { kind: 'docx'; bytes: Uint8Array; data: unknown; date: string }
  | { kind: 'xlsx'; bytes: Uint8Array; data: unknown; date: string; key: string; version: number };

/** Whose a template job is: a caller's (the token's subject), which shares the callers' capacity
 * with the others, each within a bounded share; or the service's own (notifications the reactors
 * make), which no caller's job may delay: `serviceFor` names who raised the work (a trigger's
 * actor), whose share of the service's capacity it counts to. */
export type TemplateCaller = { subject: string } | { serviceFor: string };

/** Runs template jobs within a time and memory limit, away from the requests' event loop: past
 * the time limit FORMATTER.RENDER_FAILED (422: the data makes the template too slow), past the
 * memory limit FORMATTER.DOCUMENT_TOO_LARGE (413); busy: FORMATTER.RENDERER_BUSY (503); a caller
 * past its share: FORMATTER.TOO_MANY_RENDERS_OF_CALLER (429). */
export type TemplateRunner = {
  text(job: Extract<TemplateJob, { kind: 'handlebars' | 'jsonata' }>, caller: TemplateCaller): Promise<string>;
  file(job: Extract<TemplateJob, { kind: 'docx' | 'xlsx' }>, caller: TemplateCaller): Promise<Uint8Array>;
  close(): Promise<void>;
};

/** What documents are made with; a renderer may be absent (that format answers 503), and without
 * a template runner templates are evaluated on the caller's thread. */
export type DocumentRenderers = { templates?: TemplateRunner; pdf?: PdfRenderer; office?: OfficeConverter };

/** A message for the mail port: addresses already resolved, the HTML body rendered, attachments
 * read from the blob store. `messageId` is the notification's, the same on every attempt, so a
 * receiver can tell a repeated delivery. */
export type OutgoingMail = {
  messageId: string;
  from?: string;
  to: readonly string[];
  subject: string;
  html: string;
  attachments: readonly { filename: string; contentType: string; content: Uint8Array }[];
};

/** Why a delivery failed: transient ones (a 4xx SMTP answer, a timeout, a refused connection) are
 * tried again later, permanent ones (a 5xx answer) never. */
export class DeliveryFailed extends Error {
  readonly transient: boolean;
  constructor(message: string, transient: boolean) {
    super(message);
    this.name = 'DeliveryFailed';
    this.transient = transient;
  }
}

/** Sends e-mail (SMTP through nodemailer); throws DeliveryFailed when no recipient took it, and
 * answers the recipients the server refused when others took it. */
export type MailSender = { send(mail: OutgoingMail): Promise<string[]>; close(): Promise<void> };

/** A text message to phone numbers (SMS_GATEWAY_URL); another gateway is another adapter. Throws
 * DeliveryFailed (transient for timeouts, refused connections and gateway 5xx; permanent for a
 * 4xx) when the gateway did not take it. */
export type OutgoingSms = {
  /** The same on every attempt of one notification, so a gateway can drop a repeat. */
  messageId: string;
  to: readonly string[];
  text: string;
};
export type SmsSender = { send(sms: OutgoingSms): Promise<void>; close(): Promise<void> };

/** Refused or failed outbound fetch (an address not allowed, a timeout, a body over the limit, a
 * non-2xx answer, not JSON): the message says which, in words a caller may read. */
export class OutboundFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutboundFailed';
  }
}
/** The one guarded client for outbound URLs (evalNotificationUrl): refuses loopback, private and
 * link-local addresses unless allow-listed, with a timeout and a size limit. */
export type OutboundClient = { getJson(url: string): Promise<unknown> };

/** A message read from a topic (Kafka). */
export type IncomingMessage = {
  topic: string;
  partition: number;
  offset: string;
  key: string | null;
  headers: Readonly<Record<string, string>>;
  value: Buffer | null;
};
/** What became of a message: handled (its effect is durable, so its offset may be committed), or
 * dead (it can never be handled: it goes to the dead-letter topic with the reason, then its offset
 * is committed). A handler that throws has done nothing durable: the message comes again. */
export type MessageOutcome = { kind: 'handled' } | { kind: 'dead'; reason: string };
/** What became of one message of a batch: handled or dead as above, or `retry` (a store failed:
 * nothing durable was done for it), when it and every message after it in its partition are read
 * again after a pause. */
export type BatchOutcome = MessageOutcome | { kind: 'retry'; error: unknown };
export type MessageConsumer = {
  start(handle: (message: IncomingMessage) => Promise<MessageOutcome>): Promise<void>;
  /** As `start`, handing over the messages of one partition a batch at a time (in offset order, a
   * fetched batch or a slice of one), so a handler can take them into its store together; it answers
   * one outcome per message, in the same order. */
  startBatches(handle: (messages: readonly IncomingMessage[]) => Promise<BatchOutcome[]>): Promise<void>;
  stop(): Promise<void>;
};
/** A message to publish; `id` is deterministic (a header), so a consumer can drop repeats of an
 * at-least-once publisher. */
export type PublishedMessage = { key: string; id: string; value: string; headers?: Readonly<Record<string, string>> };
export type MessagePublisher = {
  /** Resolves once the broker acknowledged every message (acks from all in-sync replicas). */
  publish(topic: string, messages: readonly PublishedMessage[]): Promise<void>;
  close(): Promise<void>;
};

/** Topics (Kafka, KAFKA_BROKERS): consumers of a group and one publisher. */
export type Messaging = {
  /** A consumer of `topic` in consumer group `groupId`; messages it cannot handle go to `deadLetterTopic`. */
  consumer(options: { groupId: string; topic: string; deadLetterTopic: string }): MessageConsumer;
  readonly publisher: MessagePublisher;
  close(): Promise<void>;
};

/** A person as the directory (LDAP, Active Directory) holds them, mapped to a user's fields by the
 * attribute mapping (LDAP_ATTRIBUTES); `groups` are the DNs of the directory groups they belong to
 * (their memberOf, or a group search where the directory has none). */
export type DirectoryPerson = {
  dn: string;
  code?: string;
  givenName?: string;
  familyName?: string;
  email?: string;
  phoneNumber?: string;
  groups: readonly string[];
};

/** The directory users of authentication LDAP and AD log in against and are synchronised from. A
 * directory that cannot be reached or does not answer in time throws DIRECTORY.UNAVAILABLE; an
 * answer over the size limit throws DIRECTORY.ANSWER_TOO_LARGE. */
export type Directory = {
  /** The person `username` names, once the directory accepted `password` for them in a bind of
   * their own; undefined when it did not (no such person, several, a wrong password, an empty one). */
  authenticate(username: string, password: string): Promise<DirectoryPerson | undefined>;
  /** Every person under the user base that the sync filter selects. */
  people(): Promise<DirectoryPerson[]>;
  close(): Promise<void>;
};

/** Set (to true) by the TLS listener on a connection whose client certificate was verified against
 * a CRL that has been replaced since: the certificate proves nothing any more on that connection
 * (it may be revoked now); a new connection verifies it against the CRL in force. */
export const STALE_CLIENT_CERTIFICATE: unique symbol = Symbol('stale client certificate');

/** Whether a connection carries the mark above. */
export const hasStaleClientCertificate = (connection: object): boolean =>
  (connection as Partial<Record<typeof STALE_CLIENT_CERTIFICATE, boolean>>)[STALE_CLIENT_CERTIFICATE] === true;
