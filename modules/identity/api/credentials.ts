// The credential lifecycle beside the login (login.ts): the failed-login lockout, kept in the log so
// that every instance sharing it counts the same failures (domain/credentials.ts), which admins
// see and reset; the logout, which ends a login session for every instance; and what a session
// whose user must change its password may still do.
//
// Security limits, as built: a user's failures count wherever they happen (LOGIN_LIMITS.perUser in
// a sliding window, shared); attempts under way count too, but only in the instance running them,
// so a burst of concurrent guesses spread over N instances may get up to N × the limit checked
// before the log holds them all (sequential guesses, on any instances: the limit). The per-address
// limit and the limit on names no user has stay in each instance's memory: nothing is written to
// the log for a name no user has (an anonymous client cannot grow the log with names), and the
// per-address limit dampens one client rather than protecting an account.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { failureStreams, lockoutOf, sessionStream, USER_LOCKOUT, type Lockout } from '../domain/credentials.ts';
import { user } from '../domain/user.ts';
import { WrongExpectedRevisionError, type EventMetadata } from '../../../domain/ports.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import type { LiveRecord } from '../../../domain/resource/defineResource.ts';
import { FailureLimiter } from '../../../api/rateLimit.ts';
import { zodRoutes, type AppDeps } from '../../../api/module.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { idOrCode } from '../../../api/schemas.ts';
import { Slot } from '../../../application/runtime.ts';

declare module 'fastify' {
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions -- module augmentation merges only into an interface
  interface FastifyContextConfig {
    /** The route stays open to a login session whose user must change its password (the password
     * route, for the user's own, and the logout): anything else answers 403 AUTH.PASSWORD_CHANGE_REQUIRED. */
    openDuringPasswordChange?: boolean;
  }
}

/** Failures allowed per user and per client address in a window, then 429 until it ends. */
export const LOGIN_LIMITS = { perUser: USER_LOCKOUT, perAddress: { limit: 50, windowMs: 5 * 60_000 } } as const;

/** What one instance keeps of the limits: attempts under way per user, failures per address and
 * per name no user has. */
const limits = new Slot(() => ({
  underWay: new Map<string, number>(),
  /** Failures of a user being written to the log by this instance (see Attempt.failed). */
  writing: new Map<string, Set<Promise<void>>>(),
  perAddress: new FailureLimiter(LOGIN_LIMITS.perAddress),
  perName: new FailureLimiter(LOGIN_LIMITS.perUser),
}));

const tooMany = (reply: FastifyReply, ms: number): DomainError => {
  const seconds = Math.max(1, Math.ceil(ms / 1000));
  void reply.header('retry-after', String(seconds));
  return Object.assign(
    new DomainError('AUTH.TOO_MANY_ATTEMPTS', 'Too many failed logins: try again later', [`retry after ${String(seconds)} s`]),
    { retryAfterSeconds: seconds },
  );
};

const metadataOf = (deps: AppDeps, request: FastifyRequest): EventMetadata => ({
  actor: request.caller?.sub ?? 'anonymous',
  at: deps.clock.now().toISOString(),
  requestId: request.id,
  correlationId: request.correlationId,
});

/** Appends one event at the end of a stream of the identity's own (retried when another instance
 * appended first). */
async function appendTo(
  deps: AppDeps,
  stream: string,
  type: string,
  data: Record<string, unknown>,
  metadata: EventMetadata,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const events = await deps.eventStore.readStream(stream);
    const last = events.at(-1);
    try {
      await deps.eventStore.append({
        stream,
        expected: last === undefined ? 'no_stream' : last.revision,
        events: [{ id: deps.newId(), type, schemaVersion: 1, data, metadata }],
      });
      return;
    } catch (error) {
      // Each failure is a fact of its own: a write that lost the race to another instance's is made
      // again after it, however many write at once (a burst across instances is many), spread out
      // by a random wait so that they do not collide again in step.
      if (!(error instanceof WrongExpectedRevisionError) || attempt >= APPEND_ATTEMPTS) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * Math.min(50, 2 * attempt)));
    }
  }
}

/** Attempts at appending one failure while other writers win: far above any burst's writers. */
const APPEND_ATTEMPTS = 1000;

/** Not a user's id (ids are UUIDs): what an unknown name's check reads, finding nothing. */
const NO_USER = 'no-user';

/** Once this instance's writes of a user's failures have landed. */
const written = async (deps: AppDeps, userId: string): Promise<void> => {
  await Promise.allSettled([...(deps.runtime.own(limits).writing.get(userId) ?? [])]);
};

/** A user's lockout now, from the log, once this instance's writes of its failures have landed. */
export async function lockoutNow(deps: AppDeps, userId: string): Promise<Lockout> {
  await written(deps, userId);
  return logged(deps, userId);
}

/** A user's lockout as the log holds it now. */
async function logged(deps: AppDeps, userId: string): Promise<Lockout> {
  const now = deps.clock.now().getTime();
  const events = [];
  for (const stream of failureStreams(userId, now, LOGIN_LIMITS.perUser)) events.push(...(await deps.eventStore.readStream(stream)));
  return lockoutOf(
    events.map((e) => ({ type: e.type, at: e.metadata.at })),
    now,
    LOGIN_LIMITS.perUser,
  );
}

/** A login attempt under way: it ends as a failure (counted), a success (forgiven), or with no
 * answer on the password (a directory that cannot answer: abandoned, not counted for the user).
 * `failed` starts writing the failure and answers when it has landed; the login does not wait for
 * it, so that a known user's failure answers in the time an unknown name's does (the write is the
 * difference). Meanwhile the attempt still counts as under way in this instance, and this
 * instance's next check of the user waits for it: only another instance may, for the time of
 * that write, count one failure less. */
export type Attempt = { failed(): Promise<void>; succeeded(): void; abandoned(): void };

/**
 * Starts an attempt to prove a user's password (a login, a `currentPassword`), or refuses it with
 * 429 and Retry-After while the user, the name or the address is over its limit. Counted as it
 * starts, so concurrent guesses cannot all get through before the first failure is counted.
 */
export async function startAttempt(
  deps: AppDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  found: LiveRecord | undefined,
  name: string,
): Promise<Attempt> {
  const state = deps.runtime.own(limits);
  const now = deps.clock.now().getTime();
  let blocked: number;
  let release = (): void => undefined;
  if (found === undefined) {
    // The reads a user's check makes, of streams no user has, so that an unknown name takes the
    // same time; it counts as typed (codes are case-sensitive: `U_PWD` is not `u_pwd`).
    await logged(deps, NO_USER);
    blocked = state.perName.attempt(`name:${name}`, now);
  } else {
    // This instance's failures of the user in the log first; then reserved before the log is
    // read, so that attempts under way here count (one landing meanwhile counts twice, for a moment).
    await written(deps, found.id);
    const others = state.underWay.get(found.id) ?? 0;
    state.underWay.set(found.id, others + 1);
    let released = false;
    release = () => {
      if (released) return;
      released = true;
      const left = (state.underWay.get(found.id) ?? 1) - 1;
      if (left <= 0) state.underWay.delete(found.id);
      else state.underWay.set(found.id, left);
    };
    try {
      const lockout = await logged(deps, found.id);
      blocked =
        lockout.lockedUntil !== undefined
          ? lockout.lockedUntil.getTime() - now
          : lockout.failures + others >= LOGIN_LIMITS.perUser.limit
            ? 1000
            : 0;
    } catch (error) {
      release();
      throw error;
    }
  }
  if (blocked <= 0) blocked = state.perAddress.attempt(request.ip, now);
  if (blocked > 0) {
    release();
    throw tooMany(reply, blocked);
  }
  return {
    failed: () => {
      if (found === undefined) return Promise.resolve();
      const [, current] = failureStreams(found.id, deps.clock.now().getTime(), LOGIN_LIMITS.perUser);
      const writes = state.writing.get(found.id) ?? new Set<Promise<void>>();
      state.writing.set(found.id, writes);
      const write = appendTo(deps, current, 'LoginFailed', {}, metadataOf(deps, request)).finally(() => {
        writes.delete(write);
        if (writes.size === 0 && state.writing.get(found.id) === writes) state.writing.delete(found.id);
        release();
      });
      writes.add(write);
      return write;
    },
    abandoned: release,
    succeeded: () => {
      release();
      if (found === undefined) state.perName.forgive(`name:${name}`);
      state.perAddress.forgive(request.ip);
    },
  };
}

/** Whether a login session was ended by a logout (here or in another instance sharing the log). */
export async function sessionEnded(deps: AppDeps, sid: string): Promise<boolean> {
  return (await deps.eventStore.readStream(sessionStream(sid), { limit: 1 })).length > 0;
}

/** Whether a request is one a session whose user must change its password may still make: the
 * routes that say so, and on the password route only the user's own. */
export function openDuringPasswordChange(request: FastifyRequest | undefined, found: LiveRecord): boolean {
  if (request?.routeOptions.config.openDuringPasswordChange !== true) return false;
  const named = (request.params as { idOrCode?: unknown }).idOrCode;
  return named === undefined || named === found.fields.code || (typeof named === 'string' && named.toLowerCase() === found.id);
}

export const passwordChangeRequired = (): DomainError =>
  new DomainError(
    'AUTH.PASSWORD_CHANGE_REQUIRED',
    'An admin set your password: change it (PUT /api/v1/users/{your code}/password with currentPassword) before anything else',
  );

const lockoutBody = z
  .object({
    failures: z.int().min(0).meta({ description: 'failed logins that count now: inside the window, after the last reset' }),
    limit: z.int().meta({ description: 'failures in the window after which logins are refused (429)' }),
    windowSeconds: z.int(),
    locked: z.boolean(),
    lockedUntil: z.iso.datetime().optional().meta({ description: 'while locked: when a login is accepted again' }),
  })
  .meta({ id: 'UserLockout' });

/** POST /auth/logout; GET and DELETE /users/{idOrCode}/lockout. */
export function credentialRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = zodRoutes(app);
  const users = deps.runtime.service(user);
  const tags = [user.path];
  const limit = LOGIN_LIMITS.perUser;

  if (deps.issueToken !== undefined) {
    r.post(
      '/api/v1/auth/logout',
      {
        config: { signedIn: true, openDuringPasswordChange: true },
        schema: {
          tags: ['auth'],
          summary: "Log out: end the token's login session",
          description:
            'Ends the session of a token issued by POST /api/v1/auth/token: from then on the token answers 401 on every instance sharing the stores ' +
            '(the end is an event of its own, `LoginSessionEnded`; the user record and its version do not change). A token with no session (not issued ' +
            'by a login, or issued before sessions had ids) has nothing to end: 409 AUTH.NO_SESSION, and it works until its `exp`. ' +
            'Open to a session whose user must change its password. Only on the embedded HS256 secret: with an OIDC issuer this route does not exist (404).',
          response: { 204: z.undefined(), ...errors(401, 409) },
        },
      },
      async (request, reply) => {
        const caller = request.caller;
        const sid = caller?.session?.sid;
        if (caller === undefined || sid === undefined) {
          throw new DomainError('AUTH.NO_SESSION', 'This token has no login session to end: it works until it expires', [
            'authorization: a token from POST /api/v1/auth/token',
          ]);
        }
        const found = await users.live(caller.sub);
        try {
          await deps.eventStore.append({
            stream: sessionStream(sid),
            expected: 'no_stream',
            events: [
              {
                id: deps.newId(),
                type: 'LoginSessionEnded',
                schemaVersion: 1,
                data: { userId: found?.id ?? '' },
                metadata: metadataOf(deps, request),
              },
            ],
          });
        } catch (error) {
          // Ended already (two logouts at once): what was asked holds.
          if (!(error instanceof WrongExpectedRevisionError)) throw error;
        }
        return reply.code(204).send();
      },
    );
  }

  const lockoutSchema = { tags, params: z.strictObject({ idOrCode: idOrCode() }) };
  r.get(
    `/api/v1/${user.path}/:idOrCode/lockout`,
    {
      config: { permission: 'admin' },
      schema: {
        ...lockoutSchema,
        summary: "A user's failed-login lockout (admin)",
        description:
          `Failed logins of the user (POST /api/v1/auth/token, and a wrong currentPassword) in the last ${String(limit.windowMs / 60_000)} minutes after the last reset; ` +
          `at ${String(limit.limit)} logins are refused with 429 until \`lockedUntil\`. Kept in the log, so every instance sharing it counts the same failures. Admin only.`,
        response: { 200: lockoutBody, ...errors(400, 403, 404) },
      },
    },
    async (request) => {
      const found = await users.get(request.params.idOrCode);
      const lockout = await lockoutNow(deps, found.id);
      return {
        failures: lockout.failures,
        limit: limit.limit,
        windowSeconds: limit.windowMs / 1000,
        locked: lockout.lockedUntil !== undefined,
        ...(lockout.lockedUntil === undefined ? {} : { lockedUntil: lockout.lockedUntil.toISOString() }),
      };
    },
  );

  r.delete(
    `/api/v1/${user.path}/:idOrCode/lockout`,
    {
      config: { permission: 'admin' },
      schema: {
        ...lockoutSchema,
        summary: "Reset a user's failed-login lockout (admin)",
        description:
          'The failures counted so far no longer count (a `LoginLockoutReset` event; the user record and its version do not change): the user may log in at once, ' +
          "on every instance. Nothing is written when none count. The per-address limit is not a user's and is not reset. Admin only.",
        response: { 204: z.undefined(), ...errors(400, 403, 404) },
      },
    },
    async (request, reply) => {
      const found = await users.get(request.params.idOrCode);
      if ((await lockoutNow(deps, found.id)).failures > 0) {
        const [, current] = failureStreams(found.id, deps.clock.now().getTime(), limit);
        await appendTo(deps, current, 'LoginLockoutReset', {}, metadataOf(deps, request));
      }
      return reply.code(204).send();
    },
  );
}
