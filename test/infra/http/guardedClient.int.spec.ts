import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http, { type IncomingHttpHeaders, type Server } from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { OutboundFailed } from '../../../domain/ports.ts';
import { createGuardedClient, type OutboundLookup } from '../../../infra/http/guardedClient.ts';

type Seen = { url: string; headers: IncomingHttpHeaders };

let server: Server;
let port: number;
let connections = 0;
let seen: Seen[] = [];

function route(path: string, res: http.ServerResponse): void {
  switch (path) {
    case '/json':
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true,"items":[1,2]}');
      return;
    case '/text':
      res.writeHead(200, { 'content-type': 'text/plain' }).end('hello, not JSON');
      return;
    case '/latin1':
      res.writeHead(200, { 'content-type': 'application/json' }).end(Buffer.from([0x22, 0xe9, 0x22]));
      return;
    case '/redirect':
      res.writeHead(302, { location: 'http://127.0.0.1/json' }).end('{"moved":true}');
      return;
    case '/error':
      res.writeHead(500, { 'content-type': 'application/json' }).end('{"secret":"internal stack trace"}');
      return;
    case '/unavailable':
      res.writeHead(503).end('db-7.internal is down');
      return;
    case '/gzip':
      res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end('not really gzip');
      return;
    case '/declared-large':
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2 * 1024 * 1024) }).write('[');
      return;
    case '/large':
      streamForever(res);
      return;
    case '/drip':
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[');
      setInterval(() => res.write('1,'), 50).unref();
      return;
    case '/hang':
      return;
    default:
      res.writeHead(404).end();
  }
}

/** Chunked (no Content-Length): 64 KiB at a time until the client goes. */
function streamForever(res: http.ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  const chunk = Buffer.alloc(64 * 1024, 0x20);
  const push = (): void => {
    while (!res.destroyed && res.write(chunk));
    if (!res.destroyed) res.once('drain', push);
  };
  res.write('[');
  push();
}

beforeAll(async () => {
  server = http.createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    route(new URL(req.url ?? '/', 'http://x').pathname, res);
  });
  server.on('connection', () => {
    connections += 1;
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  port = (server.address() as AddressInfo).port;
});

afterEach(() => {
  connections = 0;
  seen = [];
  server.closeAllConnections();
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((done) =>
    server.close(() => {
      done();
    }),
  );
});

async function failure(promise: Promise<unknown>): Promise<OutboundFailed> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(OutboundFailed);
    return error as OutboundFailed;
  }
  throw new Error('expected OutboundFailed');
}

const local = createGuardedClient({ allow: ['127.0.0.1/32'], timeoutMs: 1000 });

describe('guarded client: refusals', () => {
  const refusedHosts: [string, RegExp][] = [
    ['127.0.0.1', /^refused: 127\.0\.0\.1 is a loopback address \(allow it in OUTBOUND_ALLOW\)$/],
    ['localhost', /^refused: localhost resolves to (127\.0\.0\.1|::1), a loopback address \(allow it in OUTBOUND_ALLOW\)$/],
    // Whether the resolver knows `localhost.` depends on the machine: refused or not found, never fetched.
    ['localhost.', /^(refused: localhost\. resolves to (127\.0\.0\.1|::1), a loopback address|host not found: localhost\.$)/],
    ['LocalHost', /^refused: localhost resolves to/],
    ['[::1]', /^refused: ::1 is a loopback address/],
    ['2130706433', /^refused: 127\.0\.0\.1 is a loopback address/],
    ['0x7f.1', /^refused: 127\.0\.0\.1 is a loopback address/],
    ['0177.0.0.1', /^refused: 127\.0\.0\.1 is a loopback address/],
    ['127.1', /^refused: 127\.0\.0\.1 is a loopback address/],
    ['%31%32%37.0.0.1', /^refused: 127\.0\.0\.1 is a loopback address/],
    ['[::ffff:127.0.0.1]', /^refused: ::ffff:7f00:1 \(127\.0\.0\.1\) is a loopback address/],
    ['[::ffff:7f00:1]', /^refused: ::ffff:7f00:1 \(127\.0\.0\.1\) is a loopback address/],
    ['[::127.0.0.1]', /^refused: ::7f00:1 is a loopback address \(it carries IPv4 127\.0\.0\.1\)/],
    ['[64:ff9b::127.0.0.1]', /^refused: 64:ff9b::7f00:1 is a loopback address \(it carries IPv4 127\.0\.0\.1\)/],
    ['[2002:7f00:1::]', /^refused: 2002:7f00:1:: is a loopback address/],
    ['169.254.169.254', /^refused: 169\.254\.169\.254 is a link-local address/],
    ['[fe80::1]', /^refused: fe80::1 is a link-local address/],
    ['10.0.0.1', /^refused: 10\.0\.0\.1 is a private address/],
    ['192.168.1.1', /^refused: 192\.168\.1\.1 is a private address/],
    ['172.16.0.1', /^refused: 172\.16\.0\.1 is a private address/],
    ['[fd00::1]', /^refused: fd00::1 is a private address/],
    ['100.64.0.1', /^refused: 100\.64\.0\.1 is a shared \(carrier-grade NAT\) address/],
    ['0.0.0.0', /^refused: 0\.0\.0\.0 is an unspecified address/],
    ['0', /^refused: 0\.0\.0\.0 is an unspecified address/],
    ['[::]', /^refused: :: is an unspecified address/],
    ['224.0.0.1', /^refused: 224\.0\.0\.1 is a multicast address/],
    ['255.255.255.255', /^refused: 255\.255\.255\.255 is the broadcast address/],
  ];
  const client = createGuardedClient({ timeoutMs: 1000 });

  it.each(refusedHosts)('refuses http://%s:<port>/ without connecting', async (host, message) => {
    const error = await failure(client.getJson(`http://${host}:${port}/json`));
    expect(error.message).toMatch(message);
    expect(connections).toBe(0);
  });

  it('refuses https the same way, before any connection', async () => {
    expect((await failure(client.getJson(`https://127.0.0.1:${port}/json`))).message).toMatch(/^refused: 127\.0\.0\.1 is a loopback/);
    expect(connections).toBe(0);
  });

  it('refuses other schemes, URLs with credentials and what is not a URL', async () => {
    for (const url of [
      'file:///etc/passwd',
      `ftp://127.0.0.1:${port}/`,
      'gopher://example.com/',
      'data:application/json,{}',
      'javascript:1',
    ]) {
      expect((await failure(client.getJson(url))).message).toBe('refused: only http: and https: URLs are fetched');
    }
    expect((await failure(local.getJson(`http://user:pw@127.0.0.1:${port}/json`))).message).toBe(
      'refused: the URL carries credentials, and none are sent',
    );
    expect((await failure(client.getJson('not a url'))).message).toBe('not a valid URL');
    expect((await failure(client.getJson('http://[::1/'))).message).toBe('not a valid URL');
    expect(connections).toBe(0);
  });

  it('an allowed host name does not allow another host on the same address', async () => {
    const onlyLocalhost = createGuardedClient({ allow: ['localhost'] });
    expect((await failure(onlyLocalhost.getJson(`http://127.0.0.1:${port}/json`))).message).toMatch(/^refused: 127\.0\.0\.1 is a loopback/);
    const onlyTen = createGuardedClient({ allow: ['10.1.0.0/16'], lookup: () => Promise.resolve([{ address: '10.2.0.1', family: 4 }]) });
    expect((await failure(onlyTen.getJson(`http://ten.test:${port}/json`))).message).toMatch(
      /^refused: ten\.test resolves to 10\.2\.0\.1, a private/,
    );
    expect(connections).toBe(0);
  });

  it('an allowed IPv4 address does not allow the NAT64 or 6to4 forms that carry it', async () => {
    const error = await failure(local.getJson(`http://[64:ff9b::7f00:1]:${port}/json`));
    expect(error.message).toMatch(/^refused: 64:ff9b::7f00:1 is a loopback address/);
    expect(connections).toBe(0);
  });
});

describe('guarded client: allowed', () => {
  it('fetches JSON from an allow-listed CIDR, with its own headers and no credentials', async () => {
    await expect(local.getJson(`http://127.0.0.1:${port}/json?a=1#frag`)).resolves.toEqual({ ok: true, items: [1, 2] });
    expect(seen).toHaveLength(1);
    const [request] = seen;
    expect(request?.url).toBe('/json?a=1');
    expect(request?.headers).toMatchObject({
      accept: 'application/json',
      'accept-encoding': 'identity',
      'user-agent': 'admin-notifications',
      host: `127.0.0.1:${port}`,
    });
    expect(request?.headers.authorization).toBeUndefined();
    expect(request?.headers.cookie).toBeUndefined();
  });

  it('an IPv4-mapped literal is the IPv4 address: allowed by 127.0.0.1/32', async () => {
    await expect(local.getJson(`http://[::ffff:127.0.0.1]:${port}/json`)).resolves.toEqual({ ok: true, items: [1, 2] });
  });

  it('fetches from an allow-listed host name, matched case-insensitively, resolved by DNS', async () => {
    const byName = createGuardedClient({ allow: ['LOCALHOST'] });
    await expect(byName.getJson(`http://localhost:${port}/json`)).resolves.toEqual({ ok: true, items: [1, 2] });
    expect(seen[0]?.headers.host).toBe(`localhost:${port}`);
  });

  it('allows by single IP and by a wider CIDR too', async () => {
    for (const allow of ['127.0.0.1', '127.0.0.0/8', '::ffff:127.0.0.0/104']) {
      await expect(createGuardedClient({ allow: [allow] }).getJson(`http://127.0.0.1:${port}/json`), allow).resolves.toEqual({
        ok: true,
        items: [1, 2],
      });
    }
  });
});

describe('guarded client: resolution is checked, then pinned', () => {
  it('refuses a host whose lookup answers a private address, without connecting', async () => {
    const client = createGuardedClient({ lookup: () => Promise.resolve([{ address: '10.0.0.7', family: 4 }]) });
    expect((await failure(client.getJson(`http://internal.example:${port}/json`))).message).toBe(
      'refused: internal.example resolves to 10.0.0.7, a private address (allow it in OUTBOUND_ALLOW)',
    );
    expect(connections).toBe(0);
  });

  it('refuses when any one of the addresses is refused', async () => {
    const client = createGuardedClient({
      lookup: () =>
        Promise.resolve([
          { address: '93.184.215.14', family: 4 },
          { address: '::ffff:169.254.169.254', family: 6 },
        ]),
    });
    expect((await failure(client.getJson(`http://mixed.example:${port}/json`))).message).toMatch(
      /^refused: mixed\.example resolves to 169\.254\.169\.254, a link-local address/,
    );
    expect(connections).toBe(0);
  });

  it('connects to the address it checked: a second, rebound answer is never asked for', async () => {
    const answers = [[{ address: '127.0.0.1', family: 4 }], [{ address: '10.9.9.9', family: 4 }]];
    const asked: string[] = [];
    const lookup: OutboundLookup = (hostname) => {
      asked.push(hostname);
      return Promise.resolve(answers[Math.min(asked.length - 1, 1)] ?? []);
    };
    const client = createGuardedClient({ allow: ['127.0.0.1/32'], lookup });
    await expect(client.getJson(`http://rebind.example:${port}/json`)).resolves.toEqual({ ok: true, items: [1, 2] });
    expect(asked).toEqual(['rebind.example']);
    expect(connections).toBe(1); // the local server, i.e. 127.0.0.1, the checked address
    expect(seen[0]?.headers.host).toBe(`rebind.example:${port}`);
  });

  it('a lookup that never answers is the time limit', async () => {
    const client = createGuardedClient({ timeoutMs: 200, lookup: () => new Promise(() => undefined) });
    expect((await failure(client.getJson('http://slow-dns.example/'))).message).toBe('timed out after 200 ms');
  });

  it('a host that does not exist says so', async () => {
    const client = createGuardedClient({
      lookup: () => Promise.reject(Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' })),
    });
    expect((await failure(client.getJson('http://nowhere.invalid/'))).message).toBe('host not found: nowhere.invalid');
    const empty = createGuardedClient({ lookup: () => Promise.resolve([]) });
    expect((await failure(empty.getJson('http://nowhere.invalid/'))).message).toBe('host not found: nowhere.invalid');
  });

  it('a lookup answering something that is not an address is refused', async () => {
    const client = createGuardedClient({ lookup: () => Promise.resolve([{ address: 'evil', family: 4 }]) });
    expect((await failure(client.getJson('http://odd.example/'))).message).toMatch(
      /^refused: odd\.example resolved to something that is not an IP address/,
    );
  });
});

describe('guarded client: answers', () => {
  // /hang never answers and /drip never ends: only the time limit can end these calls, so that
  // they end at all proves it, and no upper bound on the wall clock (a loaded machine's) is needed.
  it('times out a server that never answers, at the limit', async () => {
    const client = createGuardedClient({ allow: ['127.0.0.1/32'], timeoutMs: 300 });
    const started = Date.now();
    expect((await failure(client.getJson(`http://127.0.0.1:${port}/hang`))).message).toBe('timed out after 300 ms');
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('the time limit covers the body: a server that drips it is cut', async () => {
    const client = createGuardedClient({ allow: ['127.0.0.1/32'], timeoutMs: 300 });
    expect((await failure(client.getJson(`http://127.0.0.1:${port}/drip`))).message).toBe('timed out after 300 ms');
  });

  it('cuts a chunked body over the limit, with no Content-Length to trust', async () => {
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/large`))).message).toBe('answer over 1048576 bytes');
    const small = createGuardedClient({ allow: ['127.0.0.1/32'], maxBytes: 10 });
    expect((await failure(small.getJson(`http://127.0.0.1:${port}/json`))).message).toBe('answer over 10 bytes');
  });

  it('refuses a declared Content-Length over the limit before reading', async () => {
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/declared-large`))).message).toBe('answer over 1048576 bytes');
  });

  it('refuses a compressed answer', async () => {
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/gzip`))).message).toBe(
      'compressed answer refused (Content-Encoding gzip)',
    );
  });

  it('not JSON, and not UTF-8, are failures', async () => {
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/text`))).message).toBe('not JSON');
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/latin1`))).message).toBe('not JSON');
  });

  it('does not follow a redirect', async () => {
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/redirect`))).message).toBe('HTTP 302: redirect not followed');
    expect(seen.map((s) => s.url)).toEqual(['/redirect']);
  });

  it('a non-2xx answer is its status, never its body', async () => {
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/error`))).message).toBe('HTTP 500');
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/unavailable`))).message).toBe('HTTP 503');
    expect((await failure(local.getJson(`http://127.0.0.1:${port}/missing`))).message).toBe('HTTP 404');
  });

  it('a refused connection says so', async () => {
    const closed = http.createServer();
    await new Promise<void>((done) => closed.listen(0, '127.0.0.1', done));
    const closedPort = (closed.address() as AddressInfo).port;
    await new Promise<void>((done) =>
      closed.close(() => {
        done();
      }),
    );
    expect((await failure(local.getJson(`http://127.0.0.1:${closedPort}/`))).message).toBe('connection refused');
  });
});

// A self-signed certificate, made here with openssl when the machine has it.
function selfSigned(): { key: Buffer; cert: Buffer } | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'guarded-tls-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '1',
        '-subj',
        '/CN=pinned.example',
        '-addext',
        'subjectAltName=DNS:pinned.example',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
      ],
      { stdio: 'ignore' },
    );
    return { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };
  } catch {
    return undefined;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const tls = selfSigned();

describe.skipIf(tls === undefined)('guarded client: https', () => {
  it('pins the checked address, sends the host name for TLS, and verifies the certificate', async () => {
    let servername: string | undefined;
    const options: https.ServerOptions = {
      ...(tls as { key: Buffer; cert: Buffer }),
      SNICallback: (name, done) => {
        servername = name;
        done(null); // the server's own certificate
      },
    };
    const secure = https.createServer(options, (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"secure":true}');
    });
    secure.on('tlsClientError', () => undefined);
    await new Promise<void>((done) => secure.listen(0, '127.0.0.1', done));
    const securePort = (secure.address() as AddressInfo).port;
    try {
      const client = createGuardedClient({ allow: ['127.0.0.1/32'], lookup: () => Promise.resolve([{ address: '127.0.0.1', family: 4 }]) });
      // The certificate is not one a public authority signed: refused, and said so without its words.
      expect((await failure(client.getJson(`https://pinned.example:${securePort}/`))).message).toMatch(
        /^TLS failed \((DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)\)$/,
      );
      expect(servername).toBe('pinned.example'); // the name, though the connection went to the pinned 127.0.0.1
    } finally {
      secure.closeAllConnections();
      await new Promise<void>((done) =>
        secure.close(() => {
          done();
        }),
      );
    }
  });
});
