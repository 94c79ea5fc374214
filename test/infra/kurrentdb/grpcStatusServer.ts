// A local HTTP/2 (h2c) endpoint that answers every gRPC call of the KurrentDB client with one
// chosen gRPC status, as a failing server would: NOT a KurrentDB, only what the client's transports
// (the Rust reader behind reads, gRPC-js behind appends) see when the server fails a call. The
// server-features probe the client makes on connecting is answered Unimplemented, as an older
// server does, so the call under test reaches the chosen status.

import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

export type GrpcStatusServer = { url: string; close(): Promise<void> };

export async function grpcStatusServer(status: number, message: string): Promise<GrpcStatusServer> {
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream, headers) => {
    const probe = String(headers[':path']).includes('ServerFeatures');
    stream.on('data', () => undefined);
    stream.on('error', () => undefined);
    stream.respond(
      { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(probe ? 12 : status), 'grpc-message': encodeURIComponent(message) },
      { endStream: true },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `kurrentdb://127.0.0.1:${String(port)}?tls=false`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const session of sessions) session.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}
