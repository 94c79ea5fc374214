// LIKE through HTTP: one search request could once hold the event loop for minutes (a NUL in the
// pattern sent it to a backtracking regular expression) or answer 500 (a pattern too long for
// SQLite). A viewer's count now answers at once, and a value past the bounds is a 400.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { userGroupType } from '../../modules/registries/domain/userGroupType.ts';
import { cpuTimed } from '../support/cpuTime.ts';
import { sampleBody, uniqueCode } from '../support/samples.ts';
import { startTestApp, type TestApp, type TestResponse } from '../support/testApp.ts';

const base = '/api/v1/user-group-types';
/** CPU milliseconds of a whole request (the app runs on the test's thread): generous for a slow
 * machine, and a loaded one cannot reach it; the old matcher needed minutes. */
const BOUND_MS = 1000;

let t: TestApp;
let minPosition = '';
const created: string[] = [];

beforeAll(async () => {
  t = await startTestApp();
  const longValue = 'a'.repeat(100_000);
  for (const name of ['a'.repeat(255), `${'a'.repeat(254)}\0`]) {
    const res = await t.call({
      method: 'POST',
      url: base,
      payload: { ...sampleBody(userGroupType, uniqueCode()), name, registry: { blob: longValue } },
    });
    expect(res.statusCode, res.body).toBe(201);
    created.push(res.json<{ id: string }>().id);
    minPosition = String(res.headers['x-event-position']);
  }
});

afterAll(async () => {
  await t.close();
});

const count = async (column: string, operator: string, value: string): Promise<{ res: TestResponse; ms: number }> => {
  const { value: res, cpuMs } = await cpuTimed(() =>
    t.call({
      method: 'POST',
      url: `${base}/count?minPosition=${minPosition}`,
      payload: { filter: [{ column, operator, value }] },
      as: 'viewer',
    }),
  );
  return { res, ms: cpuMs };
};

const expectError = (res: TestResponse, code: string, line: RegExp): void => {
  expect(res.statusCode, res.body).toBe(400);
  const body = res.json<{ status: string; message: string; errors: string[]; code: string }>();
  expect(body).toMatchObject({ status: 'BAD_REQUEST', message: expect.any(String), code });
  expect(body.errors).toEqual([expect.stringMatching(line)]);
};

describe('LIKE over HTTP', () => {
  it('counts with a NUL pattern at once, and rightly', async () => {
    for (const pattern of ['%a%a%a%a%\u0000', `${'%a'.repeat(16)}%\u0000`]) {
      for (const column of ['name', 'registry.blob']) {
        const like = await count(column, 'LIKE', pattern);
        expect(like.res.statusCode, like.res.body).toBe(200);
        expect(like.res.json()).toBe(column === 'name' ? 1 : 0);
        expect(like.ms).toBeLessThan(BOUND_MS);
        const notLike = await count(column, 'NOT_LIKE', pattern);
        expect(notLike.res.json()).toBe(column === 'name' ? created.length - 1 : created.length);
        expect(notLike.ms).toBeLessThan(BOUND_MS);
      }
    }
  });

  it('refuses a 50,000-character LIKE value with the error body, not a 500', async () => {
    const { res } = await count('name', 'LIKE', 'a%'.repeat(25_000));
    expectError(res, 'REQUEST.VALIDATION_FAILED', /^filter\[0\]\.value: /);
  });

  it('refuses a LIKE value over 255 characters or 32 wildcards, naming the item', async () => {
    expectError(
      (await count('name', 'LIKE', 'a'.repeat(256))).res,
      'FILTER.INVALID',
      /^filter\[0\]\.value: a LIKE value is at most 255 characters/,
    );
    expectError(
      (await count('name', 'NOT_LIKE', '_'.repeat(33))).res,
      'FILTER.INVALID',
      /^filter\[0\]\.value: a NOT_LIKE value has at most 32 unescaped/,
    );
  });

  it('searches for a literal % and _ through the escape', async () => {
    const code = uniqueCode();
    const made = await t.call({ method: 'POST', url: base, payload: { ...sampleBody(userGroupType, code), name: '50%_off' } });
    expect(made.statusCode, made.body).toBe(201);
    const position = String(made.headers['x-event-position']);
    const search = async (value: string): Promise<string[]> => {
      const res = await t.call({
        method: 'POST',
        url: `${base}/search?minPosition=${position}`,
        payload: { filter: [{ column: 'name', operator: 'LIKE', value }] },
      });
      return res.json<{ code: string }[]>().map((r) => r.code);
    };
    expect(await search('0\\%\\_O')).toEqual([code]);
    expect(await search('50\\%\\_')).toEqual([code]);
    expect(await search('5_\\%%')).toEqual([code]);
    expect(await search('50\\%\\_x')).toEqual([]);
  });
});
