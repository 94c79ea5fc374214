// Passwords and login: the policy, the hash as the only thing kept, one 401 for every failure,
// the rate limit, a token with exactly the effective roles; and a test password found nowhere:
// not in the log, the read models, the blobs, the server's output or any response.

import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { givePassword } from '../../support/passwords.ts';
import { startTestApp, type TestApp, type TestResponse } from '../../support/testApp.ts';

const PASSWORD = 'Correct-Horse-Battery-7781';
const ROLE_ID = '5d9e6c1a-1111-4a2b-8c3d-4e5f6a7b8c9d';
let t: TestApp;
const output: string[] = [];
const responses: string[] = [];
let userId = '';

const call = async (options: Parameters<TestApp['call']>[0]): Promise<TestResponse> => {
  const res = await t.call(options);
  responses.push(JSON.stringify(res.headers), res.body);
  return res;
};
const login = (username: string, password: string) =>
  call({ method: 'POST', url: '/api/v1/auth/token', payload: { username, password }, as: null });
type ErrorBody = { status: string; code: string; errors: string[]; message: string };

beforeAll(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      output.push(chunk.toString());
      done();
    },
  });
  t = await startTestApp({ logger: { level: 'trace', stream } });
  await call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await call({ method: 'POST', url: '/api/v1/user-group-types', payload: { code: 'TEAM', name: 'Team', registry: {} } });
  await call({
    method: 'POST',
    url: '/api/v1/access-rules',
    payload: { id: ROLE_ID, code: 'READERS_ROLE', name: 'Readers', entityName: 'user-groups', fullAccess: true },
  });
  await call({
    method: 'POST',
    url: '/api/v1/user-groups',
    payload: { code: 'READERS', name: 'Readers', type: 'TEAM', chars: {}, associatedUserRoleId: ROLE_ID },
  });
  const u = await call({
    method: 'POST',
    url: '/api/v1/users',
    payload: {
      code: 'vera',
      type: 'INDIVIDUAL',
      givenName: 'Vera',
      email: 'vera@example.com',
      chars: {},
      roles: ['viewer'],
      groups: ['READERS'],
    },
  });
  userId = u.json<{ id: string }>().id;
});
afterAll(async () => {
  await t.close();
});

describe('password', () => {
  it('refuses a password against the policy with the reason, never quoting it', async () => {
    const put = (password: string) => call({ method: 'PUT', url: `/api/v1/users/${userId}/password`, payload: { password } });
    const short = await put('Short-1');
    expect(short.statusCode).toBe(400);
    expect(short.json<ErrorBody>().errors).toEqual(['password: must be at least 12 characters']);
    expect((await put('VERA@example.com')).json<ErrorBody>().errors).toEqual(["password: must not be the user's e-mail"]);
    expect((await put('x'.repeat(257))).json<ErrorBody>().errors).toEqual(['password: must be at most 256 characters']);
    const bad = await call({ method: 'PUT', url: `/api/v1/users/${userId}/password`, payload: `{"password": "${PASSWORD}" oops}` });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).not.toContain('Battery');
    expect(
      (await call({ method: 'PUT', url: `/api/v1/users/${userId}/password`, payload: { password: PASSWORD }, as: 'viewer' })).statusCode,
    ).toBe(403);
  });

  it('keeps only the hash: 204, and history shows the change but no hash', async () => {
    const res = await call({ method: 'PUT', url: `/api/v1/users/vera/password`, payload: { password: PASSWORD } });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    const history = await call({ method: 'GET', url: `/api/v1/users/${userId}/history` });
    const entry = history.json<{ type: string; data: Record<string, unknown>; changes: unknown[] }[]>().at(-1);
    // An admin's reset: history says so, never the hash.
    expect(entry).toMatchObject({
      type: 'UserPasswordChanged',
      data: { mustChangePassword: true },
      changes: [{ op: 'add', path: '/mustChangePassword', value: true }],
    });
    const user = await call({ method: 'GET', url: `/api/v1/users/${userId}` });
    expect(user.body).not.toMatch(/argon2|passwordHash/);
  });
});

describe('login', () => {
  it('gives a token with exactly the effective roles, which works as those roles', async () => {
    await givePassword(t, 'vera', PASSWORD);
    const res = await login('vera', PASSWORD);
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json<{ access_token: string; token_type: string; roles: string[] }>();
    expect(body).toMatchObject({ token_type: 'Bearer', roles: ['viewer', 'READERS_ROLE'] });
    const claims = JSON.parse(Buffer.from(body.access_token.split('.')[1] ?? '', 'base64url').toString()) as {
      sub: string;
      roles: string[];
    };
    expect(claims).toMatchObject({ sub: 'vera', roles: ['viewer', 'READERS_ROLE'] });
    const headers = { authorization: `Bearer ${body.access_token}` };
    expect((await call({ method: 'GET', url: '/api/v1/users/vera', headers, as: null })).statusCode).toBe(200);
    expect(
      (await call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'X', name: 'X', type: 'EXTERNAL' }, headers, as: null }))
        .statusCode,
    ).toBe(403);
  });

  it('answers every failure with the same 401', async () => {
    await call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code: 'off', type: 'INDIVIDUAL', givenName: 'Off', chars: {}, status: 'DISABLE' },
    });
    await call({ method: 'PUT', url: '/api/v1/users/off/password', payload: { password: PASSWORD } });
    await call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code: 'gone', type: 'INDIVIDUAL', givenName: 'Gone', chars: {}, validTo: '2020-01-01' },
    });
    await call({ method: 'PUT', url: '/api/v1/users/gone/password', payload: { password: PASSWORD } });
    await call({
      method: 'POST',
      url: '/api/v1/users',
      payload: { code: 'dir', type: 'INDIVIDUAL', givenName: 'Dir', chars: {}, authentication: 'LDAP' },
    });
    await call({ method: 'PUT', url: '/api/v1/users/dir/password', payload: { password: PASSWORD } });
    const failures = [
      await login('vera', `${PASSWORD}x`),
      await login('nobody', PASSWORD),
      await login('off', PASSWORD),
      await login('gone', PASSWORD),
      await login('dir', PASSWORD),
    ];
    for (const f of failures) {
      expect(f.statusCode).toBe(401);
      const { message, code, errors } = f.json<ErrorBody>();
      expect({ message, code, errors }).toEqual({ message: 'Invalid username or password', code: 'AUTH.UNAUTHORIZED', errors: [] });
    }
  });

  it('limits failures per user: 429 with Retry-After', async () => {
    await call({ method: 'POST', url: '/api/v1/users', payload: { code: 'target', type: 'INDIVIDUAL', givenName: 'T', chars: {} } });
    await call({ method: 'PUT', url: '/api/v1/users/target/password', payload: { password: PASSWORD } });
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await login('target', `wrong-password-${String(i)}`)).statusCode);
    expect(statuses.slice(0, 10)).toEqual(Array<number>(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array<number>(10).fill(429));
    const limited = await login('target', PASSWORD);
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // Another user is not held back by it.
    expect((await login('vera', PASSWORD)).statusCode).toBe(200);
  });

  it('counts failures against the user the name resolves to: not another whose code differs in case, and still after a rename', async () => {
    const made: Record<string, string> = {};
    for (const code of ['U_PWD', 'u_pwd']) {
      made[code] = (
        await call({ method: 'POST', url: '/api/v1/users', payload: { code, type: 'INDIVIDUAL', givenName: code, chars: {} } })
      ).json<{ id: string }>().id;
      await call({ method: 'PUT', url: `/api/v1/users/${code}/password`, payload: { password: PASSWORD } });
    }
    for (let i = 0; i < 10; i++) expect((await login('U_PWD', `wrong-password-${String(i)}`)).statusCode).toBe(401);
    expect((await login('U_PWD', PASSWORD)).statusCode).toBe(429);
    expect((await login('u_pwd', PASSWORD)).statusCode).toBe(200);
    // A login names a user by its code only: by its id nothing matches, so nothing is guessed.
    expect((await login(made.U_PWD ?? '', PASSWORD)).statusCode).toBe(401);
    // The user renamed is the same user, still held back.
    expect((await call({ method: 'PATCH', url: '/api/v1/users/U_PWD', payload: { code: 'U_PWD_RENAMED' } })).statusCode).toBe(200);
    expect((await login('U_PWD_RENAMED', PASSWORD)).statusCode).toBe(429);
  });

  it('has no login route when tokens come from an OIDC issuer', async () => {
    const oidc = await startTestApp({ login: false });
    try {
      expect(
        (await oidc.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username: 'a', password: 'b' }, as: null })).statusCode,
      ).toBe(404);
    } finally {
      await oidc.close();
    }
  });
});

describe('the test password', () => {
  it("is nowhere: not in the stores' files, the server's output or any response", () => {
    const needle = Buffer.from(PASSWORD);
    const files = readdirSync(t.dataDir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile());
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) expect(readFileSync(join(f.parentPath, f.name)).includes(needle), f.name).toBe(false);
    expect(output.length).toBeGreaterThan(0);
    expect(output.join('')).not.toContain(PASSWORD);
    expect(responses.join('\n')).not.toContain(PASSWORD);
  });
});
