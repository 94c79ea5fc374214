// Shared by the benchmark's load driver and its server process: the raw baselines use the event
// log's own table, indexes and pragmas, so they pay for what the store pays for.

import { rmSync } from 'node:fs';
import { request as httpRequest, type Agent } from 'node:http';

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

export type Answer = { status: number; position: string | undefined; body: string };

/** One POST of a JSON body over `agent`'s keep-alive connections (the open-loop pacers' request:
 * a bounded pool of connections, where fetch opens one for every request it cannot place). */
export function postJson(agent: Agent, url: URL, path: string, headers: Record<string, string>, body: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: 'POST',
        agent,
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const position = res.headers['x-event-position'];
          resolve({
            status: res.statusCode ?? 0,
            position: typeof position === 'string' ? position : undefined,
            body: Buffer.concat(chunks).toString('utf8'),
          });
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}
