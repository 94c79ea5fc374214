// The OpenAPI document tells a generated client everything the server does at the protocol level:
// the headers it reads and answers, and every error status a route can answer.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openApiDocument } from '../../api/cli.ts';
import { defaultServiceEnv, startServiceProcess, stopServiceProcess } from '../support/serviceProcess.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

type Op = { parameters?: { $ref?: string; name?: string }[]; responses: Record<string, { headers?: Record<string, unknown> }> };
let t: TestApp;
let paths: Record<string, Record<string, Op>>;
beforeAll(async () => {
  t = await startTestApp();
  const doc = (await t.call({ method: 'GET', url: '/openapi.json', as: null })).json<{
    paths: typeof paths;
    components: { parameters: Record<string, unknown>; headers: Record<string, unknown> };
  }>();
  paths = doc.paths;
  expect(Object.keys(doc.components.parameters)).toEqual(
    expect.arrayContaining(['IdempotencyKey', 'IfMatch', 'RequestId', 'CorrelationId']),
  );
  expect(Object.keys(doc.components.headers)).toEqual(expect.arrayContaining(['ETag', 'Location', 'EventPosition']));
});
afterAll(async () => {
  await t.close();
});

const op = (path: string, method: string): Op => {
  const found = paths[path]?.[method];
  if (!found) throw new Error(`no ${method} ${path}`);
  return found;
};
const params = (o: Op) => (o.parameters ?? []).map((p) => p.$ref ?? p.name);
const base = '/api/v1/user-group-types';

describe('the OpenAPI document', () => {
  it('declares Idempotency-Key on creates, and Location, ETag and X-Event-Position on their 201', () => {
    const create = op(base, 'post');
    expect(params(create)).toContain('#/components/parameters/IdempotencyKey');
    expect(Object.keys(create.responses['201']?.headers ?? {})).toEqual(
      expect.arrayContaining(['Location', 'ETag', 'X-Event-Position', 'X-Request-Id']),
    );
  });

  it('declares If-Match and Idempotency-Key on every change, with 412, and ETag on reads of one record', () => {
    for (const method of ['put', 'patch', 'delete']) {
      const change = op(`${base}/{idOrCode}`, method);
      expect(params(change)).toEqual(expect.arrayContaining(['#/components/parameters/IfMatch', '#/components/parameters/IdempotencyKey']));
      expect(Object.keys(change.responses)).toContain('412');
    }
    expect(Object.keys(op(`${base}/{idOrCode}`, 'get').responses['200']?.headers ?? {})).toContain('ETag');
    expect(Object.keys(op(`${base}/by-code/{code}`, 'get').responses['200']?.headers ?? {})).toContain('ETag');
  });

  it('declares 400, 401 and 403 on every /api route, and 413 and 415 on every route with a body', () => {
    for (const [path, item] of Object.entries(paths).filter(([p]) => p.startsWith('/api/'))) {
      for (const [method, o] of Object.entries(item)) {
        expect(Object.keys(o.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['400', '401', '403']));
        if ((o as { requestBody?: unknown }).requestBody !== undefined) {
          expect(Object.keys(o.responses), `${method} ${path}`).toEqual(expect.arrayContaining(['413', '415']));
        }
      }
    }
  });

  it('declares 503 where a read waits for a read model', () => {
    expect(Object.keys(op(`${base}/count`, 'post').responses)).toContain('503');
  });
});

describe("the OpenAPI document's references", () => {
  it('all resolve: every $ref is a JSON pointer to a member of the document', async () => {
    const doc = (await t.call({ method: 'GET', url: '/openapi.json', as: null })).json<Record<string, unknown>>();
    const refs = new Set<string>();
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) value.forEach(collect);
      else if (typeof value === 'object' && value !== null) {
        for (const [key, member] of Object.entries(value)) {
          if (key === '$ref' && typeof member === 'string') refs.add(member);
          else collect(member);
        }
      }
    };
    collect(doc);
    const resolve = (ref: string): unknown =>
      ref
        .slice(2)
        .split('/')
        .map((token) => token.replaceAll('~1', '/').replaceAll('~0', '~'))
        .reduce<unknown>(
          (node, token) => (typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[token] : undefined),
          doc,
        );
    const broken = [...refs].filter((ref) => !ref.startsWith('#/') || resolve(ref) === undefined);
    expect(refs.size).toBeGreaterThan(10);
    expect(broken).toEqual([]);
  });
});

describe('the protocol the document states', () => {
  it('answers 405 with Allow, naming the methods of the path, for a method the path does not have', async () => {
    const res = await t.call({ method: 'PATCH', url: base });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe('GET, HEAD, POST');
    expect(res.json()).toMatchObject({ status: 'METHOD_NOT_ALLOWED', code: 'HTTP.METHOD_NOT_ALLOWED' });
    // The concrete path, not the template it also matches (`/{idOrCode}` has PUT, PATCH, DELETE).
    const concrete = await t.call({ method: 'DELETE', url: `${base}/count` });
    expect(concrete.statusCode).toBe(405);
    expect(concrete.headers.allow).toBe('POST');
    expect((await t.call({ method: 'GET', url: '/api/v1/no-such-thing' })).statusCode).toBe(404);
  });

  it('refuses id headers outside their documented form (1..200 printable ASCII) with 400', async () => {
    for (const [name, value] of [
      ['x-request-id', ''],
      ['x-request-id', 'a b'],
      ['x-correlation-id', 'x'.repeat(201)],
    ] as const) {
      const res = await t.call({ method: 'GET', url: base, headers: { [name]: value } });
      expect(res.statusCode, `${name}: ${JSON.stringify(value)}`).toBe(400);
      expect(res.json<{ errors: string[] }>().errors).toEqual([`header.${name}: 1..200 printable ASCII characters`]);
    }
    const ok = await t.call({ method: 'GET', url: base, headers: { 'x-request-id': 'req-1', 'x-correlation-id': 'corr-1' } });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['x-request-id']).toBe('req-1');
  });
});

/** GET /openapi.json of the service started as `npm start` starts it (api/main.ts in a child
 * process) on the default configuration: embedded stores, the HS256 secret, ROLE=all. A route the
 * running service adds (the login route exists only with the HS256 issuer) is in it. */
async function servedByNpmStart(): Promise<unknown> {
  const dataDir = mkdtempSync(join(tmpdir(), 'openapi-'));
  const service = await startServiceProcess(defaultServiceEnv({ DATA_DIR: dataDir }));
  try {
    const response = await fetch(`${service.url}/openapi.json`);
    expect(response.status).toBe(200);
    return await response.json();
  } finally {
    await stopServiceProcess(service);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

describe('openapi.json in the repository', () => {
  it('is the document `npm start` serves, and what `npm run openapi` writes (run it after changing a route or a schema)', async () => {
    const served = await servedByNpmStart();
    expect(Object.keys((served as { paths: object }).paths)).toContain('/api/v1/auth/token');
    const committed: unknown = JSON.parse(readFileSync('openapi.json', 'utf8'));
    expect(committed).toEqual(served);
    expect(JSON.parse(await openApiDocument())).toEqual(served);
    // A start of the service, up to a minute on a busy machine.
  }, 90_000);
});
