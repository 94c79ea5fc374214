// The projection lag of every read model as two observable gauges, read from the read models'
// statuses (the figures /health/ready shows) each time the metric reader collects.

import { metrics } from '@opentelemetry/api';

type Statuses = { statuses(): readonly { name: string; lag: number; lagMs: number }[] };

export function observeProjectionLag(readModels: Statuses): void {
  const meter = metrics.getMeter('telecom-admin');
  const lag = meter.createObservableGauge('projection.lag', {
    description:
      "How far the log's head is ahead of the read model's checkpoint: events in the embedded log, bytes of the transaction log in KurrentDB; 0 when caught up",
    unit: '1',
  });
  const lagMs = meter.createObservableGauge('projection.lag.duration', {
    description: "How long the oldest log position the read model has not folded has waited, by its projector's clock; 0 when caught up",
    unit: 'ms',
  });
  meter.addBatchObservableCallback(
    (result) => {
      for (const s of readModels.statuses()) {
        result.observe(lag, s.lag, { read_model: s.name });
        result.observe(lagMs, s.lagMs, { read_model: s.name });
      }
    },
    [lag, lagMs],
  );
}
