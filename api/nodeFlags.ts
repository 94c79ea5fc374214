// How Node runs the service: `npm start` (package.json), the image's CMD (Dockerfile), and every
// test or benchmark that starts api/main.ts in a child process use these, and a test holds
// package.json and the Dockerfile to them.

/**
 * V8's young generation capped at two semi-spaces of 16 MiB. Left to itself, V8 on Node 24 grows
 * them to 64 MiB each under a sustained allocation rate, and that growth is resident memory the
 * process keeps: the first export of 1,000,000 records grew the service's anonymous RSS by 73 MB,
 * all of it new space (`npm run bench:export`); with this cap, by 5.6 MB. Log creates over a minute
 * and get-one throughput were the same with and without it (docs/performance.md).
 */
export const V8_FLAGS = ['--max-semi-space-size=16'] as const;

/** The telemetry preload (infra/telemetry/register.ts): off unless OTEL_* ask for it. */
export const PRELOAD = ['--import', './infra/telemetry/register.ts'] as const;

/** Node's arguments before `api/main.ts`. */
export const SERVICE_NODE_ARGS = [...V8_FLAGS, ...PRELOAD] as const;
