// Certificate login over real TLS with real certificates (made by openssl in a temporary folder):
// the service listens with HTTPS on a loopback port and node's https client presents each
// certificate. Valid for an enabled PKI user: the request is that user, with its roles; expired,
// revoked, from another CA, self-signed, absent, naming a disabled, lapsed, unknown or PASSWORD
// user: 401 with the error body (never a handshake failure). Bearer tokens and the password login
// still work on the same listener.

import { Agent, request as httpsRequest } from 'node:https';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tlsServerOptions, watchClientCrl } from '../../../infra/tls.ts';
import { makePki, opensslMissing, type Pair, type Pki } from '../../support/pki.ts';
import { defaultServiceEnv, startServiceProcess, stopServiceProcess } from '../../support/serviceProcess.ts';
import { givePassword } from '../../support/passwords.ts';
import { startTestApp, type TestApp } from '../../support/testApp.ts';

type ErrorBody = { status: string; code: string; errors: string[]; message: string };
type Answer = { status: number; body: unknown };

const missing = opensslMissing();
if (missing !== undefined) process.stderr.write(`[pki] skipping the certificate login tests: ${missing}\n`);

/** One request on a fresh connection (no agent: no pooled socket, no cached TLS session), or on
 * the agent's. */
function call(
  port: number,
  ca: string,
  options: { method?: string; path: string; pair?: Pair | undefined; token?: string | undefined; body?: unknown; agent?: Agent },
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    const req = httpsRequest(
      {
        host: '127.0.0.1',
        port,
        method: options.method ?? 'GET',
        path: options.path,
        ca,
        agent: options.agent ?? false,
        ...(options.pair === undefined ? {} : { cert: readFileSync(options.pair.cert), key: readFileSync(options.pair.key) }),
        headers: {
          ...(options.token === undefined ? {} : { authorization: `Bearer ${options.token}` }),
          ...(payload === undefined ? {} : { 'content-type': 'application/json' }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, body: text === '' ? undefined : JSON.parse(text) });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

async function tlsApp(pki: Pki, certificateUserField?: string): Promise<{ t: TestApp; port: number }> {
  const https = tlsServerOptions({
    TLS_CERT: pki.files.serverCert,
    TLS_KEY: pki.files.serverKey,
    TLS_CLIENT_CA: pki.files.ca,
    TLS_CLIENT_CRL: pki.files.crl,
  });
  if (https === undefined) throw new Error('no TLS options');
  const t = await startTestApp({
    extra: {
      https,
      settings: { identity: { clientCertificates: true, ...(certificateUserField === undefined ? {} : { certificateUserField }) } },
    },
  });
  await t.call({ method: 'POST', url: '/api/v1/user-types', payload: { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' } });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const address = t.app.server.address();
  if (address === null || typeof address === 'string') throw new Error('not listening');
  return { t, port: address.port };
}

const aUser = (code: string, extra: Record<string, unknown> = {}) => ({
  code,
  type: 'INDIVIDUAL',
  givenName: code,
  chars: {},
  roles: ['viewer'],
  authentication: 'PKI',
  ...extra,
});

describe.skipIf(missing !== undefined)('certificate login (TLS_CLIENT_CA, subject CN)', () => {
  let pki: Pki;
  let t: TestApp;
  let port: number;
  const certs: Record<string, Pair> = {};
  const get = (path: string, pair?: Pair, token?: string) => call(port, pki.caPem, { path, pair, token });
  const refusal = (a: Answer) => ({ status: a.status, code: (a.body as ErrorBody).code, errors: (a.body as ErrorBody).errors });

  beforeAll(async () => {
    pki = makePki();
    certs.alice = pki.issue('pki_alice');
    certs.expired = pki.issue('alice-expired', { subject: '/CN=pki_alice', start: '20200101000000Z', end: '20200201000000Z' });
    certs.notYet = pki.issue('alice-not-yet', { subject: '/CN=pki_alice', start: '20990101000000Z', end: '20990201000000Z' });
    certs.revoked = pki.issue('alice-revoked', { subject: '/CN=pki_alice' });
    pki.revoke(certs.revoked);
    certs.otherCa = pki.issue('alice-other-ca', { subject: '/CN=pki_alice', by: 'otherCa' });
    certs.selfSigned = pki.selfSigned('alice-self', '/CN=pki_alice');
    for (const code of ['pki_dora', 'pki_lena', 'pki_late', 'pwd_paul', 'nobody_here']) certs[code] = pki.issue(code);
    ({ t, port } = await tlsApp(pki));
    const created = await Promise.all([
      t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('pki_alice') }),
      t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('pki_dora', { status: 'DISABLE' }) }),
      t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('pki_lena', { validTo: '2020-12-31T00:00:00Z' }) }),
      t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('pki_late', { validFrom: '2099-01-01T00:00:00Z' }) }),
      t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('pwd_paul', { authentication: 'PASSWORD' }) }),
    ]);
    expect(created.map((r) => r.statusCode)).toEqual([201, 201, 201, 201, 201]);
  });
  afterAll(async () => {
    await t.close();
    pki.remove();
  });

  it("a certificate chained to the CA is its PKI user, with that user's roles, on every request and no token", async () => {
    const read = await get('/api/v1/users/pki_alice', certs.alice);
    expect(read.status).toBe(200);
    expect(read.body).toMatchObject({ code: 'pki_alice', authentication: 'PKI' });
    // Its own roles (viewer): it reads, it does not write.
    const write = await call(port, pki.caPem, {
      method: 'POST',
      path: '/api/v1/user-types',
      pair: certs.alice,
      body: { code: 'X', name: 'X', type: 'INDIVIDUAL' },
    });
    expect(write.status).toBe(403);
    expect((write.body as ErrorBody).message).toContain('[viewer]');
  });

  it('the user is judged at each request: disabled after one, refused at the next', async () => {
    await t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('pki_vic') });
    const vic = pki.issue('pki_vic');
    expect((await get('/api/v1/users/pki_vic', vic)).status).toBe(200);
    expect((await t.call({ method: 'PATCH', url: '/api/v1/users/pki_vic', payload: { status: 'DISABLE' } })).statusCode).toBe(200);
    expect(refusal(await get('/api/v1/users/pki_vic', vic))).toMatchObject({ status: 401, code: 'AUTH.CERTIFICATE_REJECTED' });
  });

  it.each([
    ['expired', 'expired', 'the certificate has expired (CERT_HAS_EXPIRED)'],
    ['not valid yet', 'notYet', 'the certificate is not valid yet (CERT_NOT_YET_VALID)'],
    ['revoked in the CRL', 'revoked', 'the certificate is revoked (it is in the CRL) (CERT_REVOKED)'],
    ['from another CA', 'otherCa', 'the certificate is not issued by a trusted CA (UNABLE_TO_VERIFY_LEAF_SIGNATURE)'],
    // With a CRL loaded, OpenSSL's last word on a self-signed certificate is the CRL it lacks.
    [
      'self-signed',
      'selfSigned',
      'the certificate is not issued by a trusted CA, or its issuer has no CRL in TLS_CLIENT_CRL: revocation cannot be checked (UNABLE_TO_GET_CRL)',
    ],
  ])('a certificate %s answers 401 with the error body saying why', async (_, name, reason) => {
    expect(refusal(await get('/api/v1/users/pki_alice', certs[name]))).toEqual({
      status: 401,
      code: 'AUTH.CERTIFICATE_REJECTED',
      errors: [`certificate: ${reason}`],
    });
  });

  it.each([
    ['disabled', 'pki_dora'],
    ['past its validity', 'pki_lena'],
    ['before its validity', 'pki_late'],
    ['on PASSWORD', 'pwd_paul'],
    ['unknown', 'nobody_here'],
  ])('a valid certificate naming a user %s answers 401', async (_, code) => {
    const answer = await get('/api/v1/users/pki_alice', certs[code]);
    expect(refusal(answer)).toMatchObject({ status: 401, code: 'AUTH.CERTIFICATE_REJECTED' });
    expect((answer.body as ErrorBody).message).toBe('The client certificate names no user that can log in with it');
  });

  it('no certificate and no token: 401 with the error body', async () => {
    expect(refusal(await get('/api/v1/users/pki_alice'))).toEqual({
      status: 401,
      code: 'AUTH.CERTIFICATE_REJECTED',
      errors: ['certificate: absent'],
    });
  });

  it('a bearer token decides where one is sent, certificate or not; the open routes stay open', async () => {
    expect((await get('/api/v1/users/pki_alice', undefined, t.tokens.viewer)).status).toBe(200);
    expect((await get('/api/v1/users/pki_alice', certs.expired, t.tokens.viewer)).status).toBe(200);
    expect((await get('/api/v1/users/pki_alice', certs.alice, 'not-a-token')).status).toBe(401);
    expect((await get('/health/live')).status).toBe(200);
  });

  it('a PASSWORD user logs in with its password on the TLS listener; a PKI user cannot, whatever its password', async () => {
    const password = 'Correct-Horse-Battery-7781';
    await givePassword(t, 'pwd_paul', password);
    const login = await call(port, pki.caPem, { method: 'POST', path: '/api/v1/auth/token', body: { username: 'pwd_paul', password } });
    expect(login.status).toBe(200);
    expect((await get('/api/v1/users/pwd_paul', undefined, (login.body as { access_token: string }).access_token)).status).toBe(200);
    // A password on a PKI user is refused (422): it would log no one in.
    const set = await t.call({ method: 'PUT', url: '/api/v1/users/pki_alice/password', payload: { password } });
    expect([set.statusCode, set.json<{ code: string }>().code]).toEqual([422, 'USER.PASSWORD_NOT_USED']);
    expect(
      (await call(port, pki.caPem, { method: 'POST', path: '/api/v1/auth/token', body: { username: 'pki_alice', password } })).status,
    ).toBe(401);
  });

  it('a new CRL file takes effect without a restart', async () => {
    const bob = pki.issue('pki_bob');
    await t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('pki_bob') });
    expect((await get('/api/v1/users/pki_bob', bob)).status).toBe(200);
    const https = tlsServerOptions({
      TLS_CERT: pki.files.serverCert,
      TLS_KEY: pki.files.serverKey,
      TLS_CLIENT_CA: pki.files.ca,
      TLS_CLIENT_CRL: pki.files.crl,
    });
    const logged: string[] = [];
    const stop = watchClientCrl(
      t.app.server,
      https ?? {},
      pki.files.crl,
      { info: (_, m) => logged.push(m), error: (_, m) => logged.push(m) },
      50,
    );
    try {
      // A CRL that cannot be parsed leaves the one in force.
      const good = readFileSync(pki.files.crl);
      writeFileSync(pki.files.crl, 'not a CRL');
      await until(() => logged.length > 0);
      expect(logged).toEqual(['TLS_CLIENT_CRL changed but cannot be used: the previous CRL stays in force']);
      expect((await get('/api/v1/users/pki_bob', bob)).status).toBe(200);
      // A connection kept alive from before the revocation never shakes hands again.
      const kept = new Agent({ keepAlive: true, maxSockets: 1 });
      const onKept = () => call(port, pki.caPem, { path: '/api/v1/users/pki_bob', pair: bob, agent: kept });
      expect((await onKept()).status).toBe(200);
      writeFileSync(pki.files.crl, good);
      pki.revoke(bob);
      // The watch polls the file: wait for its verdict, not for a fixed time.
      await until(async () => (await get('/api/v1/users/pki_bob', bob)).status === 401);
      expect(refusal(await get('/api/v1/users/pki_bob', bob)).errors).toEqual([
        'certificate: the certificate is revoked (it is in the CRL) (CERT_REVOKED)',
      ]);
      // Its verification predates the CRL in force: the connection is closed, and the next one refuses the certificate.
      expect(refusal(await onKept()).errors).toEqual(['certificate: the certificate is revoked (it is in the CRL) (CERT_REVOKED)']);
      kept.destroy();
      expect((await get('/api/v1/users/pki_alice', certs.alice)).status).toBe(200);
    } finally {
      stop();
    }
  });
});

/** Polls a condition until it holds (at most 30 s: a bound for a stuck watch, not a timing). */
async function until(condition: () => boolean | Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition not met within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe.skipIf(missing !== undefined)('certificate login naming the user by another field (TLS_CLIENT_USER_FIELD)', () => {
  let pki: Pki;
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    pki = makePki();
    ({ t, port } = await tlsApp(pki, 'SAN_EMAIL'));
    expect((await t.call({ method: 'POST', url: '/api/v1/users', payload: aUser('carol@pki.example') })).statusCode).toBe(201);
  });
  afterAll(async () => {
    await t.close();
    pki.remove();
  });

  it("SAN_EMAIL: the subject alternative name's e-mail is the user's code, whatever the CN", async () => {
    const carol = pki.issue('carol', { subject: '/CN=Carol Example', san: 'email:carol@pki.example, DNS:carol.example' });
    expect((await call(port, pki.caPem, { path: '/api/v1/users/carol@pki.example', pair: carol })).status).toBe(200);
    const none = pki.issue('carol-no-san', { subject: '/CN=carol@pki.example' });
    const refused = await call(port, pki.caPem, { path: '/api/v1/users/carol@pki.example', pair: none });
    expect(refused.status).toBe(401);
    expect((refused.body as ErrorBody).errors).toEqual([
      'certificate: the certificate has no e-mail address in its subject alternative name (TLS_CLIENT_USER_FIELD=SAN_EMAIL)',
    ]);
    const two = pki.issue('carol-two', { san: 'email:carol@pki.example, email:other@pki.example' });
    expect(((await call(port, pki.caPem, { path: '/api/v1/users/carol@pki.example', pair: two })).body as ErrorBody).errors[0]).toContain(
      'more than one e-mail address',
    );
  });
});

describe.skipIf(missing !== undefined)('the service as `npm start` runs it, configured by TLS_* variables', () => {
  let pki: Pki;
  let dataDir: string;
  beforeAll(() => {
    pki = makePki();
    dataDir = mkdtempSync(join(tmpdir(), 'admin-pki-service-'));
  });
  afterAll(() => {
    pki.remove();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('listens with HTTPS on PORT and logs in the PKI user named by TLS_CLIENT_USER_FIELD; a revoked certificate is refused', async () => {
    const dan = pki.issue('dan', { subject: '/CN=Dan/emailAddress=dan@pki.example' });
    const revoked = pki.issue('dan-revoked', { subject: '/CN=Dan/emailAddress=dan@pki.example' });
    pki.revoke(revoked);
    const env = {
      DATA_DIR: dataDir,
      TLS_CERT: pki.files.serverCert,
      TLS_KEY: pki.files.serverKey,
      TLS_CLIENT_CA: pki.files.ca,
      TLS_CLIENT_CRL: pki.files.crl,
      TLS_CLIENT_USER_FIELD: 'emailAddress',
    };
    const service = await startServiceProcess(defaultServiceEnv(env));
    try {
      expect(service.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      expect(service.output()).toContain('TLS: HTTPS; client certificates from');
      const port = Number(new URL(service.url).port);
      const admin = (method: string, path: string, body: unknown) => call(port, pki.caPem, { method, path, body, token: service.token });
      expect((await admin('POST', '/api/v1/user-types', { code: 'PERSON', name: 'Person', type: 'INDIVIDUAL' })).status).toBe(201);
      expect((await admin('POST', '/api/v1/users', aUser('dan@pki.example'))).status).toBe(201);
      expect((await call(port, pki.caPem, { path: '/api/v1/users/dan@pki.example', pair: dan })).status).toBe(200);
      const refused = await call(port, pki.caPem, { path: '/api/v1/users/dan@pki.example', pair: revoked });
      expect(refused.status).toBe(401);
      expect((refused.body as ErrorBody).errors).toEqual(['certificate: the certificate is revoked (it is in the CRL) (CERT_REVOKED)']);
    } finally {
      await stopServiceProcess(service);
    }
  });

  it("does not start on a key that is not the certificate's, naming the variable", async () => {
    const other = pki.issue('stranger');
    const env = { DATA_DIR: dataDir, TLS_CERT: pki.files.serverCert, TLS_KEY: other.key };
    await expect(startServiceProcess(defaultServiceEnv(env))).rejects.toThrow(/TLS_KEY \(.*stranger\.key\) is not the key of TLS_CERT/);
  });
});
