// Fuzzed bad input, for every resource served with the shared operation set: whatever a client
// sends, the answer is a documented status with the error body, never a 5xx. Bodies are random
// JSON around each resource's real fields, so the generator reaches past the first schema check.

import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modules } from '../../modules/index.ts';
import { Operators } from '../../domain/shared/filtering.ts';
import { makeSampleReferences, sampleBody, uniqueCode, type SampleReferences } from '../support/samples.ts';
import { startTestApp, type TestApp } from '../support/testApp.ts';

let t: TestApp;
let refs: SampleReferences;
beforeAll(async () => {
  t = await startTestApp();
  refs = await makeSampleReferences((o) => t.call(o));
});
afterAll(async () => {
  await t.close();
});

const hostileString = fc.oneof(
  fc.string(),
  fc.constantFrom(
    '',
    ' ',
    '%',
    '_',
    '\\',
    "'",
    '"',
    '\u0000',
    '__proto__',
    'constructor',
    '$where',
    '1e400',
    '9'.repeat(400),
    'ä€😀',
    '2026-02-30T00:00:00Z',
    'x'.repeat(300),
  ),
);
const scalar = fc.oneof(hostileString, fc.integer(), fc.double(), fc.boolean(), fc.constant(null));
const value = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('v'), { maxLength: 3 }), fc.dictionary(hostileString, tie('v'), { maxKeys: 3 })),
})).v;

// 405: a method the resource does not offer on a path it has (a log has no PATCH).
const documented = [200, 201, 204, 400, 404, 405, 409, 412, 413, 415, 422];

function expectDocumented(res: { statusCode: number; body: string; json: () => unknown }): void {
  expect(documented, res.body).toContain(res.statusCode);
  if (res.statusCode >= 400)
    expect(res.json()).toMatchObject({ status: expect.any(String), message: expect.any(String), errors: expect.any(Array) });
}

/** Every resource a module serves with the shared operation set: registries, identity, sharing, jobs. */
const served = modules
  .flatMap((m) => m.resources ?? [])
  .map((r) => r.definition)
  // Triggers are made by POST /notification-rules/{code}/trigger, log deletions by DELETE /logs.
  .filter((def) => def.path !== 'notification-triggers' && def.path !== 'log-deletions');

describe.each(served.map((def) => [def.path, def] as const))('%s', (path, def) => {
  const base = `/api/v1/${path}`;
  const fieldNames = [...Object.keys(def.fields.shape), 'id', 'auditInfo', 'unknownField'];
  const body = fc.oneof(
    value,
    fc.record(Object.fromEntries(fieldNames.map((k) => [k, value])), { requiredKeys: [] }),
    fc.tuple(fc.constantFrom(...fieldNames), value).map(([k, v]) => ({ ...sampleBody(def, uniqueCode(), refs), [k]: v })),
  );

  it('answers random create, replace and patch bodies with a documented status', async () => {
    const existing = await t.call({ method: 'POST', url: base, payload: sampleBody(def, uniqueCode(), refs) });
    expect(existing.statusCode, existing.body).toBe(201);
    const id = existing.json<{ id: string }>().id;
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('POST', 'PUT', 'PATCH'), body, async (method, payload) => {
        const url = method === 'POST' ? base : `${base}/${id}`;
        expectDocumented(await t.call({ method, url, payload: JSON.stringify(payload) }));
      }),
      { numRuns: 60 },
    );
  });

  it('answers random filterings with a documented status', async () => {
    const column = fc.oneof(fc.constantFrom(...def.columns.columns.keys(), 'registry.a.b', 'config.$where', 'x..y'), hostileString);
    const item = fc.record(
      {
        column,
        key: column,
        operator: fc.oneof(fc.constantFrom(...Operators), hostileString),
        value: scalar,
        values: fc.array(scalar, { maxLength: 3 }),
        isNested: fc.boolean(),
        nestedPath: hostileString,
        nestedProperty: hostileString,
      },
      { requiredKeys: [] },
    );
    const filtering = fc.record(
      {
        filter: fc.array(item, { maxLength: 4 }),
        sort: fc.array(fc.record({ column, order: fc.oneof(fc.constantFrom('ASC', 'desc'), hostileString) }), { maxLength: 2 }),
        page: fc.oneof(fc.nat(), fc.integer()),
        size: fc.integer(),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/search', '/search/page', '/count'), fc.oneof(filtering, value), async (suffix, payload) => {
        expectDocumented(await t.call({ method: 'POST', url: base + suffix, payload: JSON.stringify(payload) }));
      }),
      { numRuns: 60 },
    );
  });
});
