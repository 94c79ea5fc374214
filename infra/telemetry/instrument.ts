// What the composition root applies when the preload started telemetry: the traced ports (stores,
// renderers, Kafka) when traces run, the projection lag gauges when metrics run. With telemetry off
// the ports are handed on untouched.

import type { BlobStore, DocumentRenderers, EventStore, Messaging, ReadStore } from '../../domain/ports.ts';
import { redactCredentials } from '../redact.ts';
import { observeProjectionLag } from './metrics.ts';
import { telemetryPlan, telemetryWanted } from './settings.ts';
import { runningTelemetry } from './state.ts';
import { tracedDocumentRenderers, tracedEventStore, tracedMessaging, tracedReadStore } from './traced.ts';

type Ports = { eventStore: EventStore; readStore: ReadStore; blobStore: BlobStore; documents?: DocumentRenderers; messaging?: Messaging };

export function instrumentPorts<P extends Ports>(ports: P): P {
  if (runningTelemetry()?.traces !== true) return ports;
  return {
    ...ports,
    eventStore: tracedEventStore(ports.eventStore),
    readStore: tracedReadStore(ports.readStore),
    ...(ports.documents === undefined ? {} : { documents: tracedDocumentRenderers(ports.documents) }),
    ...(ports.messaging === undefined ? {} : { messaging: tracedMessaging(ports.messaging) }),
  };
}

export function instrumentService(service: { readModels: Parameters<typeof observeProjectionLag>[0] }): void {
  if (runningTelemetry()?.metrics === true) observeProjectionLag(service.readModels);
}

/** Exports what telemetry still holds; nothing when it is off. */
export async function flushTelemetry(): Promise<void> {
  await runningTelemetry()?.shutdown();
}

/** One line for the start-up banner. */
export function telemetryDescription(env: NodeJS.ProcessEnv = process.env): string {
  const running = runningTelemetry();
  if (running === undefined) {
    return telemetryWanted(telemetryPlan(env))
      ? 'telemetry: OFF although OTEL_* variables ask for it: start with `node --max-semi-space-size=16 --import ./infra/telemetry/register.ts api/main.ts` (as npm start does)'
      : 'telemetry: off (set OTEL_EXPORTER_OTLP_ENDPOINT, or OTEL_TRACES_EXPORTER=console, to trace)';
  }
  const traces = running.traces ? `traces to ${env.OTEL_TRACES_EXPORTER ?? 'otlp'}` : 'no traces';
  const metrics = running.metrics ? `metrics to ${env.OTEL_METRICS_EXPORTER ?? 'otlp'}` : 'no metrics';
  return `telemetry: ${traces}, ${metrics}${env.OTEL_EXPORTER_OTLP_ENDPOINT === undefined ? '' : ` (OTLP endpoint ${redactCredentials(env.OTEL_EXPORTER_OTLP_ENDPOINT)})`}`;
}
