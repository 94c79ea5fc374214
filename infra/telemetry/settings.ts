// Whether telemetry runs, from the standard OpenTelemetry variables alone: nothing here imports
// OpenTelemetry, so the preload (register.ts) costs nothing when they say no.
//
//   traces   OTEL_TRACES_EXPORTER names an exporter (console, otlp, zipkin), or an OTLP endpoint
//            (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set and
//            OTEL_TRACES_EXPORTER is not `none`
//   metrics  OTEL_METRICS_EXPORTER names an exporter (console, otlp, prometheus), or an OTLP
//            endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_METRICS_ENDPOINT) is set
//            and OTEL_METRICS_EXPORTER is not `none`
// OTEL_SDK_DISABLED=true turns both off.

export type TelemetryPlan = { traces: boolean; metrics: boolean };

type Env = Readonly<Record<string, string | undefined>>;

const list = (value: string | undefined): string[] =>
  (value ?? '')
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter((s) => s !== '' && s !== 'null');

const set = (value: string | undefined): boolean => value !== undefined && value.trim() !== '';

/** One signal: on when its exporter list names an exporter, or when it is unset and an endpoint is. */
function signal(exporters: string | undefined, ...endpoints: (string | undefined)[]): boolean {
  const names = list(exporters);
  if (names.includes('none')) return false;
  return names.length > 0 || endpoints.some(set);
}

export function telemetryPlan(env: Env): TelemetryPlan {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return { traces: false, metrics: false };
  return {
    traces: signal(env.OTEL_TRACES_EXPORTER, env.OTEL_EXPORTER_OTLP_ENDPOINT, env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT),
    metrics: signal(env.OTEL_METRICS_EXPORTER, env.OTEL_EXPORTER_OTLP_ENDPOINT, env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT),
  };
}

export const telemetryWanted = (plan: TelemetryPlan): boolean => plan.traces || plan.metrics;
