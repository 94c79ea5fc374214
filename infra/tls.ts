// The TLS listener's options from the configuration's files (TLS_CERT, TLS_KEY, TLS_CLIENT_CA,
// TLS_CLIENT_CRL), each read and checked at start so that a wrong file stops the service with the
// variable's name instead of failing the first handshake.
//
// Client certificates are asked for and verified (chain to TLS_CLIENT_CA, dates, the CRL) but the
// handshake is never refused for them (rejectUnauthorized: false): the request then answers 401 with
// the error body, which a client can read, where a handshake failure says nothing it can act on
// (modules/identity/api/certificateLogin.ts reads the verdict).

import { constants, createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync, watchFile, unwatchFile } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Server as HttpsServer, type ServerOptions } from 'node:https';
import type { Server as NetServer } from 'node:net';
import { createSecureContext, Server as TlsServer, type TLSSocket } from 'node:tls';
import { hasStaleClientCertificate, STALE_CLIENT_CERTIFICATE } from '../domain/ports.ts';

export type TlsFiles = {
  TLS_CERT?: string | undefined;
  TLS_KEY?: string | undefined;
  TLS_CLIENT_CA?: string | undefined;
  TLS_CLIENT_CRL?: string | undefined;
};

const read = (variable: string, path: string): Buffer => {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new Error(`${variable} (${path}) cannot be read: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
};

const checked = <T>(variable: string, path: string, what: string, parse: () => T): T => {
  try {
    return parse();
  } catch (error) {
    throw new Error(`${variable} (${path}) is not ${what}: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  }
};

/** Every PEM certificate of a bundle. */
const certificates = (pem: Buffer): X509Certificate[] =>
  (pem.toString('latin1').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map(
    (block) => new X509Certificate(block),
  );

/** The CRL file as the secure context takes it; checked by building one with it. */
export function readCrl(path: string): Buffer {
  const crl = read('TLS_CLIENT_CRL', path);
  checked('TLS_CLIENT_CRL', path, 'a PEM CRL', () => createSecureContext({ crl }));
  return crl;
}

/** The HTTPS server's options, or undefined without TLS_CERT. */
export function tlsServerOptions(files: TlsFiles): ServerOptions | undefined {
  if (files.TLS_CERT === undefined || files.TLS_KEY === undefined) return undefined;
  const cert = read('TLS_CERT', files.TLS_CERT);
  const key = read('TLS_KEY', files.TLS_KEY);
  const [leaf] = checked('TLS_CERT', files.TLS_CERT, 'a PEM certificate', () => certificates(cert));
  if (leaf === undefined) throw new Error(`TLS_CERT (${files.TLS_CERT}) is not a PEM certificate: no BEGIN CERTIFICATE block`);
  const privateKey = checked('TLS_KEY', files.TLS_KEY, 'a PEM private key without a passphrase', () => createPrivateKey(key));
  if (!leaf.checkPrivateKey(privateKey)) throw new Error(`TLS_KEY (${files.TLS_KEY}) is not the key of TLS_CERT (${files.TLS_CERT})`);
  if (files.TLS_CLIENT_CA === undefined) return { cert, key };
  const ca = read('TLS_CLIENT_CA', files.TLS_CLIENT_CA);
  if (checked('TLS_CLIENT_CA', files.TLS_CLIENT_CA, 'a PEM certificate bundle', () => certificates(ca)).length === 0) {
    throw new Error(`TLS_CLIENT_CA (${files.TLS_CLIENT_CA}) is not a PEM certificate bundle: no BEGIN CERTIFICATE block`);
  }
  return {
    cert,
    key,
    ca,
    ...(files.TLS_CLIENT_CRL === undefined ? {} : { crl: readCrl(files.TLS_CLIENT_CRL) }),
    requestCert: true,
    rejectUnauthorized: false,
    // No session resumption: every connection presents and verifies its certificate against the
    // CRL in force (a resumed session would carry the verdict of an older one; and some node
    // versions report a resumed TLS 1.3 session without a certificate as authorized, nodejs/node#35317).
    secureOptions: constants.SSL_OP_NO_TICKET,
  };
}

/**
 * Reads the CRL again when its file changes (a CA publishes a new one before nextUpdate), so a
 * revocation takes effect without a restart; a file that cannot be read or parsed keeps the CRL
 * in force and is logged. Returns the function that stops watching.
 */
export function watchClientCrl(
  server: NetServer,
  options: ServerOptions,
  path: string,
  log: { info: (o: object, m: string) => void; error: (o: object, m: string) => void },
  intervalMs = 30_000,
): () => void {
  // fastify types its server as http.Server; with TLS options it is an https.Server, a tls.Server.
  if (!(server instanceof TlsServer)) throw new Error('TLS_CLIENT_CRL: the server does not speak TLS');
  // The connections whose certificate the CRL in force verified. A new CRL applies to the next
  // handshake (and a new context refuses to resume an old session), but a keep-alive connection
  // never shakes hands again: those verified before are marked stale, each of their responses is
  // their last (Connection: close), idle ones are closed at once, and the certificate login refuses
  // a stale connection's certificate (modules/identity/api/certificateLogin.ts).
  const verified = new Set<TLSSocket>();
  const track = (socket: TLSSocket): void => {
    verified.add(socket);
    socket.once('close', () => verified.delete(socket));
  };
  const lastOnStale = (request: IncomingMessage, response: ServerResponse): void => {
    if (hasStaleClientCertificate(request.socket)) response.shouldKeepAlive = false;
  };
  server.on('secureConnection', track);
  server.prependListener('request', lastOnStale);
  const reload = (): void => {
    try {
      server.setSecureContext({ ...options, crl: readCrl(path) });
    } catch (error) {
      log.error({ err: error, path }, 'TLS_CLIENT_CRL changed but cannot be used: the previous CRL stays in force');
      return;
    }
    for (const socket of verified) Object.assign(socket, { [STALE_CLIENT_CERTIFICATE]: true });
    verified.clear();
    if (server instanceof HttpsServer) server.closeIdleConnections();
    log.info({ path }, 'TLS_CLIENT_CRL reloaded');
  };
  watchFile(path, { interval: intervalMs, persistent: false }, (now, before) => {
    if (now.mtimeMs !== before.mtimeMs || now.size !== before.size) reload();
  });
  return () => {
    unwatchFile(path);
    server.off('secureConnection', track);
    server.off('request', lastOnStale);
  };
}
