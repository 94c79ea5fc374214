// The audit feed's reading of the log: pages of events in global order after a position, narrowed
// to event types and to categories or whole streams, and a live follower for one client: catch-up
// from a position, then each append, as EventStore.onAppended signals it. Unlike a LogProcessor
// (processor.ts) a follower keeps no checkpoint and takes no lease: its position is the client's
// (the last event it received), and a client that stops reading stops it (a generator reads the
// next page only when the one before has been taken).

import type { EventStore, Position, RecordedEvent } from '../../../domain/ports.ts';
import { categoryOf } from '../../../domain/shared/streams.ts';

export type FeedFilter = {
  /** Event types; absent = all. */
  readonly types?: readonly string[] | undefined;
  /** Whole categories (`user`: every stream `user-…`). */
  readonly categories?: readonly string[] | undefined;
  /** Whole streams (`user-6f1c…`). With categories: events of either. */
  readonly streams?: readonly string[] | undefined;
};

export type FeedPage = {
  events: RecordedEvent[];
  /** Where the next page starts (exclusive): the last event's position when the page is full; when
   * it is short, the log's head as read before the page, since every event up to it was seen. */
  next: Position;
};

/** Events of one stream read per request while looking for those after a position. */
const STREAM_CHUNK = 200;

/** The events of a stream after `after` (positions grow with revisions), at most `limit` of the
 * types asked. `hints` remembers per stream the first revision not yet passed, for a follower. */
async function streamAfter(
  store: EventStore,
  stream: string,
  after: Position,
  limit: number,
  types: readonly string[] | undefined,
  hints?: Map<string, number>,
): Promise<RecordedEvent[]> {
  const found: RecordedEvent[] = [];
  let from = hints?.get(stream) ?? 0;
  for (;;) {
    const chunk = await store.readStream(stream, { from, limit: STREAM_CHUNK });
    for (const e of chunk) {
      if (e.position <= after) {
        hints?.set(stream, e.revision + 1);
        continue;
      }
      if (types === undefined || types.includes(e.type)) found.push(e);
      if (found.length >= limit) return found;
    }
    if (chunk.length < STREAM_CHUNK) return found;
    from += STREAM_CHUNK;
  }
}

async function matching(
  store: EventStore,
  after: Position,
  limit: number,
  filter: FeedFilter,
  hints?: Map<string, number>,
): Promise<RecordedEvent[]> {
  const { types, categories, streams } = filter;
  const typed = types === undefined ? {} : { types };
  if (categories === undefined && streams === undefined) return store.readAll({ after, limit, ...typed });
  const parts: RecordedEvent[][] = [];
  if (categories !== undefined && categories.length > 0) parts.push(await store.readAll({ after, limit, categories, ...typed }));
  for (const stream of streams ?? []) {
    // A stream of a category asked for whole is in that part already.
    if (categories?.includes(categoryOf(stream)) !== true) parts.push(await streamAfter(store, stream, after, limit, types, hints));
  }
  if (parts.length === 1) return parts[0] ?? [];
  // Each part holds the first `limit` matches of its own after `after`: the first `limit` of their
  // union by position are the first `limit` matches of the whole filter.
  return parts
    .flat()
    .sort((a, b) => (a.position < b.position ? -1 : a.position > b.position ? 1 : 0))
    .slice(0, limit);
}

/** One page of the feed: the first `limit` events after `after` that the filter lets through. */
export async function readFeed(
  store: EventStore,
  after: Position,
  limit: number,
  filter: FeedFilter,
  hints?: Map<string, number>,
): Promise<FeedPage> {
  const head = await store.headPosition();
  const events = await matching(store, after, limit, filter, hints);
  const last = events.at(-1)?.position ?? after;
  return { events, next: events.length < limit && head > last ? head : last };
}

export type FollowOptions = {
  /** Events read from the log at a time. */
  pageSize: number;
  /** Longest silence: a heartbeat item comes after this long without events. */
  heartbeatMs: number;
  /** Ends the follower (the client left, the server closes). */
  signal: AbortSignal;
  now?: () => number;
};

export type FeedItem = { kind: 'events'; events: RecordedEvent[] } | { kind: 'heartbeat' };

/**
 * Every event after `after` that the filter lets through, in log order, each once: the log as it
 * is (catch-up), then appends as they come. Yields a page at a time and reads the next only when
 * the consumer asks for it, so a slow consumer holds at most one page here. Ends when `signal`
 * aborts.
 */
export async function* followFeed(
  store: EventStore,
  after: Position,
  filter: FeedFilter,
  options: FollowOptions,
): AsyncGenerator<FeedItem> {
  const now = options.now ?? Date.now;
  const { signal, pageSize, heartbeatMs } = options;
  let pending = true;
  let wake: (() => void) | undefined;
  const unsubscribe = store.onAppended(() => {
    pending = true;
    wake?.();
  });
  const onAbort = () => wake?.();
  signal.addEventListener('abort', onAbort);
  const hints = new Map<string, number>();
  let cursor = after;
  let lastSent = now();
  try {
    while (!signal.aborted) {
      if (pending) {
        pending = false;
        const page = await readFeed(store, cursor, pageSize, filter, hints);
        cursor = page.next;
        // A full page may have more behind it; appends during the read set `pending` again.
        if (page.events.length === pageSize) pending = true;
        if (page.events.length > 0) {
          yield { kind: 'events', events: page.events };
          lastSent = now();
        }
        // The embedded log answers synchronously: a long catch-up to a fast client lets other
        // requests in between pages.
        if (pending) await new Promise((resolve) => setImmediate(resolve));
        continue;
      }
      const quiet = now() - lastSent;
      if (quiet >= heartbeatMs) {
        yield { kind: 'heartbeat' };
        lastSent = now();
        continue;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, heartbeatMs - quiet);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
        if (pending || signal.aborted) wake();
      });
      wake = undefined;
    }
  } finally {
    unsubscribe();
    signal.removeEventListener('abort', onAbort);
  }
}
