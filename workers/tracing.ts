// Spans of the service's own work (a projector's batch, a read-model wait) through
// @opentelemetry/api only: with no SDK started (telemetry off) its tracer is a no-op, and the SDK,
// when the preload starts one, is configured in infra/telemetry.

import { SpanStatusCode, trace, type Attributes, type Span } from '@opentelemetry/api';

const tracer = trace.getTracer('telecom-admin');

/** Runs `work` in a span, a child of the active one (or a root when none is active, or when `root`:
 * work of its own, such as a processor's batch, even when a request started the processor). */
export function traced<T>(
  name: string,
  attributes: Attributes,
  work: (span: Span) => Promise<T>,
  options: { root?: boolean } = {},
): Promise<T> {
  return tracer.startActiveSpan(name, { attributes, root: options.root === true }, async (span) => {
    try {
      return await work(span);
    } catch (error) {
      const e = error instanceof Error ? error : new Error(String(error));
      span.recordException(e);
      span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The trace id of the active span, when a real one is active (traces on, inside a request). */
export function activeTraceId(): string | undefined {
  const ctx = trace.getActiveSpan()?.spanContext();
  return ctx !== undefined && trace.isSpanContextValid(ctx) ? ctx.traceId : undefined;
}
