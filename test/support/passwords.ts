// A user that logs in and works, as a person gets there: an admin sets a first password (a reset,
// which leaves the user with mustChangePassword), and the user changes it through its own login.

import { expect } from 'vitest';
import type { TestApp } from './testApp.ts';

/** The login token of a user after an admin reset and the user's own change to `password`. */
export async function givePassword(t: TestApp, code: string, password: string): Promise<string> {
  const first = `${password}-first`;
  const reset = await t.call({ method: 'PUT', url: `/api/v1/users/${code}/password`, payload: { password: first } });
  expect(reset.statusCode, reset.body).toBe(204);
  const changed = await t.call({
    method: 'PUT',
    url: `/api/v1/users/${code}/password`,
    payload: { currentPassword: first, password },
    headers: { authorization: `Bearer ${await loginToken(t, code, first)}` },
    as: null,
  });
  expect(changed.statusCode, changed.body).toBe(204);
  return loginToken(t, code, password);
}

/** A login token (POST /auth/token), failing the test when the login fails. */
export async function loginToken(t: TestApp, code: string, password: string): Promise<string> {
  const res = await t.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username: code, password }, as: null });
  expect(res.statusCode, res.body).toBe(200);
  return res.json<{ access_token: string }>().access_token;
}
