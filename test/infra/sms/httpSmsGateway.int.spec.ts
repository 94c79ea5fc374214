import http, { type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryFailed, type OutgoingSms } from '../../../domain/ports.ts';
import { HttpSmsGateway } from '../../../infra/sms/httpSmsGateway.ts';

type Received = { method: string; url: string; headers: IncomingHttpHeaders; body: string };

let server: Server;
let base: string;
let received: Received[] = [];
/** What the gateway does next: answer a status (with a body naming internals), hang, or reset. */
let behaviour: number | 'hang' | 'reset' = 202;

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      if (behaviour === 'hang') return;
      if (behaviour === 'reset') {
        req.socket.destroy();
        return;
      }
      const status = behaviour;
      res.writeHead(status, { 'content-type': 'application/json', ...(status === 302 ? { location: '/elsewhere' } : {}) });
      res.end(JSON.stringify({ error: 'smsc-3.internal rejected: quota of account 42' }));
    });
  });
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterEach(() => {
  received = [];
  behaviour = 202;
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

const sms: OutgoingSms = { messageId: 'notif-7f3a', to: ['+33612345678', '+4915112345678'], text: 'Panne réseau résolue à 14:05 ✓' };

async function failure(promise: Promise<unknown>): Promise<DeliveryFailed> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(DeliveryFailed);
    return error as DeliveryFailed;
  }
  throw new Error('expected DeliveryFailed');
}

describe('HttpSmsGateway', () => {
  it('POSTs one JSON body per SMS with the idempotency key and the bearer token', async () => {
    const gateway = new HttpSmsGateway({ url: `${base}/v1/sms?account=ops`, token: 's3cret-token' });
    await expect(gateway.send(sms)).resolves.toBeUndefined();
    expect(received).toHaveLength(1);
    const [request] = received;
    expect(request?.method).toBe('POST');
    expect(request?.url).toBe('/v1/sms?account=ops');
    expect(request?.headers).toMatchObject({
      'content-type': 'application/json',
      'idempotency-key': 'notif-7f3a',
      authorization: 'Bearer s3cret-token',
      'user-agent': 'admin-notifications',
      accept: 'application/json',
      connection: 'close',
    });
    expect(JSON.parse(request?.body ?? '')).toEqual({
      messageId: 'notif-7f3a',
      to: ['+33612345678', '+4915112345678'],
      text: 'Panne réseau résolue à 14:05 ✓',
    });
    await gateway.close();
  });

  it('sends no Authorization header without a token', async () => {
    await new HttpSmsGateway({ url: base }).send(sms);
    expect(received[0]?.headers.authorization).toBeUndefined();
  });

  it('any 2xx is taken', async () => {
    for (const status of [200, 201, 202, 204]) {
      behaviour = status;
      await expect(new HttpSmsGateway({ url: base }).send(sms)).resolves.toBeUndefined();
    }
  });

  it.each([500, 502, 503, 408, 429])('HTTP %i is transient, and the message holds the status, not the body', async (status) => {
    behaviour = status;
    const error = await failure(new HttpSmsGateway({ url: base, token: 's3cret-token' }).send(sms));
    expect(error.transient).toBe(true);
    expect(error.message).toBe(`SMS gateway HTTP ${status}: the gateway asked to try again later`);
  });

  it.each([400, 401, 403, 404, 422])('HTTP %i is permanent', async (status) => {
    behaviour = status;
    const error = await failure(new HttpSmsGateway({ url: base, token: 's3cret-token' }).send(sms));
    expect(error.transient).toBe(false);
    expect(error.message).toBe(`SMS gateway HTTP ${status}: the gateway refused the message`);
    expect(error.message).not.toMatch(/smsc|quota|s3cret/);
  });

  it('does not follow a redirect: permanent, and the body goes nowhere else', async () => {
    behaviour = 302;
    const error = await failure(new HttpSmsGateway({ url: base }).send(sms));
    expect(error).toMatchObject({ transient: false, message: 'SMS gateway HTTP 302: redirect not followed' });
    expect(received.map((r) => r.url)).toEqual(['/']);
  });

  it('a gateway that does not answer in time is transient', async () => {
    // It never answers: only the time limit ends the call (no upper bound on a loaded machine's clock).
    behaviour = 'hang';
    const started = Date.now();
    const error = await failure(new HttpSmsGateway({ url: base, timeoutMs: 300 }).send(sms));
    expect(error).toMatchObject({ transient: true, message: 'SMS gateway timed out after 300 ms' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('a refused connection is transient', async () => {
    const closed = http.createServer();
    await new Promise<void>((done) => closed.listen(0, '127.0.0.1', done));
    const port = (closed.address() as AddressInfo).port;
    await new Promise<void>((done) =>
      closed.close(() => {
        done();
      }),
    );
    const error = await failure(new HttpSmsGateway({ url: `http://127.0.0.1:${port}/` }).send(sms));
    expect(error).toMatchObject({
      transient: true,
      message: 'SMS gateway ECONNREFUSED: the gateway could not be reached or did not answer',
    });
  });

  it('a connection reset before the answer is transient', async () => {
    behaviour = 'reset';
    const error = await failure(new HttpSmsGateway({ url: base }).send(sms));
    expect(error.transient).toBe(true);
    expect(error.message).toMatch(/^SMS gateway [A-Z0-9_]+: the gateway could not be reached or did not answer$/);
  });

  it('a message id that cannot be a header is permanent, and nothing is sent', async () => {
    const error = await failure(new HttpSmsGateway({ url: base }).send({ ...sms, messageId: 'bad\r\nX-Injected: 1' }));
    expect(error.transient).toBe(false);
    expect(received).toHaveLength(0);
  });

  it('refuses a configuration it cannot use, when made', () => {
    expect(() => new HttpSmsGateway({ url: 'not a url' })).toThrow(/SMS_GATEWAY_URL/);
    expect(() => new HttpSmsGateway({ url: 'ftp://gateway/' })).toThrow(/SMS_GATEWAY_URL/);
    expect(() => new HttpSmsGateway({ url: 'https://user:pw@gateway/' })).toThrow(/SMS_GATEWAY_TOKEN/);
    expect(() => new HttpSmsGateway({ url: base, token: 'has space' })).toThrow(/SMS_GATEWAY_TOKEN/);
  });
});
