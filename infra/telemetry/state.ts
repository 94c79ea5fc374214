// What the preload (register.ts) started, for the composition root: which signals run and how to
// flush them at shutdown. Imports nothing of OpenTelemetry: reading it costs nothing when off.
// `node --import` and the entry module share one module graph, so both see this one object.

import type { TelemetryPlan } from './settings.ts';

export type RunningTelemetry = TelemetryPlan & {
  /** Exports what is buffered (spans, a last metric reading) and stops the SDK. */
  shutdown(): Promise<void>;
};

const state: { running?: RunningTelemetry } = {};

/** The telemetry the preload started, or undefined (not preloaded, or off by the environment). */
export const runningTelemetry = (): RunningTelemetry | undefined => state.running;

export function setRunningTelemetry(running: RunningTelemetry): void {
  state.running = running;
}
