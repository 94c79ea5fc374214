// Decorators of the ports that give each call a span: applied by the composition root only when
// traces run (api/main.ts), so with telemetry off the stores are the bare adapters and cost nothing
// more. A call makes a span only inside a traced piece of work (a request, a projector batch, a
// Kafka message): the scheduler's polling and the processors' idle reads make no trace of their own.

import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes } from '@opentelemetry/api';
import type { DocumentRenderers, EventStore, MessagePublisher, Messaging, ReadStore } from '../../domain/ports.ts';

export const tracer = trace.getTracer('telecom-admin');

/** Runs `work` in a child span of the active one, or as it is when no span is active. */
export function inSpan<T>(name: string, attributes: Attributes, work: () => Promise<T>, kind: SpanKind = SpanKind.CLIENT): Promise<T> {
  if (trace.getActiveSpan() === undefined) return work();
  return tracer.startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      return await work();
    } catch (error) {
      recordError(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

export function recordError(
  span: { recordException(e: Error | string): void; setStatus(s: { code: SpanStatusCode; message?: string }): void },
  error: unknown,
): void {
  const e = error instanceof Error ? error : new Error(String(error));
  span.recordException(e);
  span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
}

const STORE = 'event_store';
const READS = 'read_store';

export function tracedEventStore(store: EventStore): EventStore {
  return {
    append: (request) =>
      inSpan(
        `${STORE}.append`,
        {
          'event_store.stream': request.stream,
          'event_store.events': request.events.length,
          'event_store.event_types': [...new Set(request.events.map((e) => e.type))],
        },
        async () => {
          const result = await store.append(request);
          trace
            .getActiveSpan()
            ?.setAttributes({ 'event_store.position': result.position.toString(), 'event_store.duplicate': result.duplicate === true });
          return result;
        },
      ),
    appendMany: (requests) =>
      inSpan(
        `${STORE}.appendMany`,
        { 'event_store.appends': requests.length, 'event_store.events': requests.reduce((n, r) => n + r.events.length, 0) },
        async () => {
          const outcomes = await store.appendMany(requests);
          trace
            .getActiveSpan()
            ?.setAttributes({
              'event_store.refused': outcomes.filter((o) => !o.ok).length,
              'event_store.duplicates': outcomes.filter((o) => o.ok && o.result.duplicate === true).length,
            });
          return outcomes;
        },
      ),
    readStream: (stream, options) =>
      inSpan(`${STORE}.readStream`, { 'event_store.stream': stream }, () => store.readStream(stream, options)),
    readAll: (options) =>
      inSpan(
        `${STORE}.readAll`,
        {
          'event_store.after': options.after.toString(),
          'event_store.limit': options.limit,
          ...(options.categories === undefined ? {} : { 'event_store.categories': [...options.categories] }),
        },
        () => store.readAll(options),
      ),
    headPosition: () => store.headPosition(),
    findCode: (reservation) => inSpan(`${STORE}.findCode`, { 'event_store.scope': reservation.scope }, () => store.findCode(reservation)),
    distance: (from, to) => store.distance(from, to),
    purge: (streams) => inSpan(`${STORE}.purge`, { 'event_store.streams': streams.length }, () => store.purge(streams)),
    onAppended: (listener) => store.onAppended(listener),
    close: () => store.close(),
  };
}

export function tracedReadStore(store: ReadStore): ReadStore {
  const on = (collection: string, extra: Attributes = {}): Attributes => ({ 'read_store.collection': collection, ...extra });
  return {
    ensureCollection: (collection, paths, options) => store.ensureCollection(collection, paths, options),
    applyBatch: (collection, writes, checkpoint, projection) =>
      inSpan(
        `${READS}.applyBatch`,
        on(collection, { 'read_store.writes': writes.length, 'read_store.checkpoint': checkpoint.toString() }),
        () => store.applyBatch(collection, writes, checkpoint, projection),
      ),
    checkpoint: (projection) => store.checkpoint(projection),
    saveCheckpoint: (processor, position) => store.saveCheckpoint(processor, position),
    getMany: (collection, ids) =>
      inSpan(`${READS}.getMany`, on(collection, { 'read_store.ids': ids.length }), () => store.getMany(collection, ids)),
    find: (collection, query, page) =>
      inSpan(`${READS}.find`, on(collection, { 'read_store.offset': page.offset, 'read_store.limit': page.limit }), () =>
        store.find(collection, query, page),
      ),
    findIds: (collection, query, page) =>
      inSpan(`${READS}.findIds`, on(collection, { 'read_store.offset': page.offset, 'read_store.limit': page.limit }), () =>
        store.findIds(collection, query, page),
      ),
    count: (collection, query) => inSpan(`${READS}.count`, on(collection), () => store.count(collection, query)),
    autocomplete: (collection, paths, term, limit) =>
      inSpan(`${READS}.autocomplete`, on(collection, { 'read_store.limit': limit }), () =>
        store.autocomplete(collection, paths, term, limit),
      ),
    size: (collection) => inSpan(`${READS}.size`, on(collection), () => store.size(collection)),
    scan: (collection, options) =>
      inSpan(`${READS}.scan`, on(collection, { 'read_store.limit': options.limit }), () => store.scan(collection, options)),
    scanJson: (collection, options) =>
      inSpan(`${READS}.scanJson`, on(collection, { 'read_store.limit': options.limit }), () => store.scanJson(collection, options)),
    bulkLoad: (collection, documents, checkpoint, projection) =>
      inSpan(`${READS}.bulkLoad`, on(collection), () => store.bulkLoad(collection, documents, checkpoint, projection)),
    reset: (collection, projection) => store.reset(collection, projection),
    tryLease: (projection, owner, ttlMs) => store.tryLease(projection, owner, ttlMs),
    releaseLease: (projection, owner) => store.releaseLease(projection, owner),
    close: () => store.close(),
  };
}

/** Each render (template evaluation, PDF print, office conversion) a span of its own. */
export function tracedDocumentRenderers(documents: DocumentRenderers): DocumentRenderers {
  const { templates, pdf, office } = documents;
  return {
    ...(templates === undefined
      ? {}
      : {
          templates: {
            text: (job, caller) =>
              inSpan('render.template', { 'render.kind': job.kind }, () => templates.text(job, caller), SpanKind.INTERNAL),
            file: (job, caller) =>
              inSpan('render.template', { 'render.kind': job.kind }, () => templates.file(job, caller), SpanKind.INTERNAL),
            close: () => templates.close(),
          },
        }),
    ...(pdf === undefined
      ? {}
      : {
          pdf: {
            pdf: (html, paper, caller) =>
              inSpan(
                'render.pdf',
                { 'render.paper': paper.name, 'render.landscape': paper.landscape },
                () => pdf.pdf(html, paper, caller),
                SpanKind.INTERNAL,
              ),
            close: () => pdf.close(),
          },
        }),
    ...(office === undefined
      ? {}
      : {
          office: {
            convert: (input, from, to, options) =>
              inSpan(
                'render.office',
                { 'render.from': from, 'render.to': to },
                () => office.convert(input, from, to, options),
                SpanKind.INTERNAL,
              ),
            close: () => office.close(),
          },
        }),
  };
}

/** Kafka: a span per publish whose context travels in each message's headers (W3C `traceparent`),
 * and a span per message consumed, a child of the publisher's when the message carries one; a
 * batch handed over at once is one span, linked to the publisher's span of each of its messages. */
export function tracedMessaging(messaging: Messaging): Messaging {
  const publisher: MessagePublisher = {
    publish: (topic, messages) => {
      const attributes = {
        'messaging.system': 'kafka',
        'messaging.destination.name': topic,
        'messaging.batch.message_count': messages.length,
      };
      return tracer.startActiveSpan(`send ${topic}`, { kind: SpanKind.PRODUCER, attributes }, async (span) => {
        try {
          const withContext = messages.map((m) => {
            const headers: Record<string, string> = { ...m.headers };
            propagation.inject(context.active(), headers);
            return { ...m, headers };
          });
          await messaging.publisher.publish(topic, withContext);
        } catch (error) {
          recordError(span, error);
          throw error;
        } finally {
          span.end();
        }
      });
    },
    close: () => messaging.publisher.close(),
  };
  return {
    consumer: (options) => {
      const consumer = messaging.consumer(options);
      return {
        start: (handle) =>
          consumer.start((message) => {
            const parent = propagation.extract(ROOT_CONTEXT, message.headers);
            const attributes = {
              'messaging.system': 'kafka',
              'messaging.destination.name': message.topic,
              'messaging.destination.partition.id': String(message.partition),
              'messaging.kafka.offset': message.offset,
              'messaging.consumer.group.name': options.groupId,
            };
            return tracer.startActiveSpan(`process ${message.topic}`, { kind: SpanKind.CONSUMER, attributes }, parent, async (span) => {
              try {
                const outcome = await handle(message);
                if (outcome.kind === 'dead') span.setAttribute('messaging.dead_letter_reason', outcome.reason);
                return outcome;
              } catch (error) {
                recordError(span, error);
                throw error;
              } finally {
                span.end();
              }
            });
          }),
        startBatches: (handle) =>
          consumer.startBatches((messages) => {
            const first = messages[0];
            const links = messages.flatMap((m) => {
              const linked = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, m.headers));
              return linked === undefined ? [] : [{ context: linked }];
            });
            const attributes = {
              'messaging.system': 'kafka',
              'messaging.destination.name': first?.topic ?? '',
              'messaging.destination.partition.id': String(first?.partition ?? ''),
              'messaging.kafka.offset': first?.offset ?? '',
              'messaging.batch.message_count': messages.length,
              'messaging.consumer.group.name': options.groupId,
            };
            return tracer.startActiveSpan(
              `process ${first?.topic ?? ''}`,
              { kind: SpanKind.CONSUMER, attributes, links },
              ROOT_CONTEXT,
              async (span) => {
                try {
                  const outcomes = await handle(messages);
                  span.setAttribute('messaging.dead_letter_count', outcomes.filter((o) => o.kind === 'dead').length);
                  const retry = outcomes.find((o) => o.kind === 'retry');
                  if (retry !== undefined) recordError(span, retry.error);
                  return outcomes;
                } catch (error) {
                  recordError(span, error);
                  throw error;
                } finally {
                  span.end();
                }
              },
            );
          }),
        stop: () => consumer.stop(),
      };
    },
    publisher,
    close: () => messaging.close(),
  };
}
