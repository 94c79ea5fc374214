// A canary server on a loopback port: it counts every connection and every request, so a test can
// prove that nothing (Chromium, LibreOffice) fetched what a template named.

import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export type Canary = { url: string; requests: string[]; connections: () => number; close: () => Promise<void> };

export async function startCanary(): Promise<Canary> {
  const requests: string[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    requests.push(req.url ?? '');
    res.end('x');
  });
  server.on('connection', () => (connections += 1));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    requests,
    connections: () => connections,
    close: () =>
      new Promise((resolve) =>
        server.close(() => {
          resolve();
        }),
      ),
  };
}
