// Token verification against a real JWKS endpoint on loopback, as an OIDC issuer would serve it.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedVerifier, hs256Verifier, oidcVerifier, signHs256 } from '../../api/auth.ts';

let server: Server;
let jwksUrl: string;
let sign: (claims: Record<string, unknown>, options?: { issuer?: string; audience?: string; expired?: boolean }) => Promise<string>;

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair('RS256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
  server = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  jwksUrl = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}/certs`;
  sign = (claims, { issuer = 'https://issuer.test', audience = 'admin-api', expired = false } = {}) =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject('oidc-user')
      .setIssuedAt()
      .setExpirationTime(expired ? Math.floor(Date.now() / 1000) - 60 : '5m')
      .sign(privateKey);
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
