// When the preload starts telemetry, from the standard OTEL_* variables alone.

import { describe, expect, it } from 'vitest';
import { telemetryPlan, telemetryWanted } from '../../../infra/telemetry/settings.ts';

describe('telemetryPlan', () => {
  it.each([
    [{}, { traces: false, metrics: false }],
    [{ OTEL_TRACES_EXPORTER: 'console' }, { traces: true, metrics: false }],
    [{ OTEL_METRICS_EXPORTER: 'console' }, { traces: false, metrics: true }],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, { traces: true, metrics: true }],
    [
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_METRICS_EXPORTER: 'none' },
      { traces: true, metrics: false },
    ],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }, { traces: true, metrics: false }],
    [{ OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://collector:4318/v1/metrics' }, { traces: false, metrics: true }],
    [
      { OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' },
      { traces: false, metrics: true },
    ],
    [
      { OTEL_TRACES_EXPORTER: ' ', OTEL_EXPORTER_OTLP_ENDPOINT: '' },
      { traces: false, metrics: false },
    ],
    [
      { OTEL_TRACES_EXPORTER: 'console', OTEL_SDK_DISABLED: 'true' },
      { traces: false, metrics: false },
    ],
  ])('%j → %j', (env, plan) => {
    expect(telemetryPlan(env)).toEqual(plan);
    expect(telemetryWanted(telemetryPlan(env))).toBe(plan.traces || plan.metrics);
  });
});
