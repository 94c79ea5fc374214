// What an adversarial probe of `npm start` found after the first hardening round, each case
// failing before its fix: slow refusals of huge bodies, bytes and values changed instead of
// refused, waits that could not end, framework answers without the error body.

import { randomUUID } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { formatterTemplate } from '../../modules/registries/domain/formatterTemplate.ts';
import { userGroupType } from '../../modules/registries/domain/userGroupType.ts';
import { cpuTimed } from '../support/cpuTime.ts';
import { sampleBody, uniqueCode } from '../support/samples.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
let base: string;
beforeAll(async () => {
  t = await startTestApp();
  base = await t.listen();
});
afterAll(async () => {
  await t.close();
});
const groups = '/api/v1/user-group-types';
type ErrorBody = { status: string; code: string; message: string; traceId: string; errors: string[] };

/** A raw request over a socket: what fetch will not send. */
function raw(request: string | Buffer): Promise<string> {
  const { port } = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => socket.end(request));
    let text = '';
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
    });
    socket.on('end', () => {
      resolve(text);
    });
    socket.on('error', reject);
  });
}
const bodyOf = (response: string): ErrorBody => JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4)) as ErrorBody;

// "At once" is CPU time of the test's thread, where the app runs under inject: what the refusal
// costs, which a loaded machine does not change (its wall time it does).
describe('huge bodies are refused before they are walked', () => {
  it('a million empty arrays: 400 at once', async () => {
    const { value: res, cpuMs } = await cpuTimed(() =>
      t.call({
        method: 'POST',
        url: groups,
        payload: `{"code":"X","name":"x","registry":{"a":[${Array(1_000_000).fill('[]').join(',')}]}}`,
      }),
    );
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().message).toMatch(/more than 50000 values/);
    expect(cpuMs).toBeLessThan(1000);
  });

  it('a 3 MB value: 413 at once', async () => {
    const { value: res, cpuMs } = await cpuTimed(() =>
      t.call({
        method: 'POST',
        url: groups,
        payload: { ...sampleBody(userGroupType, uniqueCode()), registry: { a: 'x'.repeat(3_000_000) } },
      }),
    );
    expect(res.statusCode).toBe(413);
    expect(cpuMs).toBeLessThan(1000);
  });

  it('a body with 60,000 bad keys answers at most 101 error lines', async () => {
    const localizationData = Object.fromEntries(Array.from({ length: 30_000 }, (_, i) => [`BAD${String(i)}`, {}]));
    const res = await t.call({ method: 'POST', url: groups, payload: { ...sampleBody(userGroupType, uniqueCode()), localizationData } });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().errors.length).toBeLessThanOrEqual(101);
  });
});

describe('bytes and values are refused, not changed', () => {
  it('a charset other than UTF-8 is 415, bytes that are not UTF-8 are 400, a content coding is 415', async () => {
    const latin1 = await fetch(`${base}/api/v1/worklog-types`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.tokens.admin}`, 'content-type': 'application/json; charset=latin1' },
      body: Buffer.from('{"code":"lat1","name":"caf\xe9"}', 'latin1'),
    });
    expect(latin1.status).toBe(415);
    const bad = await fetch(`${base}/api/v1/worklog-types`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.tokens.admin}`, 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from('{"code":"bad","name":"'), Buffer.from([0xc0, 0x80]), Buffer.from('"}')]),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as ErrorBody).message).toMatch(/UTF-8/);
    const gzip = await t.call({
      method: 'POST',
      url: '/api/v1/worklog-types',
      headers: { 'content-encoding': 'gzip' },
      payload: { code: uniqueCode(), name: 'n' },
    });
    expect(gzip.statusCode).toBe(415);
  });

  it('a lone surrogate is 400', async () => {
    const res = await t.call({ method: 'POST', url: groups, payload: `{"code":"${uniqueCode()}","name":"a\\ud800b","registry":{}}` });
    expect(res.statusCode).toBe(400);
  });

  it('a date-time finer than milliseconds is 400; an offset is kept as the same instant in UTC', async () => {
    const fine = await t.call({
      method: 'POST',
      url: groups,
      payload: { ...sampleBody(userGroupType, uniqueCode()), validityFrom: '2024-01-01T00:00:00.123456789Z' },
    });
    expect(fine.statusCode).toBe(400);
    const zeros = await t.call({
      method: 'POST',
      url: groups,
      payload: { ...sampleBody(userGroupType, uniqueCode()), validityFrom: '2024-01-01T02:00:00.123000+02:00' },
    });
    expect(zeros.statusCode).toBe(201);
    expect(zeros.json<{ validityFrom: string }>().validityFrom).toBe('2024-01-01T00:00:00.123Z');
  });

  it('a UUID is kept in lower case, so EQ finds it however it is sent', async () => {
    const formId = randomUUID().toUpperCase();
    const created = await t.call({
      method: 'POST',
      url: '/api/v1/formatter-templates',
      payload: { ...sampleBody(formatterTemplate, uniqueCode()), formId },
    });
    expect(created.json<{ formId: string }>().formId).toBe(formId.toLowerCase());
    const position = String(created.headers['x-event-position']);
    const found = await t.call({
      method: 'POST',
      url: `/api/v1/formatter-templates/count?minPosition=${position}`,
      payload: { filter: [{ column: 'formId', value: formId }] },
    });
    expect(found.json()).toBe(1);
  });

  it('a retried create that echoes auditInfo (ignored) is the same request', async () => {
    const key = randomUUID();
    const body = sampleBody(userGroupType, uniqueCode());
    const first = await t.call({ method: 'POST', url: groups, headers: { 'idempotency-key': key }, payload: body });
    const again = await t.call({
      method: 'POST',
      url: groups,
      headers: { 'idempotency-key': key },
      payload: { ...body, auditInfo: { version: 0 } },
    });
    expect([first.statusCode, again.statusCode]).toEqual([201, 201]);
  });

  it('a relative URL that a browser reads as another host is 400', async () => {
    for (const evalNotificationUrl of ['/\\evil.com', '//evil.com', ' http://x', 'http://x\u0000']) {
      const res = await t.call({
        method: 'POST',
        url: '/api/v1/notification-rules',
        payload: { code: uniqueCode(), name: 'n', evalNotificationUrl },
      });
      expect(res.statusCode, evalNotificationUrl).toBe(400);
    }
  });

  it('whole numbers in paths and queries are decimal digits only', async () => {
    const created = (await t.call({ method: 'POST', url: groups, payload: sampleBody(userGroupType, uniqueCode()) })).json<{
      id: string;
    }>();
    expect((await t.call({ method: 'GET', url: `${groups}/${created.id}/versions/%20` })).statusCode).toBe(400);
    expect((await t.call({ method: 'GET', url: `${groups}/${created.id}/versions/0x0` })).statusCode).toBe(400);
    expect((await t.call({ method: 'POST', url: `${groups}/search?size=0x10`, payload: {} })).statusCode).toBe(400);
    expect((await t.call({ method: 'GET', url: `${groups}/${created.id}/versions/0` })).statusCode).toBe(200);
  });
});

describe('answers that could not end, or came without the error body', () => {
  it('a minPosition past the newest write is 400 at once, not a 5 s wait', async () => {
    // The wait answered 503 READ_MODEL.LAGGING when it ran out: a 400 is the answer without it.
    const res = await t.call({ method: 'GET', url: `${groups}?minPosition=99999999999` });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().message).toBe('minPosition is ahead of the log');
  });

  it('a 404 does not repeat the path', async () => {
    const res = await t.call({ method: 'GET', url: '/api/v1/<script>secretpath' });
    expect(res.statusCode).toBe(404);
    expect(res.body).not.toContain('secretpath');
  });

  it('an all-zero traceparent is ignored', async () => {
    const res = await t.call({
      method: 'GET',
      url: `${groups}/nope`,
      headers: { traceparent: `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01` },
    });
    expect(res.json<ErrorBody>().traceId).toMatch(/^(?!0{32})[0-9a-f]{32}$/);
  });

  it('an Expect other than 100-continue is 417 and CONNECT is 405, both with the error body', async () => {
    const expectation = await raw(`GET /health/live HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nConnection: close\r\n\r\n`);
    expect(expectation).toMatch(/^HTTP\/1\.1 417/);
    expect(bodyOf(expectation)).toMatchObject({ status: 'EXPECTATION_FAILED', code: 'HTTP.EXPECTATION_FAILED' });
    const tunnel = await raw(`CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n`);
    expect(tunnel).toMatch(/^HTTP\/1\.1 405/);
    expect(bodyOf(tunnel)).toMatchObject({ status: 'METHOD_NOT_ALLOWED' });
  });
});
