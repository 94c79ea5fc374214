// Starts the OpenTelemetry SDK for the signals the environment asks for (settings.ts): imported
// only by the preload, and only then. Exporters, endpoints, protocol, sampler and propagators come
// from the standard OTEL_* variables, read by the SDK itself; the default propagation is W3C trace
// context, so a caller's `traceparent` becomes the parent of the request's span.

import { FastifyOtelInstrumentation } from '@fastify/otel';
import { metrics, NodeSDK } from '@opentelemetry/sdk-node';
import type { TelemetryPlan } from './settings.ts';
import { setRunningTelemetry } from './state.ts';

/** The probes are asked every few seconds by orchestrators: no trace of them. */
const isProbe = (route: { url: string }): boolean => route.url.startsWith('/health/');

/** OTEL_METRICS_EXPORTER=console alone: the SDK's console reader ignores OTEL_METRIC_EXPORT_INTERVAL
 * (it prints every 60 s), this one honours it. Any other choice is the SDK's to build. */
function consoleMetrics(): { metricReaders?: metrics.MetricReader[] } {
  if (process.env.OTEL_METRICS_EXPORTER?.trim().toLowerCase() !== 'console') return {};
  const interval = Number(process.env.OTEL_METRIC_EXPORT_INTERVAL ?? '60000');
  const exportIntervalMillis = Number.isFinite(interval) && interval > 0 ? interval : 60_000;
  const exporter = new metrics.ConsoleMetricExporter();
  return {
    metricReaders: [
      new metrics.PeriodicExportingMetricReader({
        exporter,
        exportIntervalMillis,
        exportTimeoutMillis: Math.min(30_000, exportIntervalMillis),
      }),
    ],
  };
}

export function startTelemetry(plan: TelemetryPlan): void {
  const sdk = new NodeSDK({
    // OTEL_SERVICE_NAME, when set, names the service; this is the default.
    ...(process.env.OTEL_SERVICE_NAME === undefined ? { serviceName: 'telecom-admin' } : {}),
    // Traces: the SDK builds the exporters of OTEL_TRACES_EXPORTER (otlp by default); none at all
    // when only metrics were asked for.
    ...(plan.traces ? {} : { spanProcessors: [] }),
    // Metrics: the SDK's readers of OTEL_METRICS_EXPORTER (otlp by default) only when asked for:
    // traces on the console must not start pushing metrics to an OTLP collector nobody runs.
    ...(plan.metrics ? consoleMetrics() : { metricReaders: [] }),
    // The service logs through pino to stdout; nothing goes through the OpenTelemetry logs API.
    logRecordProcessors: [],
    instrumentations: plan.traces
      ? [
          new FastifyOtelInstrumentation({
            registerOnInitialization: true,
            ignorePaths: isProbe,
            // The HTTP span is named after the route, as the HTTP conventions have it.
            requestHook: (span, request) => {
              span.updateName(`${request.method} ${request.routeOptions.url ?? 'unmatched route'}`);
            },
            // A hook's span is named after its function; an anonymous one gets the plugin chain
            // ("fastify -> @fastify/otel -> …"), which says nothing: the stage alone then.
            lifecycleHook: (span, info) => {
              const named = info.handler !== undefined && !info.handler.includes(' -> ');
              span.updateName(named ? `${info.hookName} ${info.handler ?? ''}` : info.hookName);
            },
          }),
        ]
      : [],
  });
  sdk.start();
  setRunningTelemetry({ ...plan, shutdown: () => sdk.shutdown() });
}
