// JSON request bodies are never changed silently: a number a double cannot hold exactly, or a key
// given twice, is refused with a 400 naming where it is, before anything is written.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userGroupType } from '../../modules/registries/domain/userGroupType.ts';
import type { ErrorBody } from '../../api/errorHandler.ts';
import { sampleBody, uniqueCode } from '../support/samples.ts';
import { startTestApp, type TestApp, type TestResponse } from '../support/testApp.ts';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(async () => {
  await t.close();
});
const base = '/api/v1/user-group-types';

/** A valid body's text with the registry written as given, so numbers keep their spelling. */
const bodyText = (code: string, registry: string): string => {
  const { registry: _, ...rest } = sampleBody(userGroupType, code);
  return `${JSON.stringify(rest).slice(0, -1)},"registry":${registry}}`;
};

const create = async (): Promise<{ id: string; code: string }> => {
  const res = await t.call({ method: 'POST', url: base, payload: bodyText(uniqueCode(), '{}') });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string; code: string }>();
};

const expectRefused = (res: TestResponse, line: string) => {
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json<ErrorBody>();
  expect(body).toMatchObject({ status: 'BAD_REQUEST', traceId: expect.any(String) });
  expect(body.errors).toEqual([line]);
};

const tooBig = 'registry.n: 12345678901234567890 cannot be stored exactly (integers beyond ±9007199254740991 lose digits; use a string)';

describe('a number that cannot be stored exactly', () => {
  it('is refused on create, naming its path, and nothing is written', async () => {
    const code = uniqueCode();
    expectRefused(await t.call({ method: 'POST', url: base, payload: bodyText(code, '{"n":12345678901234567890}') }), tooBig);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${code}` })).statusCode).toBe(404);
  });

  it('is refused on replace', async () => {
    const { id, code } = await create();
    expectRefused(await t.call({ method: 'PUT', url: `${base}/${id}`, payload: bodyText(code, '{"n":12345678901234567890}') }), tooBig);
  });

  it.each(['application/merge-patch+json', 'application/json'])('is refused in a %s patch', async (contentType) => {
    const { id } = await create();
    const res = await t.call({
      method: 'PATCH',
      url: `${base}/${id}`,
      headers: { 'content-type': contentType },
      payload: '{"registry":{"n":12345678901234567890}}',
    });
    expectRefused(res, tooBig);
    expect((await t.call({ method: 'GET', url: `${base}/${id}/history` })).json<unknown[]>()).toHaveLength(1);
  });

  it.each([
    ['1e-400', 'it reads back as 0; use a string'],
    ['-0', 'it reads back as 0; use a string'],
    ['1e400', 'beyond the range of a double; use a string'],
    ['0.1000000000000000055511151231257827', 'it reads back as 0.1; use a string'],
  ])('%s is refused', async (n, why) => {
    const res = await t.call({ method: 'POST', url: base, payload: bodyText(uniqueCode(), `{"list":[1,{"n":${n}}]}`) });
    expectRefused(res, `registry.list[1].n: ${n} cannot be stored exactly (${why})`);
  });
});

describe('a duplicate key', () => {
  it('is refused, naming the key', async () => {
    const text = bodyText(uniqueCode(), '{}').replace(/^\{/, '{"code":"A",');
    expectRefused(await t.call({ method: 'POST', url: base, payload: text }), '(body): duplicate key "code"');
  });

  it('is refused inside a free-form map, however the key is escaped', async () => {
    const { id } = await create();
    const res = await t.call({ method: 'PATCH', url: `${base}/${id}`, payload: '{"registry":{"a":1,"\\u0061":2}}' });
    expectRefused(res, 'registry: duplicate key "a"');
  });
});

describe('numbers that can be stored exactly', () => {
  it('are accepted and read back equal', async () => {
    const code = uniqueCode();
    const registry =
      '{"a":0.1,"b":1e2,"c":-5,"d":9007199254740991,"e":1.5E+3,"f":0.30000000000000004,"g":1.0,"h":[0,-9007199254740991,5e-324]}';
    const created = await t.call({ method: 'POST', url: base, payload: bodyText(code, registry) });
    expect(created.statusCode, created.body).toBe(201);
    const expected = {
      a: 0.1,
      b: 100,
      c: -5,
      d: 9007199254740991,
      e: 1500,
      f: 0.30000000000000004,
      g: 1,
      h: [0, -9007199254740991, 5e-324],
    };
    expect(created.json()).toMatchObject({ registry: expected });
    const read = await t.call({ method: 'GET', url: `${base}/by-code/${code}` });
    expect(read.json<{ registry: unknown }>().registry).toEqual(expected);
    expect(read.body).toContain('"d":9007199254740991');
  });
});

describe('a malformed body', () => {
  it("keeps the parser's answer even when it also holds an inexact number", async () => {
    const res = await t.call({
      method: 'POST',
      url: base,
      headers: { 'content-type': 'application/json' },
      payload: '{"registry":{"n":12345678901234567890}',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().message).toMatch(/^Malformed JSON/);
  });

  it('says what the parser found and where, never the text (a body may hold a password)', async () => {
    const cases = [
      ['{"code":"x","registry":{},}', 'Expected double-quoted property name at position 26 (line 1 column 27)'],
      ['{"code" "x"}', "Expected ':' after property name at position 8 (line 1 column 9)"],
      ['{"password":"s3cret\\q"}', 'Bad escaped character at position 20 (line 1 column 21)'],
      ['{"password":"s3cret', 'Unterminated string at position 19 (line 1 column 20)'],
    ];
    for (const [text, problem] of cases) {
      const res = await t.call({ method: 'POST', url: base, headers: { 'content-type': 'application/json' }, payload: text });
      expect(res.statusCode, text).toBe(400);
      expect(res.json<ErrorBody>(), text).toMatchObject({ code: 'HTTP.BAD_REQUEST', message: `Malformed JSON: ${problem}` });
      expect(res.body).not.toContain('s3cret');
    }
  });

  it('still answers for too deep nesting first', async () => {
    const res = await t.call({ method: 'POST', url: base, payload: bodyText(uniqueCode(), `{"d":${'['.repeat(40)}${']'.repeat(40)}}`) });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>()).toMatchObject({
      message: 'JSON nests deeper than 32 levels',
      errors: ['(body): at most 32 levels of nesting'],
    });
  });
});

// Clients send Content-Type: application/json on every call, with or without a body.
describe('an empty body with Content-Type: application/json', () => {
  const json = { 'content-type': 'application/json' };

  it('is no body on a route that takes none: a DELETE, a POST action', async () => {
    const { id } = await create();
    const deleted = await t.call({ method: 'DELETE', url: `${base}/${id}`, headers: json, payload: '' });
    expect(deleted.statusCode, deleted.body).toBe(204);
    expect((await t.call({ method: 'GET', url: `${base}/${id}` })).statusCode).toBe(404);
    const recreated = await t.call({
      method: 'POST',
      url: '/api/v1/indexes/user_group_types/recreate',
      headers: { 'content-type': 'application/json; charset=utf-8' },
      payload: '',
    });
    expect(recreated.statusCode, recreated.body).toBe(202);
  });

  it.each([
    ['POST', base, 'application/json'],
    ['PATCH', 'id', 'application/merge-patch+json'],
    ['PUT', 'id', 'application/json'],
  ] as const)('is still refused with 400 by a %s that requires a body (%s, %s)', async (method, path, contentType) => {
    const url = path === 'id' ? `${base}/${(await create()).id}` : path;
    const res = await t.call({ method, url, headers: { 'content-type': contentType }, payload: '' });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json<ErrorBody>()).toMatchObject({ status: 'BAD_REQUEST', message: expect.stringMatching(/Body cannot be empty/) });
  });
});

// fastify's parser refuses them (no prototype is ever touched); the answer says what and where.
describe('a member name that could reach a prototype', () => {
  it.each([
    ['{"__proto__":{"polluted":true}}', 'registry.__proto__: member name not allowed', '__proto__'],
    ['{"constructor":{"prototype":{"polluted":true}}}', 'registry.constructor.prototype: member name not allowed', 'prototype'],
  ])('in %s is refused, naming its path and position, and nothing is written', async (registry, line, name) => {
    const code = uniqueCode();
    const text = bodyText(code, registry);
    const res = await t.call({ method: 'POST', url: base, payload: text });
    expectRefused(res, line);
    const position = text.indexOf(`"${name}"`);
    expect(res.json<ErrorBody>().message).toBe(`JSON member name not allowed: "${name}" at position ${String(position)}`);
    expect((await t.call({ method: 'GET', url: `${base}/by-code/${code}` })).statusCode).toBe(404);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("in a malformed text leaves the parser's answer", async () => {
    const res = await t.call({
      method: 'POST',
      url: base,
      headers: { 'content-type': 'application/json' },
      payload: '{"registry":{"__proto__":{}}',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json<ErrorBody>().message).toMatch(/^Malformed JSON/);
  });
});
