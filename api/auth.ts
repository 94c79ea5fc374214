// Callers: bearer JWTs verified with jose, either with the embedded HS256 secret or against an
// OIDC issuer's JWKS. Roles come from the token's `roles` claim.

import { createSecretKey } from 'node:crypto';
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, SignJWT, type JWTPayload, type JWTVerifyOptions } from 'jose';
import { BUILT_IN_ROLES as BUILT_IN, type BuiltInRole } from '../domain/access/coverage.ts';
import { forbidden, unauthorized, type DomainError } from '../domain/shared/errors.ts';

/** A token this service issued at login (POST /auth/token) names the password it was issued
 * under (a fingerprint of its hash), so that each request can check the user as it is now. A
 * directory login names the directory instead, and the codes of the directory-backed groups the
 * directory said the user is in (`groups`), which its roles are computed from while it lasts.
 * `sid` names the session itself, so that a logout can end it (tokens issued before sessions had
 * ids have none). */
export type Session = { readonly pwd: string; readonly groups?: readonly string[]; readonly sid?: string };

export type Caller = { sub: string; roles: readonly string[]; session?: Session };

/** The claim that carries a login session. */
const SESSION_CLAIM = 'adm_session';

export type TokenVerifier = (token: string) => Promise<Caller>;

export const Permissions = ['read', 'write', 'admin', 'audit'] as const;
export type Permission = (typeof Permissions)[number];

/**
 * Built-in roles: admin does everything, editor reads and writes records, viewer reads, auditor
 * reads records (their history included) and the audit feed of the whole log. A Map, because
 * roles come from the token: an object would answer `toString` or `__proto__` with what
 * Object.prototype holds.
 */
const GRANTS: ReadonlyMap<string, readonly Permission[]> = new Map(
  Object.entries({
    admin: ['read', 'write', 'admin', 'audit'],
    editor: ['read', 'write'],
    viewer: ['read'],
    auditor: ['read', 'audit'],
  } satisfies Record<BuiltInRole, readonly Permission[]>),
);

export const BUILT_IN_ROLES: readonly string[] = BUILT_IN;

/** What a role grants by itself: a built-in role's permissions, none for any other. */
export const permissionsOf = (role: string): readonly Permission[] => GRANTS.get(role) ?? [];

export const allows = (caller: Caller, permission: Permission): boolean =>
  caller.roles.some((role) => GRANTS.get(role)?.includes(permission) === true);

/** How far the clocks of a token's issuer and of this service may disagree, in seconds. */
export const CLOCK_SKEW_SECONDS = 60;
/** The longest lifetime a token may claim (exp - iat): a leaked token stops working within a day. */
export const MAX_TOKEN_LIFETIME_SECONDS = 24 * 60 * 60;

function callerOf(payload: JWTPayload): Caller {
  if (typeof payload.sub !== 'string' || payload.sub === '') throw unauthorized('Token has no subject');
  const roles = Array.isArray(payload.roles) ? payload.roles.filter((r): r is string => typeof r === 'string') : [];
  const session = payload[SESSION_CLAIM];
  if (typeof session === 'object' && session !== null && typeof (session as { pwd?: unknown }).pwd === 'string') {
    const { pwd, groups, sid } = session as { pwd: string; groups?: unknown; sid?: unknown };
    return {
      sub: payload.sub,
      roles,
      session: {
        pwd,
        ...(Array.isArray(groups) ? { groups: groups.filter((g): g is string => typeof g === 'string') } : {}),
        ...(typeof sid === 'string' ? { sid } : {}),
      },
    };
  }
  return { sub: payload.sub, roles };
}

function refusal(error: unknown): DomainError {
  if (error instanceof joseErrors.JWTExpired) return unauthorized('Bearer token has expired');
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.claim === 'exp' && error.reason === 'missing') return unauthorized('Bearer token has no expiry: the exp claim is required');
    // jose's claim messages name the claim and the check, never the token's content.
    return unauthorized(`Invalid bearer token: ${error.message}`);
  }
  const reason = error instanceof Error && 'code' in error ? String(error.code) : 'invalid token';
  return unauthorized(`Invalid bearer token (${reason})`);
}

/**
 * What jose leaves to us: it checks a future `iat` only together with maxTokenAge (which would
 * also make `iat` required), and it bounds no lifetime. Returns the token's exp.
 */
function checkLifetime(payload: JWTPayload, nowSeconds: number): number {
  const { iat, exp } = payload;
  if (exp === undefined) throw unauthorized('Bearer token has no expiry: the exp claim is required');
  if (iat !== undefined && iat > nowSeconds + CLOCK_SKEW_SECONDS) {
    throw unauthorized(
      `Bearer token is issued in the future: iat is more than ${String(CLOCK_SKEW_SECONDS)} s ahead of this server's clock`,
    );
  }
  // Without iat the lifetime left is what counts; the skew allowance keeps a token minted for the
  // full 24 h by a clock slightly behind ours acceptable.
  const lifetime = iat === undefined ? exp - nowSeconds - CLOCK_SKEW_SECONDS : exp - iat;
  if (!(lifetime <= MAX_TOKEN_LIFETIME_SECONDS)) {
    throw unauthorized(
      `Bearer token lifetime is longer than 24 h: exp may be at most ${String(MAX_TOKEN_LIFETIME_SECONDS)} s after iat (after now when there is no iat)`,
    );
  }
  return exp;
}

type Verified = { caller: Caller; exp: number };

/** Options every verifier passes to jose: exp required, the clock skew allowed on exp and nbf. */
const lifetimeOptions = (currentDate: Date): JWTVerifyOptions => ({
  requiredClaims: ['exp'],
  clockTolerance: CLOCK_SKEW_SECONDS,
  currentDate,
});

async function verifiedToken(verify: (options: JWTVerifyOptions) => Promise<{ payload: JWTPayload }>): Promise<Verified> {
  const now = new Date();
  let payload: JWTPayload;
  try {
    ({ payload } = await verify(lifetimeOptions(now)));
  } catch (error) {
    throw refusal(error);
  }
  const exp = checkLifetime(payload, Math.floor(now.getTime() / 1000));
  return { caller: callerOf(payload), exp };
}

/**
 * Remembers verified tokens until they expire, so a client's repeated requests pay the signature
 * check once (it was a third of the CPU of a single-record read). Bounded: the oldest entries go
 * first. Only successful verifications are kept, so a forged token is checked every time. Every
 * lifetime rule only gets easier to pass as time goes on (iat falls behind the clock, the time
 * left shrinks), so a token accepted once stays acceptable until its exp.
 */
export function cachedVerifier(verify: (token: string) => Promise<Verified>, now = () => Date.now(), max = 10_000): TokenVerifier {
  const cache = new Map<string, { caller: Caller; expiresAt: number }>();
  return async (token) => {
    const hit = cache.get(token);
    if (hit !== undefined && hit.expiresAt > now()) return hit.caller;
    if (hit !== undefined) cache.delete(token);
    const { caller, exp } = await verify(token);
    // Re-verified at least every minute, so a rotated key takes effect; never past exp (jose's
    // skew allowance past exp is left to a fresh check).
    const expiresAt = Math.min(exp * 1000, now() + 60_000);
    if (cache.size >= max) cache.delete(cache.keys().next().value ?? '');
    cache.set(token, { caller, expiresAt });
    return caller;
  };
}

export function hs256Verifier(secret: Uint8Array, options: { issuer?: string; audience?: string } = {}): TokenVerifier {
  const key = createSecretKey(secret);
  return cachedVerifier((token) => verifiedToken((lifetime) => jwtVerify(token, key, { algorithms: ['HS256'], ...options, ...lifetime })));
}

export function oidcVerifier(options: { issuer: string; audience: string; jwksUrl: string }): TokenVerifier {
  const keys = createRemoteJWKSet(new URL(options.jwksUrl));
  return cachedVerifier((token) =>
    verifiedToken((lifetime) =>
      jwtVerify(token, keys, { issuer: options.issuer, audience: options.audience, algorithms: ['RS256', 'ES256'], ...lifetime }),
    ),
  );
}

/** iat and exp from one reading of the clock, so a 24 h token is exactly 24 h (jose reads the
 * clock once per claim, and a second boundary between the two would push it past the limit). */
export function signHs256(secret: Uint8Array, caller: Caller, ttlSeconds = 12 * 60 * 60): Promise<string> {
  const iat = Math.floor(Date.now() / 1000);
  return new SignJWT({
    roles: [...caller.roles],
    ...(caller.session === undefined
      ? {}
      : {
          [SESSION_CLAIM]: {
            pwd: caller.session.pwd,
            ...(caller.session.groups === undefined ? {} : { groups: [...caller.session.groups] }),
            ...(caller.session.sid === undefined ? {} : { sid: caller.session.sid }),
          },
        }),
  })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(caller.sub)
    .setIssuedAt(iat)
    .setExpirationTime(iat + ttlSeconds)
    .sign(secret);
}

/** The embedded default's tokens: verified and, for the login route, issued with one HS256
 * secret. One function, so that `npm start` and the OpenAPI document it is described by (api/cli.ts)
 * are composed alike. */
export function hs256Tokens(secret: Uint8Array): { verifyToken: TokenVerifier; issueToken: (caller: Caller) => Promise<string> } {
  return { verifyToken: hs256Verifier(secret), issueToken: (caller) => signHs256(secret, caller) };
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
