// The traced ports (infra/telemetry/traced.ts) over real adapters, with an SDK tracer provider
// registered in this process and its spans kept in memory: a call inside a span is its child with
// the port's attributes, a call outside any span makes none; Kafka's context travels in the
// messages' headers from the publish to the consumer's span.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { trace } from '@opentelemetry/api';
import { node } from '@opentelemetry/sdk-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { BatchOutcome, IncomingMessage, Messaging, PublishedMessage } from '../../../domain/ports.ts';
import { openSqliteEventStore } from '../../../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../../../infra/sqlite/readStore.ts';
import { tracedDocumentRenderers, tracedEventStore, tracedMessaging, tracedReadStore } from '../../../infra/telemetry/traced.ts';
import { WorkerTemplateRunner } from '../../../infra/templates/templateRunner.ts';

const exporter = new node.InMemorySpanExporter();
const provider = new node.NodeTracerProvider({ spanProcessors: [new node.SimpleSpanProcessor(exporter)] });
const tracer = trace.getTracer('test');
let dir: string;

beforeAll(() => {
  provider.register();
  dir = mkdtempSync(join(tmpdir(), 'traced-'));
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  exporter.reset();
});

/** Runs `work` inside a parent span; answers the parent's ids. */
async function inParent(work: () => Promise<unknown>): Promise<{ traceId: string; spanId: string }> {
  return tracer.startActiveSpan('parent', async (span) => {
    await work();
    span.end();
    return span.spanContext();
  });
}

const spans = (name: string) => exporter.getFinishedSpans().filter((s) => s.name === name);

describe('traced stores', () => {
  it('makes the append and the reads children of the active span, with their attributes', async () => {
    const events = tracedEventStore(openSqliteEventStore(join(dir, 'events.db')));
    const stream = `thing-${crypto.randomUUID()}`;
    const event = {
      id: crypto.randomUUID(),
      type: 'ThingCreated',
      schemaVersion: 1,
      data: {},
      metadata: { actor: 't', at: new Date().toISOString() },
    };
    const parent = await inParent(async () => {
      await events.append({ stream, expected: 'no_stream', events: [event] });
      await events.readStream(stream);
    });
    const [append] = spans('event_store.append');
    expect(append?.spanContext().traceId).toBe(parent.traceId);
    expect(append?.parentSpanContext?.spanId).toBe(parent.spanId);
    expect(append?.attributes).toMatchObject({
      'event_store.stream': stream,
      'event_store.events': 1,
      'event_store.event_types': ['ThingCreated'],
      'event_store.duplicate': false,
    });
    expect(spans('event_store.readStream')).toHaveLength(1);

    // Outside any span (the scheduler's polling, idle reads): no span.
    exporter.reset();
    await events.readStream(stream);
    expect(exporter.getFinishedSpans()).toEqual([]);
    await events.close();
  });

  it('records a failed call as an error of its span', async () => {
    const events = tracedEventStore(openSqliteEventStore(join(dir, 'events2.db')));
    const stream = `thing-${crypto.randomUUID()}`;
    const event = () => ({
      id: crypto.randomUUID(),
      type: 'ThingCreated',
      schemaVersion: 1,
      data: {},
      metadata: { actor: 't', at: new Date().toISOString() },
    });
    await events.append({ stream, expected: 'no_stream', events: [event()] });
    await inParent(() => events.append({ stream, expected: 'no_stream', events: [event()] }).catch(() => undefined));
    const [append] = spans('event_store.append');
    expect(append?.status.code).toBe(2);
    expect(append?.events.some((e) => e.name === 'exception')).toBe(true);
    await events.close();
  });

  it('traces read-store queries and batches with their collection', async () => {
    const reads = tracedReadStore(openSqliteReadStore({ path: join(dir, 'reads.db') }));
    await reads.ensureCollection('things', ['code']);
    await inParent(async () => {
      await reads.applyBatch('things', [{ kind: 'upsert', id: 'a', version: 0, doc: { id: 'a', code: 'A' } }], 1n);
      await reads.find('things', { conditions: [], sort: [] }, { offset: 0, limit: 10 });
      await reads.count('things', { conditions: [], sort: [] });
    });
    expect(spans('read_store.applyBatch')[0]?.attributes).toMatchObject({
      'read_store.collection': 'things',
      'read_store.writes': 1,
      'read_store.checkpoint': '1',
    });
    expect(spans('read_store.find')[0]?.attributes).toMatchObject({ 'read_store.collection': 'things', 'read_store.limit': 10 });
    expect(spans('read_store.count')).toHaveLength(1);
    await reads.close();
  });
});

describe('traced renders', () => {
  it('gives a template evaluation a span', async () => {
    // The runner's time limit (a setTimeout) on a clock that does not move: a thread that is slow
    // to evaluate on a loaded machine cannot turn the render into a 422.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const documents = tracedDocumentRenderers({ templates: new WorkerTemplateRunner() });
    try {
      let text = '';
      await inParent(async () => {
        text =
          (await documents.templates?.text(
            { kind: 'handlebars', key: 't', version: 1, source: 'Hello {{name}}', data: { name: 'there' }, mode: 'text' },
            { serviceFor: 'test' },
          )) ?? '';
      });
      expect(text).toBe('Hello there');
      expect(spans('render.template')[0]?.attributes).toMatchObject({ 'render.kind': 'handlebars' });
    } finally {
      vi.useRealTimers();
      await documents.templates?.close();
    }
  });
});

describe('traced Kafka', () => {
  /** Topics in memory: what is published is what a consumer of the topic is handed. */
  function inMemoryMessaging(): Messaging & { deliver(topic: string): Promise<BatchOutcome[]> } {
    const topics = new Map<string, PublishedMessage[]>();
    const handlers = new Map<string, (messages: readonly IncomingMessage[]) => Promise<BatchOutcome[]>>();
    return {
      consumer: ({ topic }) => ({
        start: (handle) => {
          handlers.set(topic, (messages) => Promise.all(messages.map(handle)));
          return Promise.resolve();
        },
        startBatches: (handle) => {
          handlers.set(topic, handle);
          return Promise.resolve();
        },
        stop: () => Promise.resolve(),
      }),
      publisher: {
        publish: (topic, messages) => {
          topics.set(topic, [...(topics.get(topic) ?? []), ...messages]);
          return Promise.resolve();
        },
        close: () => Promise.resolve(),
      },
      close: () => Promise.resolve(),
      deliver: async (topic) => {
        const handle = handlers.get(topic);
        if (handle === undefined) throw new Error('no consumer');
        const messages = topics.get(topic) ?? [];
        return handle(
          messages.map((m, i) => ({
            topic,
            partition: 0,
            offset: String(i),
            key: m.key,
            headers: { ...m.headers },
            value: Buffer.from(m.value),
          })),
        );
      },
    };
  }

  it('carries the publisher’s context in the headers to the consumer’s span', async () => {
    const raw = inMemoryMessaging();
    const messaging = tracedMessaging(raw);
    await messaging
      .consumer({ groupId: 'g', topic: 'events', deadLetterTopic: 'dead' })
      .start((m) => Promise.resolve(m.key === 'bad' ? { kind: 'dead', reason: 'unreadable' } : { kind: 'handled' }));
    const parent = await inParent(() =>
      messaging.publisher.publish('events', [
        { key: 'k', id: '1', value: '{}' },
        { key: 'bad', id: '2', value: '{}' },
      ]),
    );
    const [send] = spans('send events');
    expect(send?.spanContext().traceId).toBe(parent.traceId);
    expect(send?.attributes).toMatchObject({ 'messaging.destination.name': 'events', 'messaging.batch.message_count': 2 });

    expect(await raw.deliver('events')).toEqual([{ kind: 'handled' }, { kind: 'dead', reason: 'unreadable' }]);
    const processed = spans('process events');
    expect(processed).toHaveLength(2);
    for (const p of processed) {
      expect(p.spanContext().traceId).toBe(parent.traceId);
      expect(p.parentSpanContext?.spanId).toBe(send?.spanContext().spanId);
    }
    expect(processed.some((p) => p.attributes['messaging.dead_letter_reason'] === 'unreadable')).toBe(true);
  });

  it('makes one span of a batch handed over at once, linked to the publisher’s span of each message', async () => {
    const raw = inMemoryMessaging();
    const messaging = tracedMessaging(raw);
    await messaging
      .consumer({ groupId: 'g', topic: 'batched', deadLetterTopic: 'dead' })
      .startBatches((messages) =>
        Promise.resolve(messages.map((m) => (m.key === 'bad' ? { kind: 'dead', reason: 'unreadable' } : { kind: 'handled' }))),
      );
    await inParent(() =>
      messaging.publisher.publish('batched', [
        { key: 'a', id: '1', value: '{}' },
        { key: 'bad', id: '2', value: '{}' },
      ]),
    );
    await inParent(() => messaging.publisher.publish('batched', [{ key: 'c', id: '3', value: '{}' }]));
    const sends = spans('send batched');
    expect(sends).toHaveLength(2);

    expect(await raw.deliver('batched')).toEqual([{ kind: 'handled' }, { kind: 'dead', reason: 'unreadable' }, { kind: 'handled' }]);
    const [batch, ...more] = spans('process batched');
    expect(more).toHaveLength(0);
    expect(batch?.parentSpanContext).toBeUndefined();
    expect(batch?.attributes).toMatchObject({
      'messaging.batch.message_count': 3,
      'messaging.dead_letter_count': 1,
      'messaging.consumer.group.name': 'g',
    });
    // One link per message, to the span that published it.
    expect(batch?.links.map((l) => l.context.spanId).sort()).toEqual(
      [sends[0], sends[0], sends[1]].map((s) => s?.spanContext().spanId).sort(),
    );
  });

  it('starts a trace of its own for a message that carries none', async () => {
    const raw = inMemoryMessaging();
    const messaging = tracedMessaging(raw);
    await messaging.consumer({ groupId: 'g', topic: 'plain', deadLetterTopic: 'dead' }).start(() => Promise.resolve({ kind: 'handled' }));
    await raw.publisher.publish('plain', [{ key: 'k', id: '1', value: '{}' }]);
    await raw.deliver('plain');
    const [p] = spans('process plain');
    expect(p?.parentSpanContext).toBeUndefined();
  });
});
