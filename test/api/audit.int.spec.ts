// The audit feed on the embedded stores: JSON pages equal the log, filters, roles, secrets kept
// out, and live streams over a real socket (reconnects with Last-Event-ID under write load, caps,
// backpressure, shutdown).

import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signHs256 } from '../../api/auth.ts';
import { auditStream, auditView, type AuditEvent } from '../../modules/audit/api/audit.ts';
import { modules } from '../../modules/index.ts';
import type { EventStore, ReadAllOptions, RecordedEvent } from '../../domain/ports.ts';
import { openEmbeddedStores } from '../../infra/embedded.ts';
import { givePassword } from '../support/passwords.ts';
import { startTestApp, TEST_SECRET, type TestApp } from '../support/testApp.ts';

type Page = { events: AuditEvent[]; next: string };
type ErrorBody = { status: string; code: string; message: string; errors: string[] };

const bearer = async (sub: string, roles: string[]) => `Bearer ${await signHs256(TEST_SECRET, { sub, roles })}`;

/** The log as the store holds it, whole. */
const wholeLog = (store: EventStore): Promise<RecordedEvent[]> => store.readAll({ after: 0n, limit: 1_000_000 });

/** Server-Sent Events read from a fetch body: each message's fields, comments left out. */
async function* messagesOf(body: ReadableStream<Uint8Array>): AsyncGenerator<{ id?: string; data?: string; retry?: string }, void> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const message: { id?: string; data?: string; retry?: string } = {};
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = line.slice(0, colon);
        const value = line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id' || field === 'data' || field === 'retry') message[field] = value;
      }
      if (Object.keys(message).length > 0) yield message;
    }
  }
}

/** Opens a stream as EventSource would: a 429 or 503 (the server has not yet seen an earlier
 * connection of the test go) is tried again shortly. */
async function openStream(url: string, headers: Record<string, string>, controller = new AbortController()): Promise<Response> {
  for (;;) {
    const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: controller.signal });
    if (res.status !== 429 && res.status !== 503) return res;
    await res.text();
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('audit feed', () => {
  let t: TestApp;
  let store: EventStore;
  let base: string;
  let auditor: string;

  const feed = async (query: string, authorization = auditor, headers: Record<string, string> = {}) => {
    const res = await fetch(`${base}/api/v1/audit/events${query}`, { headers: { authorization, ...headers } });
    return { status: res.status, headers: res.headers, text: await res.text() };
  };
  const page = async (query: string): Promise<Page> => {
    const res = await feed(query);
    expect(res.status, res.text).toBe(200);
    return JSON.parse(res.text) as Page;
  };

  beforeAll(async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'admin-audit-'));
    const stores = openEmbeddedStores(dataDir);
    store = stores.eventStore;
    t = await startTestApp({ dataDir, stores, extra: { settings: { audit: { heartbeatMs: 200 } } } });
    base = await t.listen();
    auditor = await bearer('audra-auditor', ['auditor']);
    await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
    for (let i = 0; i < 12; i++)
      await t.call({ method: 'POST', url: '/api/v1/log-types', payload: { code: `AUDIT_${String(i)}`, name: `Log type ${String(i)}` } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('is for admin and auditor only; the auditor reads records too but writes none', async () => {
    expect((await feed('', `Bearer ${t.tokens.admin}`)).status).toBe(200);
    expect((await feed('')).status).toBe(200);
    for (const who of ['viewer', 'editor', 'nobody'] as const) {
      const res = await feed('', `Bearer ${t.tokens[who]}`);
      expect(res.status).toBe(403);
      expect(JSON.parse(res.text)).toMatchObject({ status: 'FORBIDDEN' });
    }
    expect((await fetch(`${base}/api/v1/audit/events`)).status).toBe(401);
    expect((await fetch(`${base}/api/v1/log-types/AUDIT_1`, { headers: { authorization: auditor } })).status).toBe(200);
    const write = await fetch(`${base}/api/v1/log-types`, {
      method: 'POST',
      headers: { authorization: auditor, 'content-type': 'application/json' },
      body: JSON.stringify({ code: 'NOPE', name: 'No' }),
    });
    expect(write.status).toBe(403);
  });

  it('paged through with next, equals the log', async () => {
    const seen: AuditEvent[] = [];
    let after = '0';
    for (;;) {
      const p = await page(`?after=${after}&limit=7`);
      seen.push(...p.events);
      expect(BigInt(p.next) >= BigInt(after)).toBe(true);
      after = p.next;
      if (p.events.length < 7) break;
    }
    const log = await wholeLog(store);
    expect(seen.map((e) => [e.position, e.stream, e.version, e.type, e.actor, e.at])).toEqual(
      log.map((e) => [e.position.toString(), e.stream, e.revision, e.type, e.metadata.actor, e.metadata.at]),
    );
    // The default page and the first page agree; the last page's next is the head.
    expect((await page('')).events.slice(0, 7)).toEqual(seen.slice(0, 7));
    expect(after).toBe((await store.headPosition()).toString());
  });

  it('pages of more than one read of the log join up: large limits equal the log too', async () => {
    const stream = `auditTest-${randomUUID()}`;
    const events = Array.from({ length: 250 }, (_, i) => ({
      id: randomUUID(),
      type: 'Filled',
      schemaVersion: 1,
      data: { n: i },
      metadata: { actor: 'loader', at: new Date(0).toISOString() },
    }));
    await store.append({ stream, expected: 'no_stream', events });
    const log = (await wholeLog(store)).map((e) => e.position.toString());
    const seen: string[] = [];
    let after = '0';
    for (;;) {
      const p = await page(`?after=${after}&limit=120`);
      seen.push(...p.events.map((e) => e.position));
      if (p.events.length === 120) expect(p.next).toBe(p.events.at(-1)?.position);
      after = p.next;
      if (p.events.length < 120) break;
    }
    expect(seen).toEqual(log);
    // Events of a category no module declares show no data.
    expect((await page(`?after=${(BigInt(log.at(-1) ?? '1') - 1n).toString()}`)).events[0]).toMatchObject({
      stream,
      type: 'Filled',
      data: {},
    });
  });

  it('filters by types, categories and whole streams', async () => {
    const log = await wholeLog(store);
    const created = await page('?types=LogTypeCreated,UserTypeCreated&limit=1000');
    expect(created.events.map((e) => e.position)).toEqual(
      log.filter((e) => ['LogTypeCreated', 'UserTypeCreated'].includes(e.type)).map((e) => e.position.toString()),
    );

    const one = log.find((e) => e.type === 'LogTypeCreated');
    if (one === undefined) throw new Error('no log type was created');
    await t.call({ method: 'PATCH', url: `/api/v1/log-types/${String(one.data.id)}`, payload: { name: 'Renamed' } });
    const byStream = await page(`?streams=${one.stream}`);
    expect(byStream.events.map((e) => [e.stream, e.version, e.type])).toEqual([
      [one.stream, 0, 'LogTypeCreated'],
      [one.stream, 1, 'LogTypePatched'],
    ]);
    expect(byStream.events[1]?.data).toEqual({ patch: { name: 'Renamed' } });

    const mixed = await page(`?streams=user-types,${one.stream}&types=LogTypePatched,UserTypeCreated`);
    expect(await page(`?streams=userType,${one.stream}&types=LogTypePatched,UserTypeCreated`)).toEqual(mixed);
    const expected = (await wholeLog(store)).filter(
      (e) => (e.stream === one.stream || e.stream.startsWith('userType-')) && ['LogTypePatched', 'UserTypeCreated'].includes(e.type),
    );
    expect(expected.length).toBe(2);
    expect(mixed.events.map((e) => e.position)).toEqual(expected.map((e) => e.position.toString()));

    // A page that passes the filter's last match ends at the head, so the next read skips the rest.
    const narrow = await page(`?streams=${one.stream}&limit=5`);
    expect(narrow.next).toBe((await store.headPosition()).toString());
    expect((await page(`?streams=${one.stream}&after=${narrow.next}`)).events).toEqual([]);
  });

  it('answers 400 with the error body for a bad after, limit, type or stream', async () => {
    const head = await store.headPosition();
    for (const query of [
      '?after=abc',
      '?after=-1',
      `?after=${(head + 1n).toString()}`,
      '?limit=0',
      '?limit=1001',
      '?limit=1e3',
      '?types=NoSuchEvent',
      '?types=A,,B',
      '?streams=nosuch',
      '?streams=user-',
      '?unknown=1',
    ]) {
      const res = await feed(query);
      expect(res.status, query).toBe(400);
      const body = JSON.parse(res.text) as ErrorBody;
      expect(body.status).toBe('BAD_REQUEST');
      expect(body.errors.length, query).toBeGreaterThan(0);
    }
    const res = await feed('', auditor, { accept: 'text/event-stream', 'last-event-id': 'x1' });
    expect(res.status).toBe(400);
  });

  it('never shows a password hash; shows who wrote each event, deletes included', async () => {
    const code = `secret-${randomUUID().slice(0, 8)}`;
    const created = await t.call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code, type: 'INDIVIDUAL', givenName: 'S', chars: {} },
    });
    const id = created.json<{ id: string }>().id;
    expect(
      (await t.call({ method: 'PUT', url: `/api/v1/users/${code}/password`, payload: { password: 'a-long-enough-password-1' } }))
        .statusCode,
    ).toBe(204);
    const requestId = `req-${randomUUID()}`;
    const deleted = await t.call({ method: 'DELETE', url: `/api/v1/users/${code}`, as: 'editor', headers: { 'x-request-id': requestId } });
    expect(deleted.statusCode).toBe(204);

    // The log does hold the hash; the feed does not, as JSON or as a stream.
    const stored = (await store.readStream(`user-${id}`)).find((e) => e.type === 'UserPasswordChanged');
    const hash = String(stored?.data.passwordHash);
    expect(hash).toMatch(/^\$argon2id\$/);
    const json = await feed(`?streams=user-${id}`);
    expect(json.text).not.toContain(hash);
    expect(json.text).not.toContain('$argon2id');
    expect(json.text).not.toContain('passwordHash');
    const events = (JSON.parse(json.text) as Page).events;
    expect(events.map((e) => [e.type, e.actor])).toEqual([
      ['UserCreated', 'alice-admin'],
      ['UserPasswordChanged', 'alice-admin'],
      ['UserDeleted', 'eddie-editor'],
    ]);
    // The feed shows that it was an admin's reset, never the hash.
    expect(events[1]?.data).toEqual({ mustChangePassword: true });
    expect(events[2]).toMatchObject({ version: 2, requestId, correlationId: requestId });

    const controller = new AbortController();
    const res = await openStream(`${base}/api/v1/audit/events?after=0&streams=user-${id}`, { authorization: auditor }, controller);
    let text = '';
    const decoder = new TextDecoder();
    if (res.body === null) throw new Error('no body');
    for await (const chunk of res.body as ReadableStream<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      if (text.includes('UserDeleted')) break;
    }
    controller.abort();
    expect(text).toContain('UserPasswordChanged');
    expect(text).not.toContain('$argon2id');
    expect(text).not.toContain('passwordHash');
  });

  it('streams: catch-up, then live events, each with its position as id', async () => {
    const head = await store.headPosition();
    const log = await wholeLog(store);
    const from = log[log.length - 3]?.position ?? 0n;
    const controller = new AbortController();
    const res = await openStream(`${base}/api/v1/audit/events?after=${from.toString()}`, { authorization: auditor }, controller);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    if (res.body === null) throw new Error('no body');
    const messages = messagesOf(res.body);
    const first = (await messages.next()).value;
    expect(first).toEqual({ retry: '2000', id: from.toString() });
    const caughtUp: string[] = [];
    while (caughtUp.length < 2) {
      const m = (await messages.next()).value;
      if (m?.data !== undefined) caughtUp.push(m.id ?? '');
    }
    expect(caughtUp).toEqual(log.slice(-2).map((e) => e.position.toString()));
    expect(caughtUp.at(-1)).toBe(head.toString());
    const write = await t.call({ method: 'POST', url: '/api/v1/log-types', payload: { code: 'LIVE_ONE', name: 'Live' } });
    const live = (await messages.next()).value;
    expect(live?.id).toBe(write.headers['x-event-position']);
    expect(JSON.parse(live?.data ?? '{}')).toMatchObject({
      type: 'LogTypeCreated',
      position: live?.id,
      actor: 'alice-admin',
      data: { code: 'LIVE_ONE' },
    });
    controller.abort();
  });

  it('streams live events of one record only, when its stream is named', async () => {
    const created = await t.call({ method: 'POST', url: '/api/v1/log-types', payload: { code: 'ONE_STREAM', name: 'One' } });
    const id = created.json<{ id: string }>().id;
    const controller = new AbortController();
    const res = await openStream(
      `${base}/api/v1/audit/events?streams=logType-${id}&types=LogTypePatched,LogTypeDeleted`,
      { authorization: auditor },
      controller,
    );
    if (res.body === null) throw new Error('no body');
    const messages = messagesOf(res.body);
    await messages.next();
    for (const name of ['Two', 'Three']) {
      await t.call({ method: 'POST', url: '/api/v1/log-types', payload: { code: `OTHER_${name.toUpperCase()}`, name } });
      await t.call({ method: 'PATCH', url: `/api/v1/log-types/${id}`, payload: { name } });
    }
    await t.call({ method: 'DELETE', url: `/api/v1/log-types/${id}`, as: 'editor' });
    const got: AuditEvent[] = [];
    while (got.length < 3) {
      const m = (await messages.next()).value;
      if (m?.data !== undefined) got.push(JSON.parse(m.data) as AuditEvent);
    }
    controller.abort();
    expect(got.map((e) => [e.stream, e.version, e.type, e.actor, e.data])).toEqual([
      [`logType-${id}`, 1, 'LogTypePatched', 'alice-admin', { patch: { name: 'Two' } }],
      [`logType-${id}`, 2, 'LogTypePatched', 'alice-admin', { patch: { name: 'Three' } }],
      [`logType-${id}`, 3, 'LogTypeDeleted', 'eddie-editor', {}],
    ]);
  });

  it('a client disconnected 20 times during a write load, reconnecting with Last-Event-ID, sees every event once and in order', async () => {
    const start = await store.headPosition();
    let writing = true;
    const writer = async (w: number) => {
      let n = 0;
      while (writing) {
        const res = await t.call({
          method: 'POST',
          url: '/api/v1/log-types',
          payload: { code: `LOAD_${String(w)}_${String(n)}_${randomUUID().slice(0, 6)}`, name: 'load' },
        });
        expect(res.statusCode).toBe(201);
        n += 1;
      }
    };
    const writers = [writer(1), writer(2)];
    const received: string[] = [];
    let lastId = start.toString();
    for (let round = 0; round <= 20; round++) {
      const controller = new AbortController();
      const headers: Record<string, string> = { authorization: auditor, accept: 'text/event-stream' };
      // As EventSource does: every reconnection asks for the same URL, with Last-Event-ID (which wins over after).
      if (round > 0) headers['last-event-id'] = lastId;
      const res = await openStream(`${base}/api/v1/audit/events?after=${start.toString()}`, headers, controller);
      expect(res.status).toBe(200);
      if (res.body === null) throw new Error('no body');
      const want = round === 20 ? Number.POSITIVE_INFINITY : 1 + (round % 5) * 3;
      let got = 0;
      if (round === 20) {
        writing = false;
        await Promise.all(writers);
      }
      const head = round === 20 ? (await store.headPosition()).toString() : undefined;
      for await (const m of messagesOf(res.body)) {
        if (m.id !== undefined) lastId = m.id;
        if (m.data !== undefined) {
          const event = JSON.parse(m.data) as AuditEvent;
          expect(event.position).toBe(m.id);
          received.push(m.id ?? '');
          got += 1;
        }
        if (got >= want || m.id === head) break;
      }
      controller.abort();
    }
    const expected = (await store.readAll({ after: start, limit: 1_000_000 })).map((e) => e.position.toString());
    expect(expected.length).toBeGreaterThan(40);
    expect(received).toEqual(expected);
  });

  it('ends a stream once its caller may no longer read the feed (a login session whose user is disabled)', async () => {
    const code = `aud-${randomUUID().slice(0, 8)}`;
    expect(
      (
        await t.call({
          method: 'POST',
          url: '/api/v1/users',
          payload: { code, type: 'INDIVIDUAL', givenName: 'A', chars: {}, roles: ['auditor'] },
        })
      ).statusCode,
    ).toBe(201);
    const token = await givePassword(t, code, 'an-auditor-password-1');
    const res = await openStream(`${base}/api/v1/audit/events`, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    if (res.body === null) throw new Error('no body');
    const reader = res.body.getReader();
    await reader.read();
    expect((await t.call({ method: 'PATCH', url: `/api/v1/users/${code}`, payload: { status: 'DISABLE' } })).statusCode).toBe(200);
    for (;;) if ((await reader.read()).done) break;
    expect((await feed('', `Bearer ${token}`)).status).toBe(401);
  });

  it('sends heartbeat comments while nothing happens, and keeps a caller that may still read', async () => {
    const controller = new AbortController();
    const res = await openStream(`${base}/api/v1/audit/events?types=UserGroupDeleted`, { authorization: auditor }, controller);
    if (res.body === null) throw new Error('no body');
    const decoder = new TextDecoder();
    let text = '';
    for await (const chunk of res.body as ReadableStream<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      // Three heartbeats: the stream outlives the checks of its caller (one per heartbeat interval).
      if (text.split(': heartbeat\n\n').length > 3) break;
    }
    controller.abort();
    expect(text).toMatch(/^retry: 2000\nid: \d+\n\n(: heartbeat\n\n){3,}$/);
  });
});

describe('audit stream caps', () => {
  it('caps streams per caller (429) and per instance (503), with the error body and Retry-After', async () => {
    const open: AbortController[] = [];
    const connect = async (authorization: string) => {
      const controller = new AbortController();
      const res = await fetch(`${base}/api/v1/audit/events`, {
        headers: { authorization, accept: 'text/event-stream' },
        signal: controller.signal,
      });
      if (res.status === 200) {
        open.push(controller);
        return { status: res.status };
      }
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as ErrorBody };
    };
    const t = await startTestApp({ extra: { settings: { audit: { maxStreams: 6, maxStreamsPerCaller: 3 } } } });
    const base = await t.listen();
    try {
      const one = await bearer('cap-one', ['auditor']);
      for (let i = 0; i < 3; i++) expect((await connect(one)).status).toBe(200);
      const fourth = await connect(one);
      expect(fourth).toMatchObject({
        status: 429,
        retryAfter: '5',
        body: { status: 'TOO_MANY_REQUESTS', code: 'AUDIT.TOO_MANY_STREAMS_OF_CALLER' },
      });
      const two = await bearer('cap-two', ['auditor']);
      for (let i = 0; i < 3; i++) expect((await connect(two)).status).toBe(200);
      const beyond = await connect(await bearer('cap-three', ['admin']));
      expect(beyond).toMatchObject({
        status: 503,
        retryAfter: '5',
        body: { status: 'SERVICE_UNAVAILABLE', code: 'AUDIT.TOO_MANY_STREAMS' },
      });
      // JSON pages are not streams: still served.
      expect((await fetch(`${base}/api/v1/audit/events?limit=1`, { headers: { authorization: one } })).status).toBe(200);
    } finally {
      for (const c of open) c.abort();
      await t.close();
    }
  });
});

describe('audit stream backpressure', () => {
  it('reads the log only as fast as its reader takes messages', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'admin-audit-bp-'));
    const { eventStore, readStore, blobStore } = openEmbeddedStores(dataDir);
    let read = 0;
    const counting = new Proxy(eventStore, {
      get(target, key, receiver) {
        if (key === 'readAll') {
          return async (options: ReadAllOptions) => {
            const events = await target.readAll(options);
            read += events.length;
            return events;
          };
        }
        const value: unknown = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    try {
      const total = 3000;
      for (let batch = 0; batch < total / 100; batch++) {
        const stream = `auditTest-${randomUUID()}`;
        const events = Array.from({ length: 100 }, (_, i) => ({
          id: randomUUID(),
          type: 'Filled',
          schemaVersion: 1,
          data: { n: batch * 100 + i, pad: 'x'.repeat(2000) },
          metadata: { actor: 'loader', at: new Date(0).toISOString() },
        }));
        await eventStore.append({ stream, expected: 'no_stream', events });
      }
      const controller = new AbortController();
      const body = auditStream(counting, 0n, {}, auditView(modules), { heartbeatMs: 60_000, signal: controller.signal });
      // Nobody reads: after many turns of the event loop the stream has read at most two pages.
      await new Promise((resolve) => body.once('readable', resolve));
      for (let i = 0; i < 200; i++) await new Promise((resolve) => setImmediate(resolve));
      expect(read).toBeLessThanOrEqual(200);
      expect(read).toBeGreaterThan(0);
      // Then read: every event arrives once, in order (events of an undeclared category show no data).
      const ids: string[] = [];
      let text = '';
      for await (const chunk of body) {
        text += String(chunk);
        let end: number;
        while ((end = text.indexOf('\n\n')) >= 0) {
          const block = text.slice(0, end);
          text = text.slice(end + 2);
          if (!block.includes('\ndata: ')) continue;
          expect(block).toContain('"data":{}');
          ids.push(/^id: (\d+)/.exec(block)?.[1] ?? '');
        }
        if (ids.length === total) break;
      }
      controller.abort();
      expect(ids).toEqual(Array.from({ length: total }, (_, i) => String(i + 1)));
    } finally {
      await eventStore.close();
      await readStore.close();
      await blobStore.close();
    }
  });
});

describe('audit stream of a client that stops reading', () => {
  it('is cut once its socket has not drained for AUDIT_STALL_MS, freeing its slot', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'admin-audit-stall-'));
    const stores = openEmbeddedStores(dataDir);
    const t = await startTestApp({
      dataDir,
      stores,
      extra: { settings: { audit: { maxStreamsPerCaller: 1, heartbeatMs: 100, stallMs: 500 } } },
    });
    try {
      // Far more than loopback's socket buffers hold (a few MB while the reader takes nothing).
      for (let batch = 0; batch < 80; batch++) {
        const events = Array.from({ length: 100 }, (_, i) => ({
          id: randomUUID(),
          type: 'Filled',
          schemaVersion: 1,
          data: { n: i },
          metadata: { actor: 'x'.repeat(2500), at: new Date(0).toISOString() },
        }));
        await stores.eventStore.append({ stream: `auditTest-${randomUUID()}`, expected: 'no_stream', events });
      }
      const url = new URL(await t.listen());
      const authorization = await bearer('slow-reader', ['auditor']);
      const stuck = connect(Number(url.port), '127.0.0.1');
      await new Promise((resolve) => stuck.once('connect', resolve));
      stuck.write(
        `GET /api/v1/audit/events?after=0 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\nAccept: text/event-stream\r\n\r\n`,
      );
      stuck.pause();
      // Its slot is taken (one stream per caller here) until the server cuts it.
      const res = await openStream(`${url.origin}/api/v1/audit/events`, { authorization });
      expect(res.status).toBe(200);
      await res.body?.cancel();
      stuck.destroy();
    } finally {
      await t.close();
    }
  });
});

describe('audit stream at shutdown', () => {
  it('ends open streams, and cuts connections that never sent a request, so closing the service ends', async () => {
    const t = await startTestApp();
    const base = await t.listen();
    // A connection that sends nothing (an HTTP client's spare one): fastify's close alone waits on it for ever.
    const silent = connect(Number(new URL(base).port), '127.0.0.1');
    await new Promise((resolve) => silent.once('connect', resolve));
    const silentClosed = new Promise((resolve) => silent.once('close', resolve));
    const res = await fetch(`${base}/api/v1/audit/events?after=0`, {
      headers: { authorization: await bearer('a', ['auditor']), accept: 'text/event-stream' },
    });
    if (res.body === null) throw new Error('no body');
    const reader = res.body.getReader();
    await reader.read();
    const ended = (async () => {
      for (;;) if ((await reader.read()).done) return true;
    })().catch(() => true);
    await t.close();
    expect(await ended).toBe(true);
    await silentClosed;
  });
});
