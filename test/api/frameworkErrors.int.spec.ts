// Requests that fail before any route runs, over raw sockets: errors of Node's HTTP parser (answered
// by the clientErrorHandler) and of fastify's router (frameworkErrors) carry the error body too.

import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorBodySchema } from '../../api/errorHandler.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

type RawResponse = { status: number; headers: Map<string, string>; body: string };

let t: TestApp;
let port: number;
beforeAll(async () => {
  t = await startTestApp();
  port = Number(new URL(await t.listen()).port);
});
afterAll(async () => {
  await t.close();
});

/** Sends bytes as they are and reads until the server closes; a reset after the answer (the server
 * closes with part of an oversized request unread) does not lose what arrived before it. */
function raw(request: string): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const finish = () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head = '', ...rest] = text.split('\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    };
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error) => {
      if (chunks.length === 0) reject(error);
    });
    socket.on('close', finish);
    socket.write(request);
  });
}

const get = (path: string, headers: Record<string, string> = {}) =>
  raw(
    `GET ${path} HTTP/1.1\r\nHost: localhost\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}Connection: close\r\n\r\n`,
  );

function errorBodyOf(res: RawResponse) {
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return ErrorBodySchema.parse(JSON.parse(res.body));
}

const TRACE_ID = /^[0-9a-f]{32}$/;

describe("errors of Node's HTTP parser", () => {
  it('answers oversized headers with 431, the error body and Connection: close', async () => {
    const res = await get('/health/live', { 'x-filler': 'a'.repeat(20_000) });
    expect(res.status).toBe(431);
    expect(res.headers.get('connection')).toBe('close');
    const body = errorBodyOf(res);
    expect(body).toMatchObject({ status: 'REQUEST_HEADER_FIELDS_TOO_LARGE', errors: [] });
    expect(body.traceId).toMatch(TRACE_ID);
    expect(body.message).not.toContain('aaaa');
  });

  it('answers a 100 KB URL with an error status and the error body', async () => {
    const res = await get(`/api/v1/user-group-types?search=${'q'.repeat(100_000)}`);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    const body = errorBodyOf(res);
    expect(body.traceId).toMatch(TRACE_ID);
    expect(body.message).not.toContain('qqqq');
  });

  it('answers a malformed request line with 400 and the error body', async () => {
    const res = await raw('NOT AN HTTP REQUEST\r\n\r\n');
    expect(res.status).toBe(400);
    expect(res.headers.get('connection')).toBe('close');
    expect(errorBodyOf(res)).toMatchObject({ status: 'BAD_REQUEST', traceId: expect.stringMatching(TRACE_ID) });
  });

  it('leaves a healthy request on the same server unaffected', async () => {
    const res = await get('/health/live');
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ status: 'UP' });
  });
});

describe("errors of fastify's router", () => {
  const path = '/api/v1/user-group-types/%E0%A4%A';

  it('answers invalid percent-encoding with 400 and a message that does not echo the URL', async () => {
    const res = await get(path);
    expect(res.status).toBe(400);
    const body = errorBodyOf(res);
    expect(body.status).toBe('BAD_REQUEST');
    expect(body.message).toBe('Malformed URL: invalid percent-encoding');
    expect(body.message).not.toContain('user-group-types');
    expect(body.traceId).toMatch(TRACE_ID);
  });

  it('takes the trace id from traceparent, as every other answer does', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const res = await get(path, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    expect(errorBodyOf(res).traceId).toBe(traceId);
  });

  it("answers a path parameter past the router's limit with 400 without echoing it", async () => {
    const res = await get(`/api/v1/user-group-types/${'x'.repeat(3000)}`);
    expect(res.status).toBe(400);
    const body = errorBodyOf(res);
    expect(body.message).not.toContain('xxxx');
    expect(body.traceId).toMatch(TRACE_ID);
  });
});
