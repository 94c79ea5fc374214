// Shared by the benchmark's load driver and its server process: the raw baselines use the event
// log's own table, indexes and pragmas, so they pay for what the store pays for.

import { rmSync } from 'node:fs';

export { EVENT_LOG_PRAGMAS as LOG_PRAGMAS, EVENT_LOG_SCHEMA as RAW_SCHEMA } from '../infra/sqlite/eventStore.ts';

/** A bench server's end: on SIGTERM, SIGINT, or its parent going away (even by a crash, which
 * closes its stdin), it closes, removes its data folder and exits. */
export function closeWithParent(close: () => Promise<unknown>, dataDir: string): void {
  let closing = false;
  const shutdown = async (): Promise<void> => {
    if (closing) return;
    closing = true;
    try {
      await close();
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      process.exit(0);
    }
  };
  process.once('SIGTERM', () => void shutdown());
  process.once('SIGINT', () => void shutdown());
  process.stdin.on('end', () => void shutdown());
  process.stdin.resume();
}
