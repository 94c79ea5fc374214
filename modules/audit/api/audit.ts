// The audit feed (API.md "Audit feed"): every event of the log in global order, for the `admin`
// and `auditor` roles, as JSON pages or as a live text/event-stream. What an event shows of its
// data is what history shows (domain/resource/service.ts shownEventData: never a hidden part such
// as a password hash). Live streams are bounded: a cap per process and per caller, a pull-based
// body (the log is read only as fast as the socket drains), a watchdog for clients that stop
// reading, heartbeats, and an end on server shutdown so that close() never waits on them.

import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { EventStore, Position, RecordedEvent } from '../../../domain/ports.ts';
import type { ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import { shownEventData } from '../../../domain/resource/service.ts';
import { DomainError, validationFailed } from '../../../domain/shared/errors.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { categoryOf } from '../../../domain/shared/streams.ts';
import { followFeed, readFeed, type FeedFilter, type FeedPage } from '../workers/auditFeed.ts';
import { allows, authenticate } from '../../../api/auth.ts';
import { zodRoutes, type AppDeps, type Module } from '../../../api/module.ts';
import { position } from '../../../api/readModelWait.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { queryInteger } from '../../../api/schemas.ts';

export const AUDIT_DEFAULT_LIMIT = 100;
export const AUDIT_MAX_LIMIT = 1000;
/** Events a live stream reads from the log at a time. */
const STREAM_PAGE = 100;
/** SSE messages made ahead of the socket: with one page of the log, all a stream holds. */
const STREAM_AHEAD = 8;
/** `stallMs`: a client whose socket has not drained for this long is disconnected (it holds a slot). */
export const AUDIT_STREAM_DEFAULTS = { maxStreams: 32, maxStreamsPerCaller: 4, heartbeatMs: 15_000, stallMs: 60_000 } as const;
/** How long shutdown lets a stream end by itself before its connection is cut. */
const SHUTDOWN_GRACE_MS = 2000;
/** The reconnection delay a stream tells EventSource clients. */
const RETRY_MS = 2000;
/** Entries of `types` or `streams`, at most. */
const MAX_FILTER_ITEMS = 100;
/** Bytes of an answer made between two turns of the event loop (as documentStream.ts). */
const TURN_BYTES = 256 * 1024;

const AuditEventSchema = z
  .object({
    position: z
      .string()
      .meta({ description: 'global log position: opaque decimal digits; pass the last one received as `after` (or `Last-Event-ID`)' }),
    stream: z.string().meta({ description: "the record's stream, `<category>-<id>` (e.g. `user-6f1c…`)" }),
    version: z.int().meta({ description: "the stream revision this event made (the record's `auditInfo.version` after it; 0 = created)" }),
    type: z.string().meta({ description: 'event type, e.g. `UserCreated`, `UserPatched`, `UserDeleted`, `UserPasswordChanged`' }),
    at: z.string().meta({ description: 'when it was written (date-time)' }),
    actor: z.string().meta({ description: "who wrote it: the token's subject, or `system:<worker>`" }),
    requestId: z
      .string()
      .optional()
      .meta({ description: 'X-Request-Id of the request that wrote it (absent for events written by workers without one)' }),
    correlationId: z.string().optional().meta({ description: 'X-Correlation-Id of that request' }),
    causationId: z.string().optional().meta({ description: 'the id of the event that caused it, for events written by reactors' }),
    data: z
      .record(z.string(), z.unknown())
      .meta({
        description:
          "as in history: the record after the change (Created, Replaced), the merge patch (`{ patch }`, Patched), `{}` (Deleted), or the own event's data, " +
          'in its current shape; hidden parts (a password hash, a thumbnail) are never shown, and events of a category no module declares show `{}`',
      }),
  })
  .meta({ id: 'AuditEvent' });

const AuditPageSchema = z
  .object({
    events: z.array(AuditEventSchema),
    next: z
      .string()
      .meta({
        description:
          "pass as `after` for the next page. A page of `limit` events may have more behind it; a shorter page reached the end of the log (then `next` is the log's head as read before the page, so filtered reads skip what they already passed)",
      }),
  })
  .meta({ id: 'AuditEventPage' });

const SSE_DESCRIPTION =
  'With `Accept: text/event-stream`: a live stream (Server-Sent Events). It opens with `retry: 2000` and `id: <start position>` (no `data`: it only sets the ' +
  'resume point), then one message per event: `id: <position>` and one `data:` line holding the event as JSON (the AuditEvent of the JSON page), and a blank line. ' +
  'A comment line `: heartbeat` comes after `AUDIT_HEARTBEAT_MS` (15 s) without events. It starts after `Last-Event-ID` (sent by a reconnecting EventSource), else after `after`, else at the ' +
  "log's head (new events only); every event after that position arrives once, in log order, whatever the disconnections. `limit` does not apply.";

const querystring = z.strictObject({
  after: position
    .optional()
    .meta({
      description:
        'the position to read after (exclusive): a `position` or `next` received before; default 0 (the whole log) for JSON, the head for a stream',
    }),
  limit: queryInteger(1, AUDIT_MAX_LIMIT)
    .default(AUDIT_DEFAULT_LIMIT)
    .meta({ description: `events per page: default ${String(AUDIT_DEFAULT_LIMIT)}, at most ${String(AUDIT_MAX_LIMIT)}` }),
  // Bounded so that the longest valid request line fits Node's 16 KiB limit of the request head.
  types: z
    .string()
    .max(4000)
    .regex(/^\w+(,\w+)*$/, { error: 'event type names, comma-separated, none empty' })
    .optional()
    .meta({ description: 'event types, comma-separated (e.g. `UserCreated,UserDeleted`); an unknown type is a 400' }),
  streams: z
    .string()
    .max(7000)
    .regex(/^[\w-]+(,[\w-]+)*$/, { error: 'categories, paths or stream names, comma-separated, none empty' })
    .optional()
    .meta({
      description:
        "comma-separated: a category (`user`, or the resource's path `users`: every stream of it) or a whole stream (`user-6f1c…`, one record); both kinds may be mixed. An unknown category is a 400",
    }),
});

type Query = z.infer<typeof querystring>;

/** The query as the document states it: `types` and `streams` as lists of what the modules
 * declare (filterOf checks them and names what is unknown), at most MAX_FILTER_ITEMS each. */
function documentedQuery(catalog: Catalog) {
  const alternatives = (names: Iterable<string>) => [...names].sort().join('|');
  const list = (entry: string) => `^(?:${entry})(?:,(?:${entry})){0,${String(MAX_FILTER_ITEMS - 1)}}$`;
  const stream = `${alternatives(catalog.byPath.keys())}|(?:${alternatives(catalog.byCategory.keys())})(?:-[\\w-]*\\w)?`;
  return querystring.extend({
    types: querystring.shape.types.meta({ pattern: list(alternatives(catalog.types)) }),
    streams: querystring.shape.streams.meta({ pattern: list(stream) }),
  });
}

/** What the feed knows of the modules: each category's resource, and every event type they write. */
type Catalog = {
  byCategory: ReadonlyMap<string, ResourceDefinition>;
  byPath: ReadonlyMap<string, ResourceDefinition>;
  types: ReadonlySet<string>;
};

function catalogOf(modules: readonly Module[]): Catalog {
  const defs = modules.flatMap((m) => m.resources ?? []).map((r) => r.definition);
  const types = defs.flatMap((d) => Object.keys(d.events));
  return { byCategory: new Map(defs.map((d) => [d.category, d])), byPath: new Map(defs.map((d) => [d.path, d])), types: new Set(types) };
}

export type AuditEvent = {
  position: string;
  stream: string;
  version: number;
  type: string;
  at: string;
  actor: string;
  requestId?: string;
  correlationId?: string;
  causationId?: string;
  data: JsonObject;
};

/** How the feed of these modules shows an event. */
export const auditView = (modules: readonly Module[]): ((e: RecordedEvent) => AuditEvent) => {
  const catalog = catalogOf(modules);
  return (e) => auditEventOf(catalog, e);
};

/** An event as the feed shows it. */
function auditEventOf(catalog: Catalog, e: RecordedEvent): AuditEvent {
  const def = catalog.byCategory.get(categoryOf(e.stream));
  const shown: AuditEvent = {
    position: e.position.toString(),
    stream: e.stream,
    version: e.revision,
    type: e.type,
    at: e.metadata.at,
    actor: e.metadata.actor,
    data: def === undefined ? {} : shownEventData(def, e),
  };
  const { requestId, correlationId, causationId } = e.metadata;
  if (requestId !== undefined) shown.requestId = requestId;
  if (correlationId !== undefined) shown.correlationId = correlationId;
  if (causationId !== undefined) shown.causationId = causationId;
  return shown;
}

function listOf(name: string, value: string | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const items = value.split(',').map((s) => s.trim());
  if (items.some((s) => s === ''))
    throw validationFailed(`Invalid ${name}`, [`query.${name}: a comma-separated list without empty entries`]);
  if (items.length > MAX_FILTER_ITEMS)
    throw validationFailed(`Invalid ${name}`, [`query.${name}: at most ${String(MAX_FILTER_ITEMS)} entries`]);
  return [...new Set(items)];
}

/** `types` and `streams` as a filter of the log: each entry checked against what the modules declare. */
function filterOf(catalog: Catalog, query: Pick<Query, 'types' | 'streams'>): FeedFilter {
  const types = listOf('types', query.types);
  const unknownTypes = (types ?? []).filter((t) => !catalog.types.has(t));
  if (unknownTypes.length > 0) {
    throw validationFailed(
      'Unknown event type',
      unknownTypes.slice(0, 20).map((t) => `query.types: no resource writes events of type ${JSON.stringify(t.slice(0, 100))}`),
    );
  }
  // A resource's path (`users`, `user-groups`) names its category.
  const entries = listOf('streams', query.streams)?.map((s) => catalog.byPath.get(s)?.category ?? s);
  if (entries === undefined) return { types };
  const unknown = entries.filter((s) => !catalog.byCategory.has(categoryOf(s)) || s.endsWith('-'));
  if (unknown.length > 0) {
    throw validationFailed(
      'Unknown category or stream',
      unknown
        .slice(0, 20)
        .map(
          (s) =>
            `query.streams: ${JSON.stringify(s.slice(0, 100))} is neither a category (or a resource's path) nor a stream <category>-<id> of one; categories: ${[...catalog.byCategory.keys()].join(', ')}`,
        ),
    );
  }
  const categories = entries.filter((s) => !s.includes('-'));
  const streams = entries.filter((s) => s.includes('-'));
  return { types, categories: categories.length > 0 ? categories : undefined, streams: streams.length > 0 ? streams : undefined };
}

/** The position to start after: `Last-Event-ID` (a reconnecting client), else `after`; one the log
 * has not reached was never handed out (400). */
async function startOf(store: EventStore, request: FastifyRequest, after: string | undefined): Promise<Position | undefined> {
  const header = request.raw.headers['last-event-id'];
  const lastEventId = Array.isArray(header) ? header[0] : header;
  if (lastEventId !== undefined && !/^\d{1,40}$/.test(lastEventId)) {
    throw validationFailed('Invalid Last-Event-ID', ['header.Last-Event-ID: expected a log position (the id of an event received)']);
  }
  const given = lastEventId ?? after;
  if (given === undefined) return undefined;
  const at = BigInt(given);
  if (at > (await store.headPosition())) {
    throw validationFailed('The position is ahead of the log', [
      `${lastEventId === undefined ? 'query.after' : 'header.Last-Event-ID'}: ${given} is past the newest event; use a position received from the feed`,
    ]);
  }
  return at;
}

/** A JSON page, read from the log a sub-page at a time as it is sent, so that a page of large
 * events is never held whole; `first` is its first sub-page, read before the answer starts so that
 * a store failure still gets its error body. Pages on exactly as one read of `limit` would. */
async function* pageText(
  store: EventStore,
  first: FeedPage,
  limit: number,
  filter: FeedFilter,
  show: (e: RecordedEvent) => AuditEvent,
): AsyncGenerator<string> {
  yield '{"events":[';
  let page = first;
  let sent = 0;
  let sinceTurn = 0;
  for (;;) {
    for (const e of page.events) {
      const text = (sent === 0 ? '' : ',') + JSON.stringify(show(e));
      sent += 1;
      yield text;
      sinceTurn += text.length;
      if (sinceTurn >= TURN_BYTES) {
        sinceTurn = 0;
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    const size = Math.min(STREAM_PAGE, limit - (sent - page.events.length));
    if (page.events.length < size || sent >= limit) break;
    page = await readFeed(store, page.next, Math.min(STREAM_PAGE, limit - sent), filter);
  }
  yield `],"next":${JSON.stringify(page.next.toString())}}`;
}

export type StreamOptions = { heartbeatMs: number; signal: AbortSignal };

/** The body of a live stream: SSE text, made only as fast as it is read (one message per item,
 * at most STREAM_AHEAD of them ahead of the reader). JSON.stringify escapes line breaks, so each
 * event is one `data:` line. */
export function auditStream(
  store: EventStore,
  start: Position,
  filter: FeedFilter,
  show: (e: RecordedEvent) => AuditEvent,
  options: StreamOptions,
): Readable {
  async function* text(): AsyncGenerator<string> {
    yield `retry: ${String(RETRY_MS)}\nid: ${start.toString()}\n\n`;
    for await (const item of followFeed(store, start, filter, {
      pageSize: STREAM_PAGE,
      heartbeatMs: options.heartbeatMs,
      signal: options.signal,
    })) {
      if (item.kind === 'heartbeat') {
        yield ': heartbeat\n\n';
        continue;
      }
      for (const e of item.events) yield `id: ${e.position.toString()}\ndata: ${JSON.stringify(show(e))}\n\n`;
    }
  }
  return Readable.from(text(), { highWaterMark: STREAM_AHEAD });
}

type OpenStream = { caller: string; end: () => Promise<void> };

type Admission = {
  caller: string;
  reply: FastifyReply;
  /** Whether the caller may still read the feed (its token not expired, its login session not ended). */
  allowed: () => Promise<boolean>;
  /** How often the stream's connection and its caller are checked. */
  checkMs: number;
  /** How long its socket may go without draining. */
  stallMs: number;
};

/** The live streams of one app: admission against the caps, a watchdog per stream, and their end
 * at shutdown. */
class Streams {
  readonly #open = new Set<OpenStream>();
  readonly #limits: { maxStreams: number; maxStreamsPerCaller: number };

  constructor(limits: { maxStreams: number; maxStreamsPerCaller: number }) {
    this.#limits = limits;
  }

  /** Takes a slot for the caller, or refuses: 503 when the process is full, 429 when the caller is. */
  admit({ caller, reply, allowed, checkMs, stallMs }: Admission): AbortSignal {
    if (this.#open.size >= this.#limits.maxStreams) {
      throw new DomainError(
        'AUDIT.TOO_MANY_STREAMS',
        `This instance serves at most ${String(this.#limits.maxStreams)} audit streams at once (AUDIT_STREAMS_MAX); retry later or page with JSON`,
        [],
        { retryAfterSeconds: 5 },
      );
    }
    const own = [...this.#open].filter((s) => s.caller === caller).length;
    if (own >= this.#limits.maxStreamsPerCaller) {
      throw new DomainError(
        'AUDIT.TOO_MANY_STREAMS_OF_CALLER',
        `A caller may hold at most ${String(this.#limits.maxStreamsPerCaller)} audit streams open at once (AUDIT_STREAMS_PER_CALLER); close one first`,
        [],
        { retryAfterSeconds: 5 },
      );
    }
    const abort = new AbortController();
    const raw = reply.raw;
    const closed = new Promise<void>((resolve) => raw.once('close', resolve));
    /** Ends the stream (its body finishes, so does the connection); cut if it has not after a grace. */
    const end = async () => {
      abort.abort();
      const cut = setTimeout(() => raw.destroy(), SHUTDOWN_GRACE_MS);
      await closed;
      clearTimeout(cut);
    };
    const stream: OpenStream = { caller, end };
    this.#open.add(stream);
    const watchdog = this.#watch(raw, stallMs, allowed, end);
    const timer = setInterval(watchdog, checkMs);
    timer.unref();
    void closed.then(() => {
      clearInterval(timer);
      abort.abort();
      this.#open.delete(stream);
    });
    return abort.signal;
  }

  /** A client that stops reading holds its slot: it is cut once its socket has not drained for
   * `stallMs`. A caller whose token expires or whose login session ends loses its stream. */
  #watch(raw: FastifyReply['raw'], stallMs: number, allowed: () => Promise<boolean>, end: () => Promise<void>): () => void {
    let stalledSince: number | undefined;
    let checking = false;
    raw.on('drain', () => {
      stalledSince = undefined;
    });
    return () => {
      if (!raw.writableNeedDrain) stalledSince = undefined;
      else if (stalledSince === undefined) stalledSince = Date.now();
      else if (Date.now() - stalledSince >= stallMs) raw.destroy();
      if (checking) return;
      checking = true;
      void allowed()
        .then((ok) => (ok ? undefined : end()))
        .finally(() => {
          checking = false;
        });
    };
  }

  async endAll(): Promise<void> {
    await Promise.all([...this.#open].map((s) => s.end()));
  }
}

/** The caller of a request as the auth hook judges it (app.ts), judged again now: its token still
 * valid, its login session still on (modules' `authenticated`), the audit permission still granted. */
async function stillAllowed(deps: AppDeps, authorization: string | undefined): Promise<boolean> {
  try {
    let caller = await authenticate(authorization, deps.verifyToken);
    for (const module of deps.modules) if (module.authenticated !== undefined) caller = await module.authenticated(caller, deps);
    return allows(caller, 'audit');
  } catch {
    return false;
  }
}

/** A body made as it is sent (the route's schema describes what it holds). */
const sendBody = (reply: FastifyReply, body: Readable): FastifyReply => reply.send(body);

const wantsStream = (request: FastifyRequest): boolean => request.headers.accept?.toLowerCase().includes('text/event-stream') === true;

export function auditRoutes(app: FastifyInstance, deps: AppDeps): void {
  const catalog = catalogOf(deps.modules);
  const show = (e: RecordedEvent) => auditEventOf(catalog, e);
  const settings = { ...AUDIT_STREAM_DEFAULTS, ...deps.settings?.audit };
  const streams = new Streams(settings);
  // fastify's close waits for open connections: live streams end first.
  app.addHook('preClose', () => streams.endAll());

  zodRoutes(app).get(
    '/api/v1/audit/events',
    {
      config: { permission: 'audit' },
      schema: {
        tags: ['audit'],
        summary: 'Every event of the log in global order (JSON pages, or live with Accept: text/event-stream); roles admin and auditor',
        description:
          'Events of every record in the order of the log, with who wrote them and under which request. Page with `after` = the `next` of the page ' +
          'before until a page has fewer than `limit` events. `types` and `streams` narrow it. Secrets (password hashes) are never in it. ' +
          SSE_DESCRIPTION +
          ' Streams are capped per instance (`AUDIT_STREAMS_MAX`, 503 `AUDIT.TOO_MANY_STREAMS` beyond) and per caller (`AUDIT_STREAMS_PER_CALLER`, 429 ' +
          "`AUDIT.TOO_MANY_STREAMS_OF_CALLER`), both with `Retry-After`; a client that stops reading is disconnected after `AUDIT_STALL_MS` (60 s); the stream ends when the caller's token " +
          'expires or its login session ends (checked every heartbeat interval), and when the server shuts down.',
        querystring: documentedQuery(catalog),
        headers: z.object({
          'last-event-id': z
            .string()
            .optional()
            .meta({
              pattern: '^\\d{1,40}$',
              description: 'the `id` of the last message received: a stream resumes after it (wins over `after`)',
            }),
          accept: z.string().optional().meta({ description: '`text/event-stream` for a live stream; JSON otherwise' }),
        }),
        response: {
          200: {
            description: 'A page of events (JSON), or a live stream of them (text/event-stream)',
            content: {
              'application/json': { schema: AuditPageSchema },
              'text/event-stream': { schema: z.string().meta({ description: SSE_DESCRIPTION }) },
            },
          },
          ...errors(400, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const filter = filterOf(catalog, request.query);
      const after = await startOf(deps.eventStore, request, request.query.after);
      if (!wantsStream(request)) {
        const { limit } = request.query;
        const first = await readFeed(deps.eventStore, after ?? 0n, Math.min(STREAM_PAGE, limit), filter);
        return sendBody(
          reply.type('application/json; charset=utf-8'),
          Readable.from(pageText(deps.eventStore, first, limit, filter, show)),
        );
      }
      const authorization = request.raw.headers.authorization;
      const signal = streams.admit({
        caller: request.caller?.sub ?? '',
        reply,
        allowed: () => stillAllowed(deps, authorization),
        checkMs: Math.min(settings.heartbeatMs, settings.stallMs / 6),
        stallMs: settings.stallMs,
      });
      const start = after ?? (await deps.eventStore.headPosition());
      void reply
        .type('text/event-stream; charset=utf-8')
        .header('cache-control', 'no-cache, no-transform')
        .header('x-accel-buffering', 'no')
        // A stream owns its connection: when it ends, so does the connection (shutdown never waits on it).
        .header('connection', 'close');
      return sendBody(reply, auditStream(deps.eventStore, start, filter, show, { heartbeatMs: settings.heartbeatMs, signal }));
    },
  );
}
