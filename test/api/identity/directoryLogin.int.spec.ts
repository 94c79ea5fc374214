// Directory login (LDAP and AD) at POST /api/v1/auth/token against a real OpenLDAP: the directory
// judges the password of users whose authentication is LDAP or AD, their directory groups give the
// roles of the user groups that name them (ldapMemberOf), and the security limits hold: the same
// 401 as today for a wrong password, an empty password refused, a login name that is data, a
// bounded wait, an answer too large refused, no fallback to a local password, the lockout.

import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Directory } from '../../../domain/ports.ts';
import { ldapDirectory } from '../../../infra/ldap/ldapDirectory.ts';
import { startTestApp, type TestApp, type TestResponse } from '../../support/testApp.ts';
import { BASE_DN, adSettings, ldapUrl, openLdapSettings, titled } from '../../support/openldap.ts';

type ErrorBody = { code: string; message: string; errors: string[] };
type TokenBody = { access_token: string; roles: string[] };
const OPERATOR_RULE = '7a1e6c1a-1111-4a2b-8c3d-4e5f6a7b8c01';
const AUDIT_RULE = '7a1e6c1a-1111-4a2b-8c3d-4e5f6a7b8c02';
const LOCAL_PASSWORD = 'Local-Password-Never-Used-7781';

const login = (t: TestApp, username: string, password: string): Promise<TestResponse> =>
  t.call({ method: 'POST', url: '/api/v1/auth/token', payload: { username, password }, as: null });
const asToken = (t: TestApp, token: string, url: string): Promise<TestResponse> =>
  t.call({ method: 'GET', url, headers: { authorization: `Bearer ${token}` }, as: null });
const claims = (token: string): { sub: string; roles: string[]; adm_session?: { pwd: string; groups?: string[] } } =>
  JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString()) as never;

/** An app on this directory with the users and groups the tests log in as. */
async function appWith(directory: Directory | undefined): Promise<TestApp> {
  const t = await startTestApp(directory === undefined ? {} : { extra: { directory } });
  const post = async (url: string, payload: unknown): Promise<void> => {
    const res = await t.call({ method: 'POST', url, payload });
    if (res.statusCode !== 201) throw new Error(`${url}: ${String(res.statusCode)} ${res.body}`);
  };
  await post('/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' });
  await post('/api/v1/user-group-types', { code: 'TEAM', name: 'Team', registry: {} });
  await post('/api/v1/access-rules', {
    id: OPERATOR_RULE,
    code: 'OPERATOR',
    name: 'Operators',
    entityName: 'user-groups',
    fullAccess: true,
  });
  await post('/api/v1/access-rules', { id: AUDIT_RULE, code: 'AUDIT_READER', name: 'Auditors', entityName: 'users', fullAccess: true });
  // Spelled otherwise than the directory spells its DN: compared normalised.
  await post('/api/v1/user-groups', {
    code: 'OPS',
    name: 'Operators',
    type: 'TEAM',
    chars: {},
    ldapMemberOf: `CN=Operators, OU=groups, ${BASE_DN.toUpperCase()}`,
    associatedUserRoleId: OPERATOR_RULE,
  });
  await post('/api/v1/user-groups', {
    code: 'AUD',
    name: 'Auditors',
    type: 'TEAM',
    chars: {},
    ldapMemberOf: `cn=auditors,ou=groups,${BASE_DN}`,
    associatedUserRoleId: AUDIT_RULE,
  });
  await post('/api/v1/user-groups', {
    code: 'ADA',
    name: 'AD admins',
    type: 'TEAM',
    chars: {},
    ldapMemberOf: `cn=ad-admins,ou=groups,${BASE_DN}`,
    associatedUserRoleId: OPERATOR_RULE,
  });
  for (const code of ['alice', 'bob', 'al*', '*', 'alice)(|(uid=*', 'd*ve', 'ghost']) {
    await post('/api/v1/users', { code, type: 'INDIVIDUAL', givenName: 'G', chars: {}, authentication: 'LDAP', roles: ['viewer'] });
  }
  await post('/api/v1/users', { code: 'ddane', type: 'INDIVIDUAL', givenName: 'Dana', chars: {}, authentication: 'AD' });
  return t;
}

/** A loopback port that accepts connections and never answers, and one that refuses them. */
async function deadDirectories(): Promise<{ silentUrl: string; closedUrl: string; stop: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const silent: Server = createServer((s) => sockets.add(s));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  const portOf = (s: Server) => String((s.address() as { port: number }).port);
  const closedUrl = `ldap://127.0.0.1:${portOf(closed)}`;
  await new Promise((resolve) => closed.close(resolve));
  return {
    silentUrl: `ldap://127.0.0.1:${portOf(silent)}`,
    closedUrl,
    stop: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => silent.close(resolve));
    },
  };
}

describe.skipIf(ldapUrl() === undefined)(titled('directory login on OpenLDAP'), () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await appWith(ldapDirectory(openLdapSettings()));
  });
  afterAll(() => t.close());

  it('logs an LDAP user in with the directory password; its directory groups give their roles', async () => {
    const res = await login(t, 'alice', 'alice-secret');
    expect(res.statusCode).toBe(200);
    const body = res.json<TokenBody>();
    expect(body.roles.toSorted()).toEqual(['AUDIT_READER', 'OPERATOR', 'viewer']);
    expect(claims(body.access_token)).toMatchObject({ sub: 'alice', adm_session: { pwd: 'directory', groups: ['OPS', 'AUD'] } });
    // The token works, with the roles computed again on each request.
    expect((await asToken(t, body.access_token, '/api/v1/users/alice')).statusCode).toBe(200);
    const bob = await login(t, 'bob', 'bob-secret');
    expect(bob.json<TokenBody>().roles.toSorted()).toEqual(['AUDIT_READER', 'viewer']);
  });

  it('keeps nothing of the password: the user is unchanged by a login', async () => {
    const before = await t.call({ method: 'GET', url: '/api/v1/users/alice/history' });
    expect((await login(t, 'alice', 'alice-secret')).statusCode).toBe(200);
    const after = await t.call({ method: 'GET', url: '/api/v1/users/alice/history' });
    expect(after.body).toBe(before.body);
    expect(after.body).not.toContain('Password');
  });

  it('answers a wrong password, an unknown name and a user that left the directory with the same 401 as today', async () => {
    for (const [name, password] of [
      ['alice', 'wrong'],
      ['nobody', 'alice-secret'],
      ['ghost', 'ghost-secret'],
    ] as const) {
      const res = await login(t, name, password);
      expect(res.statusCode).toBe(401);
      const { code, message, errors } = res.json<ErrorBody>();
      expect({ code, message, errors }).toEqual({ code: 'AUTH.UNAUTHORIZED', message: 'Invalid username or password', errors: [] });
    }
  });

  it('refuses an empty password, which this directory would take as an anonymous bind', async () => {
    expect((await login(t, 'alice', '')).statusCode).toBe(401);
  });

  it('takes the login name as data: filter syntax finds no one but a user of that very name', async () => {
    for (const name of ['al*', '*', 'alice)(|(uid=*']) expect((await login(t, name, 'alice-secret')).statusCode).toBe(401);
    const dave = await login(t, 'd*ve', 'd*ve-secret');
    expect(dave.statusCode).toBe(200);
    expect(dave.json<TokenBody>().roles).toEqual(['viewer']);
  });

  it('ends the session of a user disabled since, and refuses its login', async () => {
    const token = (await login(t, 'bob', 'bob-secret')).json<TokenBody>().access_token;
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/bob', payload: { status: 'DISABLE' } })).statusCode).toBe(200);
    expect((await asToken(t, token, '/api/v1/users/bob')).statusCode).toBe(401);
    expect((await login(t, 'bob', 'bob-secret')).statusCode).toBe(401);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/bob', payload: { status: 'ENABLE' } })).statusCode).toBe(200);
  });

  it('locks a user out after 10 failures, as for a local password', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push((await login(t, 'd*ve', `wrong-${String(i)}`)).statusCode);
    expect(statuses).toEqual([...Array<number>(10).fill(401), 429]);
    expect((await login(t, 'd*ve', 'd*ve-secret')).statusCode).toBe(429);
  });

  it("logs an AD user in with Active Directory's attribute names", async () => {
    const ad = await appWith(ldapDirectory(adSettings()));
    try {
      const res = await login(ad, 'ddane', 'ddane-secret');
      expect(res.statusCode).toBe(200);
      expect(res.json<TokenBody>().roles).toEqual(['OPERATOR']);
    } finally {
      await ad.close();
    }
  });

  it('refuses a login whose directory answer is over the size limit: 503 DIRECTORY.ANSWER_TOO_LARGE', async () => {
    const small = await appWith(ldapDirectory(openLdapSettings({ sizeLimit: 2 })));
    try {
      const res = await login(small, 'alice', 'alice-secret');
      expect(res.statusCode).toBe(503);
      expect(res.json<ErrorBody>().code).toBe('DIRECTORY.ANSWER_TOO_LARGE');
    } finally {
      await small.close();
    }
  });
});

/** A local password on the directory user alice: refused while it is LDAP (422), so set while it
 * was PASSWORD, before it moved to the directory, as an older log may hold one. */
async function leaveLocalPassword(t: TestApp): Promise<void> {
  const put = () => t.call({ method: 'PUT', url: '/api/v1/users/alice/password', payload: { password: LOCAL_PASSWORD } });
  expect((await put()).statusCode).toBe(422);
  expect((await t.call({ method: 'PATCH', url: '/api/v1/users/alice', payload: { authentication: 'PASSWORD' } })).statusCode).toBe(200);
  expect((await put()).statusCode).toBe(204);
  expect((await t.call({ method: 'PATCH', url: '/api/v1/users/alice', payload: { authentication: 'LDAP' } })).statusCode).toBe(200);
}

describe('directory login when the directory cannot answer', () => {
  let dead: Awaited<ReturnType<typeof deadDirectories>>;
  beforeAll(async () => {
    dead = await deadDirectories();
  });
  afterAll(() => dead.stop());

  it('answers 503 DIRECTORY.UNAVAILABLE, never falling back to a local password', async () => {
    const t = await appWith(ldapDirectory(openLdapSettings({ url: dead.closedUrl })));
    try {
      // A local password left on the directory user is no way in.
      await leaveLocalPassword(t);
      const res = await login(t, 'alice', LOCAL_PASSWORD);
      expect(res.statusCode).toBe(503);
      expect(res.json<ErrorBody>()).toMatchObject({
        code: 'DIRECTORY.UNAVAILABLE',
        errors: ['the directory could not be reached (ECONNREFUSED)'],
      });
    } finally {
      await t.close();
    }
  });

  it('answers 503 within LDAP_TIMEOUT_MS when the directory hangs', async () => {
    const t = await appWith(ldapDirectory(openLdapSettings({ url: dead.silentUrl, timeoutMs: 300 })));
    try {
      const started = Date.now();
      const res = await login(t, 'alice', 'alice-secret');
      expect(res.statusCode).toBe(503);
      expect(res.json<ErrorBody>().errors).toEqual(['no answer within 300 ms (LDAP_TIMEOUT_MS)']);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await t.close();
    }
  });

  it('leaves LDAP users out where no directory is configured: the same 401 as before', async () => {
    const t = await appWith(undefined);
    try {
      await leaveLocalPassword(t);
      expect((await login(t, 'alice', LOCAL_PASSWORD)).statusCode).toBe(401);
    } finally {
      await t.close();
    }
  });
});
