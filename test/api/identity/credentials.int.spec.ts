// The credential lifecycle (issue 26, part 7), through the real HTTP service on the embedded
// SQLite stores: a user's own password change against an admin's reset (mustChangePassword and
// what its token may do meanwhile), the logout, the failed-login lockout that admins see and reset,
// a password refused for a user that does not log in with one, and the configurable policy.
// "Across instances" is two services on one data folder, as two processes sharing the stores.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../../infra/config.ts';
import { givePassword, loginToken } from '../../support/passwords.ts';
import { manualClock, startTestApp, type TestApp, type TestResponse } from '../../support/testApp.ts';

const PASSWORD = 'Lifecycle-Password-4410';
type ErrorBody = { code: string; errors: string[]; message: string };
type UserBody = { id: string; version?: number; mustChangePassword?: boolean; auditInfo: { version: number } };

let a: TestApp;
let b: TestApp;

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const as = (t: TestApp, token: string, options: { method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'; url: string; payload?: unknown }) =>
  t.call({ ...options, headers: bearer(token), as: null });
const login = (t: TestApp, username: string, password: string) =>
  t.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username, password }, as: null });
const makeUser = async (t: TestApp, code: string, extra: Record<string, unknown> = {}): Promise<string> => {
  const res = await t.call({
    method: 'POST',
    url: '/api/v1/users',
    payload: { code, type: 'INDIVIDUAL', givenName: 'Given', familyName: 'Family', email: `${code}@example.com`, chars: {}, ...extra },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string }>().id;
};
const userOf = async (t: TestApp, code: string): Promise<UserBody> =>
  (await t.call({ method: 'GET', url: `/api/v1/users/${code}` })).json<UserBody>();
const codeOf = (res: TestResponse): string => res.json<ErrorBody>().code;

beforeAll(async () => {
  a = await startTestApp();
  // A second service on the same data folder: another instance sharing the stores.
  b = await startTestApp({ dataDir: a.dataDir });
  await a.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
});
afterAll(async () => {
  await b.close({ keepData: true });
  await a.close();
});

describe("an admin's reset and the user's own change", () => {
  it('marks the user mustChangePassword; its token may then only change its own password or log out (403 AUTH.PASSWORD_CHANGE_REQUIRED)', async () => {
    await makeUser(a, 'reset_rita', { roles: ['viewer'] });
    await makeUser(a, 'other_olga');
    expect((await a.call({ method: 'PUT', url: '/api/v1/users/reset_rita/password', payload: { password: PASSWORD } })).statusCode).toBe(
      204,
    );
    expect((await userOf(a, 'reset_rita')).mustChangePassword).toBe(true);
    const token = await loginToken(a, 'reset_rita', PASSWORD);
    for (const [t, method, url] of [
      [a, 'GET', '/api/v1/users/reset_rita'],
      [b, 'GET', '/api/v1/users'],
      [a, 'GET', '/api/v1/users/reset_rita/roles'],
    ] as const) {
      const res = await as(t, token, { method, url });
      expect(res.statusCode, url).toBe(403);
      expect(codeOf(res)).toBe('AUTH.PASSWORD_CHANGE_REQUIRED');
    }
    // Not another user's password either.
    const other = await as(a, token, { method: 'PUT', url: '/api/v1/users/other_olga/password', payload: { password: `${PASSWORD}-x` } });
    expect([other.statusCode, codeOf(other)]).toEqual([403, 'AUTH.PASSWORD_CHANGE_REQUIRED']);
    // Its own: the current one is required and checked.
    const without = await as(a, token, {
      method: 'PUT',
      url: '/api/v1/users/reset_rita/password',
      payload: { password: `${PASSWORD}-new` },
    });
    expect([without.statusCode, without.json<ErrorBody>().errors]).toEqual([400, ['currentPassword: required for your own password']]);
    const wrong = await as(a, token, {
      method: 'PUT',
      url: '/api/v1/users/reset_rita/password',
      payload: { password: `${PASSWORD}-new`, currentPassword: 'not-the-password-at-all' },
    });
    expect([wrong.statusCode, codeOf(wrong)]).toEqual([403, 'AUTH.CURRENT_PASSWORD_WRONG']);
    const changed = await as(a, token, {
      method: 'PUT',
      url: '/api/v1/users/reset_rita/password',
      payload: { password: `${PASSWORD}-new`, currentPassword: PASSWORD },
    });
    expect(changed.statusCode, changed.body).toBe(204);
    expect((await userOf(b, 'reset_rita')).mustChangePassword).toBe(false);
    // The old token named the old password: it has ended. A new login works as the user's roles.
    expect((await as(a, token, { method: 'GET', url: '/api/v1/users/reset_rita' })).statusCode).toBe(401);
    const fresh = await loginToken(b, 'reset_rita', `${PASSWORD}-new`);
    expect((await as(a, fresh, { method: 'GET', url: '/api/v1/users/reset_rita' })).statusCode).toBe(200);
    // History says which was a reset and which the user's own change, never the hash.
    const history = await a.call({ method: 'GET', url: '/api/v1/users/reset_rita/history' });
    const changes = history.json<{ type: string; data: Record<string, unknown> }[]>().filter((e) => e.type === 'UserPasswordChanged');
    expect(changes.map((e) => e.data)).toEqual([{ mustChangePassword: true }, { mustChangePassword: false }]);
  });

  it('shows mustChangePassword in lists too, and a client cannot set it through create, replace or patch', async () => {
    await makeUser(a, 'flag_fred', { mustChangePassword: true });
    expect((await userOf(a, 'flag_fred')).mustChangePassword).toBeUndefined();
    expect((await a.call({ method: 'PUT', url: '/api/v1/users/flag_fred/password', payload: { password: PASSWORD } })).statusCode).toBe(
      204,
    );
    const patch = await a.call({ method: 'PATCH', url: '/api/v1/users/flag_fred', payload: { mustChangePassword: false } });
    expect(patch.statusCode).toBe(400);
    expect(patch.json<ErrorBody>().errors).toEqual([expect.stringMatching(/^mustChangePassword: /)]);
    const { id: _id, auditInfo: _a, ...fields } = await userOf(a, 'flag_fred');
    const replace = await a.call({
      method: 'PUT',
      url: '/api/v1/users/flag_fred',
      payload: { ...fields, description: 'replaced', mustChangePassword: false },
    });
    expect(replace.statusCode, replace.body).toBe(200);
    expect(replace.json<UserBody>().mustChangePassword).toBe(true);
    const renamed = await a.call({ method: 'PATCH', url: '/api/v1/users/flag_fred', payload: { description: 'patched' } });
    expect(renamed.json<UserBody>().mustChangePassword).toBe(true);
    const position = renamed.headers['x-event-position'] as string;
    const list = await a.call({
      method: 'POST',
      url: `/api/v1/users/search?minPosition=${position}`,
      payload: { filter: [{ column: 'code', operator: 'LIKE', value: 'flag_fred' }] },
    });
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json<UserBody[]>().map((u) => u.mustChangePassword)).toEqual([true]);
  });

  it("lets any user change its own password whatever its roles; an admin's own through its session is an own change", async () => {
    await makeUser(a, 'plain_paul');
    const token = await givePassword(a, 'plain_paul', PASSWORD);
    expect((await userOf(a, 'plain_paul')).mustChangePassword).toBe(false);
    const again = await as(a, token, {
      method: 'PUT',
      url: '/api/v1/users/plain_paul/password',
      payload: { password: `${PASSWORD}-2`, currentPassword: PASSWORD },
    });
    expect(again.statusCode, again.body).toBe(204);

    await makeUser(a, 'boss_bea', { roles: ['admin'] });
    const admin = await givePassword(a, 'boss_bea', PASSWORD);
    const noCurrent = await as(a, admin, { method: 'PUT', url: '/api/v1/users/boss_bea/password', payload: { password: `${PASSWORD}-3` } });
    expect(noCurrent.statusCode).toBe(400);
    const own = await as(a, admin, {
      method: 'PUT',
      url: '/api/v1/users/boss_bea/password',
      payload: { password: `${PASSWORD}-3`, currentPassword: PASSWORD },
    });
    expect(own.statusCode, own.body).toBe(204);
    expect((await userOf(a, 'boss_bea')).mustChangePassword).toBe(false);
    // An admin's reset of another user takes no current password.
    const withCurrent = await a.call({
      method: 'PUT',
      url: '/api/v1/users/plain_paul/password',
      payload: { password: `${PASSWORD}-4`, currentPassword: PASSWORD },
    });
    expect(withCurrent.statusCode).toBe(400);
  });
});

describe('an own change that keeps the password, and a name no one may learn about', () => {
  it('refuses a new password equal to the current one (400, still mustChangePassword); a non-admin gets 403 for a user that does not exist', async () => {
    await makeUser(a, 'same_sam');
    await a.call({ method: 'PUT', url: '/api/v1/users/same_sam/password', payload: { password: PASSWORD } });
    const token = await loginToken(a, 'same_sam', PASSWORD);
    const kept = await as(a, token, {
      method: 'PUT',
      url: '/api/v1/users/same_sam/password',
      payload: { password: PASSWORD, currentPassword: PASSWORD },
    });
    expect([kept.statusCode, kept.json<ErrorBody>().errors]).toEqual([400, ['password: must differ from currentPassword']]);
    expect((await userOf(a, 'same_sam')).mustChangePassword).toBe(true);
    await makeUser(a, 'nosy_nell');
    const nosy = await givePassword(a, 'nosy_nell', PASSWORD);
    for (const name of ['same_sam', 'no_such_user_here']) {
      const res = await as(a, nosy, { method: 'PUT', url: `/api/v1/users/${name}/password`, payload: { password: `${PASSWORD}-z` } });
      expect([res.statusCode, codeOf(res)], name).toEqual([403, 'AUTH.FORBIDDEN']);
    }
  });
});

describe('logout', () => {
  it("ends the token's session on every instance, without moving the user's version", async () => {
    await makeUser(a, 'leaving_lea', { roles: ['viewer'] });
    const token = await givePassword(a, 'leaving_lea', PASSWORD);
    const version = (await userOf(a, 'leaving_lea')).auditInfo.version;
    const other = await loginToken(a, 'leaving_lea', PASSWORD);
    expect((await as(b, token, { method: 'GET', url: '/api/v1/users/leaving_lea' })).statusCode).toBe(200);
    expect((await as(a, token, { method: 'POST', url: '/api/v1/auth/logout' })).statusCode).toBe(204);
    for (const t of [a, b]) {
      const res = await as(t, token, { method: 'GET', url: '/api/v1/users/leaving_lea' });
      expect(res.statusCode).toBe(401);
      expect(res.json<ErrorBody>().message).toContain('logged out');
    }
    expect((await as(b, token, { method: 'POST', url: '/api/v1/auth/logout' })).statusCode).toBe(401);
    // Only that session: another login of the same user goes on.
    expect((await as(b, other, { method: 'GET', url: '/api/v1/users/leaving_lea' })).statusCode).toBe(200);
    expect((await userOf(a, 'leaving_lea')).auditInfo.version).toBe(version);
  });

  it('answers 409 AUTH.NO_SESSION to a token without a session, and 401 without a token', async () => {
    const res = await a.call({ method: 'POST', url: '/api/v1/auth/logout' });
    expect([res.statusCode, codeOf(res)]).toEqual([409, 'AUTH.NO_SESSION']);
    expect((await a.call({ method: 'POST', url: '/api/v1/auth/logout', as: null })).statusCode).toBe(401);
  });

  it('is open to a session whose password must be changed', async () => {
    await makeUser(a, 'must_max');
    await a.call({ method: 'PUT', url: '/api/v1/users/must_max/password', payload: { password: PASSWORD } });
    const token = await loginToken(a, 'must_max', PASSWORD);
    expect((await as(a, token, { method: 'POST', url: '/api/v1/auth/logout' })).statusCode).toBe(204);
  });
});

describe('the failed-login lockout', () => {
  it('counts failures on every instance sharing the stores, shows them to admins, and an admin resets it', async () => {
    await makeUser(a, 'guessed_gus');
    await givePassword(a, 'guessed_gus', PASSWORD);
    const version = (await userOf(a, 'guessed_gus')).auditInfo.version;
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) statuses.push((await login(i % 2 === 0 ? a : b, 'guessed_gus', `wrong-${String(i)}`)).statusCode);
    expect(statuses).toEqual(Array<number>(10).fill(401));
    // A failure is written just after its 401 is sent; an instance's lockout read waits for its own.
    for (const t of [a, b]) await t.call({ method: 'GET', url: '/api/v1/users/guessed_gus/lockout' });
    for (const t of [a, b]) {
      const limited = await login(t, 'guessed_gus', PASSWORD);
      expect(limited.statusCode).toBe(429);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    }
    const seen = await b.call({ method: 'GET', url: '/api/v1/users/guessed_gus/lockout' });
    expect(seen.statusCode, seen.body).toBe(200);
    const body = seen.json<{ failures: number; limit: number; windowSeconds: number; locked: boolean; lockedUntil: string }>();
    expect(body).toMatchObject({ failures: 10, limit: 10, windowSeconds: 300, locked: true });
    expect(Date.parse(body.lockedUntil)).toBeGreaterThan(Date.now());
    // Admins only.
    expect((await b.call({ method: 'GET', url: '/api/v1/users/guessed_gus/lockout', as: 'editor' })).statusCode).toBe(403);
    expect((await b.call({ method: 'DELETE', url: '/api/v1/users/guessed_gus/lockout', as: 'editor' })).statusCode).toBe(403);
    expect((await a.call({ method: 'DELETE', url: '/api/v1/users/guessed_gus/lockout' })).statusCode).toBe(204);
    expect((await b.call({ method: 'GET', url: '/api/v1/users/guessed_gus/lockout' })).json()).toEqual({
      failures: 0,
      limit: 10,
      windowSeconds: 300,
      locked: false,
    });
    expect((await login(b, 'guessed_gus', PASSWORD)).statusCode).toBe(200);
    // Failures and resets are events of their own: the user's version did not move.
    expect((await userOf(a, 'guessed_gus')).auditInfo.version).toBe(version);
    expect((await a.call({ method: 'GET', url: '/api/v1/users/nobody_here/lockout' })).statusCode).toBe(404);
  });

  it('counts a wrong currentPassword as a failed login', async () => {
    await makeUser(a, 'typo_tom');
    const token = await givePassword(a, 'typo_tom', PASSWORD);
    for (let i = 0; i < 10; i++) {
      const wrong = await as(i % 2 === 0 ? a : b, token, {
        method: 'PUT',
        url: '/api/v1/users/typo_tom/password',
        payload: { password: `${PASSWORD}-new`, currentPassword: `wrong-${String(i)}` },
      });
      expect(wrong.statusCode).toBe(403);
    }
    expect((await a.call({ method: 'GET', url: '/api/v1/users/typo_tom/lockout' })).json()).toMatchObject({ failures: 10, locked: true });
    const right = await as(b, token, {
      method: 'PUT',
      url: '/api/v1/users/typo_tom/password',
      payload: { password: `${PASSWORD}-new`, currentPassword: PASSWORD },
    });
    expect(right.statusCode).toBe(429);
    expect((await login(a, 'typo_tom', PASSWORD)).statusCode).toBe(429);
  });

  it('holds for 5 minutes after the oldest failure that counts, and Retry-After says so (a sliding window)', async () => {
    const clock = manualClock(new Date('2026-03-02T10:00:00.000Z'));
    const c = await startTestApp({ clock });
    try {
      await c.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
      await makeUser(c, 'slow_sam');
      await givePassword(c, 'slow_sam', PASSWORD);
      for (let i = 0; i < 5; i++) expect((await login(c, 'slow_sam', `wrong-${String(i)}`)).statusCode).toBe(401);
      clock.advance(2 * 60_000);
      for (let i = 5; i < 10; i++) expect((await login(c, 'slow_sam', `wrong-${String(i)}`)).statusCode).toBe(401);
      const locked = await login(c, 'slow_sam', PASSWORD);
      expect([locked.statusCode, locked.headers['retry-after']]).toEqual([429, '180']);
      // The first five leave the window 5 minutes after they came: five count, below the limit.
      clock.advance(3 * 60_000 - 1000);
      expect((await login(c, 'slow_sam', PASSWORD)).headers['retry-after']).toBe('1');
      clock.advance(1000);
      expect((await c.call({ method: 'GET', url: '/api/v1/users/slow_sam/lockout' })).json()).toMatchObject({ failures: 5, locked: false });
      expect((await login(c, 'slow_sam', PASSWORD)).statusCode).toBe(200);
      // The later five still count: five more lock the user again (a window that restarted would not).
      for (let i = 10; i < 15; i++) expect((await login(c, 'slow_sam', `wrong-${String(i)}`)).statusCode).toBe(401);
      expect((await login(c, 'slow_sam', PASSWORD)).statusCode).toBe(429);
    } finally {
      await c.close();
    }
  });

  it('lets a burst of concurrent guesses on one instance check no more than the limit', async () => {
    await makeUser(a, 'burst_bo');
    await givePassword(a, 'burst_bo', PASSWORD);
    const statuses = (await Promise.all(Array.from({ length: 25 }, (_, i) => login(a, 'burst_bo', `wrong-${String(i)}`)))).map(
      (r) => r.statusCode,
    );
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(10);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(15);
  });
});

describe('the lockout under a burst across instances', () => {
  it('counts every wrong currentPassword it answered 403 to, and never answers 500', async () => {
    await makeUser(a, 'burst_bea');
    const token = await givePassword(a, 'burst_bea', PASSWORD);
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        as(i % 2 === 0 ? a : b, token, {
          method: 'PUT',
          url: '/api/v1/users/burst_bea/password',
          payload: { password: `${PASSWORD}-next`, currentPassword: `wrong-${String(i)}` },
        }),
      ),
    );
    const statuses = answers.map((r) => r.statusCode);
    expect(statuses.filter((s) => s !== 403 && s !== 429)).toEqual([]);
    for (const t of [a, b]) await t.call({ method: 'GET', url: '/api/v1/users/burst_bea/lockout' });
    const lockout = (await a.call({ method: 'GET', url: '/api/v1/users/burst_bea/lockout' })).json<{ failures: number }>();
    expect(lockout.failures).toBe(statuses.filter((s) => s === 403).length);
  });
});

describe('a password for a user that does not log in with one', () => {
  it('answers 422 USER.PASSWORD_NOT_USED and stores nothing', async () => {
    for (const authentication of ['LDAP', 'AD', 'PKI', 'EMPTY']) {
      const code = `nopwd_${authentication.toLowerCase()}`;
      await makeUser(a, code, { authentication });
      const before = await userOf(a, code);
      const res = await a.call({ method: 'PUT', url: `/api/v1/users/${code}/password`, payload: { password: PASSWORD } });
      expect([res.statusCode, codeOf(res)], authentication).toEqual([422, 'USER.PASSWORD_NOT_USED']);
      const history = await a.call({ method: 'GET', url: `/api/v1/users/${code}/history` });
      expect(history.json<{ type: string }[]>().map((e) => e.type)).toEqual(['UserCreated']);
      expect((await userOf(a, code)).auditInfo.version).toBe(before.auditInfo.version);
      expect((await login(a, code, PASSWORD)).statusCode).toBe(401);
    }
  });
});

describe('the password policy', () => {
  it("refuses by default the user's code, name, given and family name and e-mail, whatever the case", async () => {
    await makeUser(a, 'policy_pia_code', { givenName: 'Philippa-Given', familyName: 'Longfamilyname', name: 'Pia Company Name' });
    const put = (password: string) => a.call({ method: 'PUT', url: '/api/v1/users/policy_pia_code/password', payload: { password } });
    expect((await put('POLICY_PIA_CODE')).json<ErrorBody>().errors).toEqual(["password: must not be the user's code"]);
    expect((await put('pia company name')).json<ErrorBody>().errors).toEqual(["password: must not be the user's name"]);
    expect((await put('philippa-given')).json<ErrorBody>().errors).toEqual(["password: must not be the user's given name"]);
    expect((await put('LONGFAMILYNAME')).json<ErrorBody>().errors).toEqual(["password: must not be the user's family name"]);
    expect((await put('policy_pia_code@example.com')).json<ErrorBody>().errors).toEqual(["password: must not be the user's e-mail"]);
  });

  it('takes its lengths and refusals from the configuration, and the OpenAPI description says them', async () => {
    const c = await startTestApp({
      extra: { settings: { identity: { passwordPolicy: { minLength: 16, maxLength: 20, refuse: ['name'] } } } },
    });
    try {
      await c.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
      await makeUser(c, 'configured_carl', { name: 'Configured Carl Name' });
      const put = (password: string) => c.call({ method: 'PUT', url: '/api/v1/users/configured_carl/password', payload: { password } });
      expect((await put('fifteen-chars-x')).json<ErrorBody>().errors).toEqual(['password: must be at least 16 characters']);
      expect((await put('twenty-one-characters')).json<ErrorBody>().errors).toEqual(['password: must be at most 20 characters']);
      expect((await put('configured carl name')).json<ErrorBody>().errors).toEqual(["password: must not be the user's name"]);
      // The code is not refused by this configuration.
      expect((await put('configured_carl')).json<ErrorBody>().errors).toEqual(['password: must be at least 16 characters']);
      expect((await put('CONFIGURED_CARL_1')).statusCode).toBe(204);
      const doc = (await c.call({ method: 'GET', url: '/openapi.json' })).json<{
        paths: Record<string, { put: { description: string } }>;
      }>();
      const description = doc.paths['/api/v1/users/{idOrCode}/password']?.put.description ?? '';
      expect(description).toContain("16 to 20 characters, not the user's name");
      for (const name of ['PASSWORD_MIN_LENGTH', 'PASSWORD_MAX_LENGTH', 'PASSWORD_REFUSE']) expect(description).toContain(name);
    } finally {
      await c.close();
    }
  });

  it('reads PASSWORD_MIN_LENGTH, PASSWORD_MAX_LENGTH and PASSWORD_REFUSE, refusing what it cannot honour at start', () => {
    const base = { EVENT_STORE: 'embedded' };
    const config = loadConfig(
      { ...base, PASSWORD_MIN_LENGTH: '14', PASSWORD_MAX_LENGTH: '64', PASSWORD_REFUSE: 'code, email' },
      '/nonexistent',
    );
    expect([config.PASSWORD_MIN_LENGTH, config.PASSWORD_MAX_LENGTH, config.PASSWORD_REFUSE]).toEqual([14, 64, ['code', 'email']]);
    expect(loadConfig(base, '/nonexistent').PASSWORD_REFUSE).toEqual(['code', 'name', 'givenName', 'familyName', 'email']);
    expect(loadConfig({ ...base, PASSWORD_REFUSE: '' }, '/nonexistent').PASSWORD_REFUSE).toEqual([]);
    expect(() => loadConfig({ ...base, PASSWORD_MIN_LENGTH: '30', PASSWORD_MAX_LENGTH: '20' }, '/nonexistent')).toThrow(
      /PASSWORD_MIN_LENGTH/,
    );
    expect(() => loadConfig({ ...base, PASSWORD_REFUSE: 'code,phone' }, '/nonexistent')).toThrow(/PASSWORD_REFUSE/);
    expect(() => loadConfig({ ...base, PASSWORD_MAX_LENGTH: '5000' }, '/nonexistent')).toThrow(/PASSWORD_MAX_LENGTH/);
  });
});
