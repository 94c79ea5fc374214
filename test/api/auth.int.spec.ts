// Token verification against a real JWKS endpoint on loopback, as an OIDC issuer would serve it.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CompactSign, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allows, cachedVerifier, hs256Verifier, oidcVerifier, signHs256 } from '../../api/auth.ts';
import { ErrorBodySchema } from '../../api/errorHandler.ts';
import { startTestApp, TEST_SECRET } from '../support/testApp.ts';

/** Issue and expiry in seconds from now; null leaves the claim out. */
type Times = { iat?: number | null; exp?: number | null };
const nowSeconds = () => Math.floor(Date.now() / 1000);

function withTimes(jwt: SignJWT, { iat = 0, exp = 300 }: Times): SignJWT {
  const now = nowSeconds();
  if (iat !== null) jwt.setIssuedAt(now + iat);
  if (exp !== null) jwt.setExpirationTime(now + exp);
  return jwt;
}

let server: Server;
let jwksUrl: string;
let sign: (
  claims: Record<string, unknown>,
  options?: { issuer?: string; audience?: string; expired?: boolean; times?: Times },
) => Promise<string>;

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  jwksUrl = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/certs`;
  sign = (claims, { issuer = 'https://issuer.test', audience = 'admin-api', expired = false, times = {} } = {}) =>
    withTimes(
      new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: 'k1' }).setIssuer(issuer).setAudience(audience).setSubject('oidc-user'),
      // Past the 60 s of clock skew allowed on exp.
      expired ? { iat: -600, exp: -120 } : times,
    ).sign(privateKey);
});
afterAll(() => {
  server.close();
});

describe('OIDC verifier', () => {
  const verifier = () => oidcVerifier({ issuer: 'https://issuer.test', audience: 'admin-api', jwksUrl });

  it('accepts a token signed by a key of the JWKS and reads sub and roles', async () => {
    await expect(verifier()(await sign({ roles: ['editor', 42] }))).resolves.toEqual({ sub: 'oidc-user', roles: ['editor'] });
  });

  it.each([
    ['another issuer', { issuer: 'https://evil.test' }],
    ['another audience', { audience: 'other' }],
    ['an expired token', { expired: true }],
  ])('refuses %s with a 401', async (_name, options) => {
    await expect(verifier()(await sign({ roles: ['admin'] }, options))).rejects.toMatchObject({ status: 'UNAUTHORIZED' });
  });

  it.each([
    ['no exp', { exp: null }, /exp claim is required/],
    ['an iat 5 min in the future', { iat: 300, exp: 600 }, /issued in the future/],
    ['exp 48 h after iat', { exp: 48 * 3600 }, /longer than 24 h/],
  ])('applies the lifetime rules too: refuses %s', async (_name, times, message) => {
    await expect(verifier()(await sign({ roles: ['admin'] }, { times }))).rejects.toMatchObject({
      status: 'UNAUTHORIZED',
      message: expect.stringMatching(message),
    });
  });
});

describe('token lifetime (HS256)', () => {
  const secret = new TextEncoder().encode('l'.repeat(40));
  const signed = (times: Times) =>
    withTimes(new SignJWT({ roles: ['viewer'] }).setProtectedHeader({ alg: 'HS256' }).setSubject('u'), times).sign(secret);

  it.each([
    ['no exp', { exp: null }, /no expiry: the exp claim is required/],
    ['neither iat nor exp', { iat: null, exp: null }, /exp claim is required/],
    ['an iat 5 min in the future', { iat: 300, exp: 3600 }, /issued in the future/],
    ['exp 48 h after iat', { iat: 0, exp: 48 * 3600 }, /lifetime is longer than 24 h/],
    ['exp 24 h and 1 s after iat', { iat: 0, exp: 24 * 3600 + 1 }, /lifetime is longer than 24 h/],
    ['no iat and exp 48 h from now', { iat: null, exp: 48 * 3600 }, /lifetime is longer than 24 h/],
    ['an exp 2 min past (beyond the 60 s skew)', { iat: -3600, exp: -120 }, /expired/],
  ])('refuses %s with a 401', async (_name, times, message) => {
    const verify = hs256Verifier(secret);
    const token = await signed(times);
    await expect(verify(token)).rejects.toMatchObject({ status: 'UNAUTHORIZED', message: expect.stringMatching(message) });
    // A refusal is never cached: the second try is refused the same way.
    await expect(verify(token)).rejects.toMatchObject({ status: 'UNAUTHORIZED', message: expect.stringMatching(message) });
  });

  it.each([
    ['an iat 30 s in the future (within the skew)', { iat: 30, exp: 3600 }],
    ['exp exactly 24 h after iat', { iat: 0, exp: 24 * 3600 }],
    ['no iat and exp 1 h from now', { iat: null, exp: 3600 }],
    ['an exp 30 s past (within the skew)', { iat: -3600, exp: -30 }],
  ])('accepts %s', async (_name, times) => {
    await expect(hs256Verifier(secret)(await signed(times))).resolves.toEqual({ sub: 'u', roles: ['viewer'] });
  });

  it('refuses an exp too large for a double (JSON 1e400 reads as Infinity)', async () => {
    const payload = `{"sub":"u","roles":["admin"],"iat":${String(nowSeconds())},"exp":1e400}`;
    const token = await new CompactSign(new TextEncoder().encode(payload)).setProtectedHeader({ alg: 'HS256' }).sign(secret);
    await expect(hs256Verifier(secret)(token)).rejects.toMatchObject({ status: 'UNAUTHORIZED' });
  });

  it('signs tokens the verifier accepts, for up to exactly 24 h', async () => {
    const token = await signHs256(secret, { sub: 'u', roles: ['viewer'] }, 24 * 3600);
    await expect(hs256Verifier(secret)(token)).resolves.toEqual({ sub: 'u', roles: ['viewer'] });
  });
});

describe('roles named like members of Object.prototype', () => {
  const names = ['toString', '__proto__', 'constructor', 'hasOwnProperty', 'valueOf'];

  it('grant nothing', () => {
    for (const role of names) {
      expect(allows({ sub: 'u', roles: [role] }, 'read'), role).toBe(false);
    }
    expect(allows({ sub: 'u', roles: ['toString', 'viewer'] }, 'read')).toBe(true);
  });

  it('answer 403 with the error body over HTTP, never 500', async () => {
    const t = await startTestApp();
    try {
      for (const role of names) {
        const token = await signHs256(TEST_SECRET, { sub: 'u', roles: [role] });
        const res = await t.call({
          method: 'GET',
          url: '/api/v1/user-group-types',
          as: null,
          headers: { authorization: `Bearer ${token}` },
        });
        expect(res.statusCode, `${role}: ${res.body}`).toBe(403);
        expect(ErrorBodySchema.parse(res.json())).toMatchObject({ status: 'FORBIDDEN', errors: [] });
      }
      const mixed = await signHs256(TEST_SECRET, { sub: 'u', roles: ['__proto__', 'viewer'] });
      const res = await t.call({ method: 'GET', url: '/api/v1/user-group-types', as: null, headers: { authorization: `Bearer ${mixed}` } });
      expect(res.statusCode, res.body).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('verified-token cache', () => {
  it('checks a token once until it expires, and never caches a refusal', async () => {
    let clock = 1_000_000;
    let checks = 0;
    const verify = cachedVerifier(
      (token) => {
        checks++;
        if (token === 'forged') return Promise.reject(new Error('bad signature'));
        return Promise.resolve({ caller: { sub: token, roles: ['viewer'] }, exp: (clock + 30_000) / 1000 });
      },
      () => clock,
    );
    await verify('good');
    await verify('good');
    expect(checks).toBe(1);
    await expect(verify('forged')).rejects.toThrow();
    await expect(verify('forged')).rejects.toThrow();
    expect(checks).toBe(3);
    clock += 31_000;
    await verify('good');
    expect(checks).toBe(4);
  });

  it('refuses a token signed with another secret even after a good one was cached', async () => {
    const secret = new TextEncoder().encode('a'.repeat(40));
    const verify = hs256Verifier(secret);
    const good = await signHs256(secret, { sub: 'u', roles: ['admin'] });
    await expect(verify(good)).resolves.toEqual({ sub: 'u', roles: ['admin'] });
    const forged = await signHs256(new TextEncoder().encode('b'.repeat(40)), { sub: 'u', roles: ['admin'] });
    await expect(verify(forged)).rejects.toMatchObject({ status: 'UNAUTHORIZED' });
  });
});
