// `admin tail` follows the audit feed live (Server-Sent Events, resumed with Last-Event-ID after a
// dropped connection); `admin replay --until T` reads the feed and folds the records as they were
// at T into an export object.

import type { Command } from 'commander';
import { InvalidArgumentError } from 'commander';
import { setTimeout as sleep } from 'node:timers/promises';
import { chunksOf, unreachable, type ApiClient } from '../client.ts';
import { actorOf, contextOf, resourcePath } from '../context.ts';
import { CliError, EXIT, cell, progressBar, writeErr, writeOut } from '../output.ts';
import type { FeedEvent } from '../replay.ts';

type FeedPage = { events: FeedEvent[]; next: string };

const PAGE = 1000;
const RECONNECT_MS = [500, 1000, 2000, 5000] as const;

function dateTime(value: string): string {
  if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(value) || Number.isNaN(Date.parse(value))) {
    throw new InvalidArgumentError('an ISO 8601 date-time with its offset, e.g. 2026-11-23T12:00:00Z');
  }
  return value;
}

const list = (value: string, previous: string[] = []): string[] => [
  ...previous,
  ...value
    .split(',')
    .map((v) => v.trim())
    .filter((v) => v !== ''),
];

/** One line per event: position, time, type, stream, actor. */
const line = (e: FeedEvent): string =>
  [String(e.position).padStart(8), e.at, e.type.padEnd(28), e.stream.padEnd(50), cell(e.actor, 40)].join('  ');

export function registerAudit(program: Command): void {
  program
    .command('tail')
    .description('Follow the audit feed live: every event as it is written (GET /api/v1/audit/events as text/event-stream)')
    .option('--types <types>', 'only these event types, comma-separated (repeatable)', list)
    .option('--streams <streams>', 'only these streams, comma-separated (repeatable)', list)
    .option('--after <position>', 'start after this log position instead of now')
    .addHelpText(
      'after',
      '\nOne line per event (--json: one JSON object per line). Ctrl-C stops it. A dropped connection is resumed where it stopped.\n\nExamples:\n  admin tail\n  admin tail --types UserGroupCreated,UserGroupDeleted --json | jq .data',
    )
    .action(async (options: { types?: string[]; streams?: string[]; after?: string }, command: Command) => {
      const { client, json } = contextOf(command);
      const stop = new AbortController();
      process.once('SIGINT', () => {
        stop.abort();
      });
      process.once('SIGTERM', () => {
        stop.abort();
      });
      await follow(client, options, stop.signal, (e) => {
        writeOut(json ? JSON.stringify(e) : line(e));
      });
    });

  program
    .command('replay')
    .description(
      "The records as they were at a time, folded from the audit feed with the service's own evolve, as an export object on stdout",
    )
    .requiredOption('--until <date-time>', 'the time: events at or before it count (as GET ?asOf= does)', dateTime)
    .option(
      '--resource <resource>',
      'only this resource (e.g. user-groups): one export object; without it a JSON array of one per resource with records',
    )
    .addHelpText(
      'after',
      '\nReads the whole feed: events of several instances need not be in log order of their time.\n\nExamples:\n  admin replay --until 2026-11-23T12:00:00Z --resource user-groups > groups-at-noon.json\n  admin import user-groups groups-at-noon.json       # what changed since',
    )
    .action(async (options: { until: string; resource?: string }, command: Command) => {
      const { client, token } = contextOf(command);
      const { Replay } = await import('../replay.ts');
      const { resources } = await import('../resources.ts');
      const path = options.resource === undefined ? undefined : resourcePath(options.resource);
      const chosen = path === undefined ? resources : resources.filter((r) => r.path === path);
      if (chosen.length === 0)
        throw new CliError(`${String(path)} is not a resource replay knows (${resources.map((r) => r.path).join(', ')})`, EXIT.usage);
      const replay = new Replay(chosen, new Date(options.until));
      const bar = progressBar('{label} {value} events read');
      let read = 0;
      bar.start(0, { label: 'replay' });
      try {
        // A page shorter than the limit reached the log's end (API: `next` is then its head).
        for (let after: string | undefined; ;) {
          // Logs go with their deletions ("delete old logs" removes logs without an event of theirs).
          const streams = path === 'logs' ? 'logs,log-deletions' : path;
          const { body }: { body: FeedPage } = await client.json<FeedPage>('/api/v1/audit/events', {
            query: { after, limit: PAGE, streams },
          });
          for (const e of body.events) replay.add(e);
          read += body.events.length;
          bar.setTotal(read);
          bar.update(read);
          if (body.events.length < PAGE || body.next === after) break;
          after = body.next;
        }
      } finally {
        bar.stop();
      }
      const exported = replay
        .records()
        .filter((r) => path !== undefined || r.records.length > 0)
        .map((r) => ({
          name: `${r.resource.path} as of ${options.until}`,
          whenExported: new Date().toISOString(),
          exportedBy: actorOf(token),
          entityType: r.resource.path,
          filtering: [],
          data: r.records,
        }));
      // Compact, as the service writes an export: a file for `admin import`, whose size is limited.
      writeOut(JSON.stringify(path === undefined ? exported : exported[0]));
    });
}

const retriable = (error: CliError): boolean => error.exitCode === EXIT.network || error.status === 429 || error.status === 503;

type TailOptions = { types?: string[]; streams?: string[]; after?: string };

/** Reads the live stream until stopped; reconnects with Last-Event-ID once it has been connected. */
async function follow(client: ApiClient, o: TailOptions, signal: AbortSignal, emit: (e: FeedEvent) => void): Promise<void> {
  const stopped = () => signal.aborted;
  const at = { lastId: o.after, connected: false };
  for (let attempt = 0; !stopped(); attempt++) {
    let reason = "the feed's connection ended";
    try {
      await readStream(client, o, at, signal, emit);
      attempt = 0;
    } catch (error) {
      if (stopped()) return;
      // The first connection must work: a wrong URL or token is an error, not a retry loop. Later,
      // an unreachable or restarting server (503, or 429 while its old stream is let go) is waited for.
      if (!at.connected || !(error instanceof CliError) || !retriable(error)) throw error;
      reason = error.message;
    }
    if (stopped()) return;
    const wait = RECONNECT_MS[Math.min(attempt, RECONNECT_MS.length - 1)] ?? 5000;
    writeErr(`admin: ${reason}; resuming after position ${at.lastId ?? '(none yet)'} in ${String(wait)} ms`);
    await sleep(wait, undefined, { signal }).catch(() => undefined);
  }
}

/** One connection: its events until the server ends it. */
async function readStream(
  client: ApiClient,
  o: TailOptions,
  at: { lastId: string | undefined; connected: boolean },
  signal: AbortSignal,
  emit: (e: FeedEvent) => void,
): Promise<void> {
  const response = await client.send('/api/v1/audit/events', {
    query: { types: o.types?.join(','), streams: o.streams?.join(','), after: at.connected ? undefined : o.after },
    headers: { accept: 'text/event-stream', ...(at.lastId === undefined ? {} : { 'last-event-id': at.lastId }) },
    signal,
  });
  at.connected = true;
  const messages = serverSentEvents(response);
  for (;;) {
    let next: IteratorResult<ServerSentEvent>;
    try {
      next = await messages.next();
    } catch (error) {
      // The connection broke mid-stream (the server stopped): resumable, like a refused connect.
      throw unreachable(client.base, error);
    }
    if (next.done === true) return;
    const message = next.value;
    if (message.id !== undefined) at.lastId = message.id;
    if (message.data !== '') emit(JSON.parse(message.data) as FeedEvent);
  }
}

export type ServerSentEvent = { id?: string; event?: string; data: string };

/** The messages of a text/event-stream body (WHATWG HTML "Server-sent events"), comments skipped. */
export async function* serverSentEvents(response: Response): AsyncGenerator<ServerSentEvent> {
  const decoder = new TextDecoder();
  let buffer = '';
  let message: { id?: string; event?: string; data: string[] } = { data: [] };
  for await (const chunk of chunksOf(response)) {
    buffer += decoder.decode(chunk, { stream: true });
    // A CR at a chunk's end may be the first half of a CRLF: decided with the next chunk.
    const held = buffer.endsWith('\r') ? '\r' : '';
    const lines = buffer.slice(0, buffer.length - held.length).split(/\r\n|\r|\n/);
    buffer = (lines.pop() ?? '') + held;
    for (const text of lines) {
      if (text === '') {
        if (message.data.length > 0 || message.id !== undefined) yield { ...message, data: message.data.join('\n') };
        message = { data: [] };
        continue;
      }
      if (text.startsWith(':')) continue;
      const colon = text.indexOf(':');
      const field = colon < 0 ? text : text.slice(0, colon);
      const value = colon < 0 ? '' : text.slice(colon + 1).replace(/^ /, '');
      if (field === 'data') message.data.push(value);
      else if (field === 'id') message.id = value;
      else if (field === 'event') message.event = value;
    }
  }
}
