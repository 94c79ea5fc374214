// Login for the embedded default: POST /api/v1/auth/token exchanges a user's code and password
// for an HS256 bearer token carrying the user's effective roles. Every failure is the same 401;
// the password is checked (against a decoy hash when there is no user) before anything else is
// decided, so answers take the same time; failures are limited per user (in the log, shared by
// every instance) and per address (429; credentials.ts).
// With an OIDC issuer tokens come from it, and the route does not exist (404).

import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { verifyPassword } from '../domain/password.ts';
import { canLogIn, user } from '../domain/user.ts';
import { unauthorized } from '../../../domain/shared/errors.ts';
import type { AppDeps } from '../../../api/module.ts';
import type { Caller, Session } from '../../../api/auth.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { LOGIN_LIMITS, openDuringPasswordChange, passwordChangeRequired, sessionEnded, startAttempt } from './credentials.ts';
import { rolesOf } from './userRoles.ts';
import { DIRECTORY_SESSION, directoryLogin, directoryFor, directorySessionHolds, directoryUserGroups } from './directoryLogin.ts';

export const TOKEN_TTL_SECONDS = 12 * 60 * 60;

/** What a session token names of the password it was issued under: not the hash, a digest of it. */
const fingerprint = (passwordHash: unknown): string => createHash('sha256').update(String(passwordHash)).digest('base64url').slice(0, 22);

/** A login token works while its user does: enabled, inside its validity, with authentication
 * PASSWORD and the password it logged in with, and until its session is logged out; its roles are
 * the user's effective roles now. While an admin-set password waits to be changed, it works only
 * on the routes open for that (the change itself, the logout). */
export async function sessionCaller(caller: Caller, deps: AppDeps, request?: FastifyRequest): Promise<Caller> {
  if (caller.session === undefined) return caller;
  if (caller.session.sid !== undefined && (await sessionEnded(deps, caller.session.sid))) {
    throw unauthorized('The session has ended (logged out): log in again');
  }
  const found = await deps.runtime.service(user).live(caller.sub, true);
  const now = deps.clock.now();
  const directory = caller.session.pwd === DIRECTORY_SESSION;
  const holds =
    found !== undefined &&
    (directory ? directorySessionHolds(found, now) : canLogIn(found, now) && fingerprint(found.hidden.passwordHash) === caller.session.pwd);
  if (!holds) {
    throw unauthorized('The session has ended (the user was disabled or changed its password): log in again');
  }
  if (!directory && found.fields.mustChangePassword === true && !openDuringPasswordChange(request, found)) throw passwordChangeRequired();
  return {
    ...caller,
    roles: await rolesOf(
      deps,
      found.fields,
      directory ? await directoryUserGroups(deps, found.fields, caller.session.groups ?? []) : undefined,
    ),
  };
}

/** POST /api/v1/auth/token (only on the embedded HS256 secret). */
export function loginRoute(app: FastifyInstance, deps: AppDeps): void {
  const issue = deps.issueToken;
  if (issue === undefined) return;
  const users = deps.runtime.service(user);
  const r = app.withTypeProvider<ZodTypeProvider>();
  r.post(
    '/api/v1/auth/token',
    {
      schema: {
        tags: ['auth'],
        security: [],
        summary: "Log in: a bearer token for a user's code and password",
        description:
          'For an ENABLE user with authentication PASSWORD, inside its validity window, whose password matches: an HS256 token (valid 12 h) ' +
          "whose `sub` is the user's code and `roles` its effective roles. The token works while the user does: each request checks that it is still " +
          'enabled, valid and on the same password, and takes its effective roles as they are then (401 once it is not). Every failure (unknown user, wrong password, disabled, outside its ' +
          `validity, another authentication) is the same 401. After ${String(LOGIN_LIMITS.perUser.limit)} failures for one user within 5 minutes (the user the name resolves to, ` +
          'counted in the log by every instance sharing it, admins see and reset it at /api/v1/users/{idOrCode}/lockout; a name no user has, as typed, per instance), or ' +
          `${String(LOGIN_LIMITS.perAddress.limit)} from one address (per instance): 429 with Retry-After until logins are accepted again. ` +
          'The token carries a session (`sid`) that POST /api/v1/auth/logout ends. A user whose password an admin set (`mustChangePassword`) gets a token that ' +
          'may only change that password or log out (403 AUTH.PASSWORD_CHANGE_REQUIRED otherwise). ' +
          'A user whose authentication is LDAP or AD logs in with its directory password when a directory is configured (LDAP_URL; docs/directory.md): ' +
          'the service binds to the directory as the user, keeps nothing of the password, and adds the roles of the user groups whose `ldapMemberOf` ' +
          'names a directory group the user is in; an empty password is refused (401), and a directory that cannot answer is 503 DIRECTORY.UNAVAILABLE ' +
          '(never a fallback to a local password). ' +
          'Only on the embedded HS256 secret: with an OIDC issuer configured this route does not exist (404).',
        body: z.strictObject({ username: z.string().min(1).max(255), password: z.string().max(1024) }),
        response: {
          200: z.object({ access_token: z.string(), token_type: z.literal('Bearer'), expires_in: z.int(), roles: z.array(z.string()) }),
          ...errors(400, 401, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const now = deps.clock.now();
      const found = await users.live(request.body.username, true);
      // Guesses are against the user the name resolves to, however it is typed or renamed since.
      const attempt = await startAttempt(deps, request, reply, found, request.body.username);
      let granted: { session: Session; groups: JsonObject[] | undefined } | undefined;
      try {
        const matches = await verifyPassword(request.body.password, found?.hidden.passwordHash as string | undefined);
        // A directory user's password is the directory's to judge (a 503 when it cannot answer).
        const directory = directoryFor(deps, found);
        granted =
          directory !== undefined && found !== undefined
            ? await directoryLogin(deps, directory, found, request.body.password, now)
            : matches && found !== undefined && canLogIn(found, now)
              ? { session: { pwd: fingerprint(found.hidden.passwordHash) }, groups: undefined }
              : undefined;
      } catch (error) {
        // No answer on the password (the directory is unavailable): the attempt counts for nothing.
        attempt.abandoned();
        throw error;
      }
      if (granted === undefined || found === undefined) {
        // Not waited for: the answer takes no longer for a user than for a name no user has.
        attempt.failed().catch((error: unknown) => {
          request.log.error({ err: error }, 'a failed login could not be written to the log');
        });
        throw unauthorized('Invalid username or password');
      }
      attempt.succeeded();
      const roles = await rolesOf(deps, found.fields, granted.groups);
      const token = await issue({ sub: String(found.fields.code), roles, session: { ...granted.session, sid: deps.newId() } });
      return reply
        .header('cache-control', 'no-store')
        .send({ access_token: token, token_type: 'Bearer' as const, expires_in: TOKEN_TTL_SECONDS, roles });
    },
  );
}
