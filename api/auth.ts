// Callers: bearer JWTs verified with jose, either with the embedded HS256 secret or against an
// OIDC issuer's JWKS. Roles come from the token's `roles` claim.

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

export function hs256Verifier(secret: Uint8Array, options: { issuer?: string; audience?: string } = {}): TokenVerifier {
  return (token) => verified(() => jwtVerify(token, secret, { algorithms: ['HS256'], ...options }));
}

export function oidcVerifier(options: { issuer: string; audience: string; jwksUrl: string }): TokenVerifier {
  const keys = createRemoteJWKSet(new URL(options.jwksUrl));
  return (token) =>
    verified(() =>
      jwtVerify(token, keys, { issuer: options.issuer, audience: options.audience, algorithms: ['RS256', 'ES256'] }),
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
