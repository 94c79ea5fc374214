// Callers: bearer JWTs verified with jose, either with the embedded HS256 secret or against an
// OIDC issuer's JWKS. Roles come from the token's `roles` claim.

import { createSecretKey } from 'node:crypto';
import { createRemoteJWKSet, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { forbidden, unauthorized } from '../domain/shared/errors.ts';

export type Caller = { sub: string; roles: readonly string[] };

export type TokenVerifier = (token: string) => Promise<Caller>;

export const Permissions = ['read', 'write', 'admin'] as const;
export type Permission = (typeof Permissions)[number];

/** Built-in roles: admin does everything, editor reads and writes records, viewer reads. */
const GRANTS: Record<string, readonly Permission[]> = {
  admin: ['read', 'write', 'admin'],
  editor: ['read', 'write'],
  viewer: ['read'],
};

export const allows = (caller: Caller, permission: Permission): boolean =>
  caller.roles.some((role) => GRANTS[role]?.includes(permission) === true);

function callerOf(payload: JWTPayload): Caller {
  if (typeof payload.sub !== 'string' || payload.sub === '') throw unauthorized('Token has no subject');
  const roles = Array.isArray(payload.roles) ? payload.roles.filter((r): r is string => typeof r === 'string') : [];
  return { sub: payload.sub, roles };
}

async function verified(verify: () => Promise<{ payload: JWTPayload }>): Promise<Caller> {
  let payload: JWTPayload;
  try {
    ({ payload } = await verify());
  } catch (error) {
    const reason = error instanceof Error && 'code' in error ? String(error.code) : 'invalid token';
    throw unauthorized(`Invalid bearer token (${reason})`);
  }
  return callerOf(payload);
}

/**
 * Remembers verified tokens until they expire, so a client's repeated requests pay the signature
 * check once (it was a third of the CPU of a single-record read). Bounded: the oldest entries go
 * first. Only successful verifications are kept, so a forged token is checked every time.
 */
export function cachedVerifier(verify: (token: string) => Promise<{ caller: Caller; exp: number | undefined }>, now = () => Date.now(), max = 10_000): TokenVerifier {
  const cache = new Map<string, { caller: Caller; expiresAt: number }>();
  return async (token) => {
    const hit = cache.get(token);
    if (hit !== undefined && hit.expiresAt > now()) return hit.caller;
    if (hit !== undefined) cache.delete(token);
    const { caller, exp } = await verify(token);
    // Tokens without exp are re-verified after a minute, so a rotated key takes effect.
    const expiresAt = Math.min(exp === undefined ? Infinity : exp * 1000, now() + 60_000);
    if (cache.size >= max) cache.delete(cache.keys().next().value ?? '');
    cache.set(token, { caller, expiresAt });
    return caller;
  };
}

async function verifiedWithExpiry(verify: () => Promise<{ payload: JWTPayload }>): Promise<{ caller: Caller; exp: number | undefined }> {
  let payload: JWTPayload | undefined;
  const caller = await verified(async () => {
    const r = await verify();
    payload = r.payload;
    return r;
  });
  return { caller, exp: payload?.exp };
}

export function hs256Verifier(secret: Uint8Array, options: { issuer?: string; audience?: string } = {}): TokenVerifier {
  const key = createSecretKey(secret);
  return cachedVerifier((token) => verifiedWithExpiry(() => jwtVerify(token, key, { algorithms: ['HS256'], ...options })));
}

export function oidcVerifier(options: { issuer: string; audience: string; jwksUrl: string }): TokenVerifier {
  const keys = createRemoteJWKSet(new URL(options.jwksUrl));
  return cachedVerifier((token) =>
    verifiedWithExpiry(() =>
      jwtVerify(token, keys, { issuer: options.issuer, audience: options.audience, algorithms: ['RS256', 'ES256'] }),
    ),
  );
}

export function signHs256(secret: Uint8Array, caller: Caller, expiresIn = '12h'): Promise<string> {
  return new SignJWT({ roles: [...caller.roles] })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(caller.sub)
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(secret);
}

export async function authenticate(header: string | undefined, verify: TokenVerifier): Promise<Caller> {
  if (header === undefined) throw unauthorized('Missing bearer token');
  const match = /^Bearer ([A-Za-z0-9._~+/-]+=*)$/i.exec(header.trim());
  if (!match?.[1]) throw unauthorized('Authorization header must be "Bearer <token>"');
  return verify(match[1]);
}

export function authorize(caller: Caller, permission: Permission): void {
  if (!allows(caller, permission)) {
    throw forbidden(`Roles [${caller.roles.join(', ')}] do not allow ${permission} access`);
  }
}
