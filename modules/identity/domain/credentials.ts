// What the login keeps beside the users' records, in the log so that every instance sharing it
// sees the same: a user's failed logins (the lockout) and the login sessions ended by a logout.
// Each has streams of its own, so a failed login or a logout never moves the user's version (its
// ETag) and never conflicts with an edit of the user.
//
// Failed logins are kept in one stream per user and time window (`loginFailures-<userId>.<n>`,
// n = the window's number since the epoch): a check reads the current window's stream and the one
// before, a few events each (a locked user's attempts append nothing), so its cost stays the same
// however long a user has been guessed at. Counting is a sliding window over those two.

import { z } from 'zod';
import { streamName, type StreamDeclaration } from '../../../domain/shared/streams.ts';

export const LOGIN_FAILURES = 'loginFailures';
export const LOGIN_SESSION = 'loginSession';

/** Failures allowed per user in a sliding window; then 429 until the oldest that counts is older than the window. */
export type LockoutRule = { readonly limit: number; readonly windowMs: number };

/** The streams of a user's failures that a check at `now` reads: the window before, and the current one. */
export const failureStreams = (userId: string, now: number, rule: LockoutRule): [string, string] => {
  const n = Math.floor(now / rule.windowMs);
  return [streamName(LOGIN_FAILURES, `${userId}.${String(n - 1)}`), streamName(LOGIN_FAILURES, `${userId}.${String(n)}`)];
};

/** A user's lockout: 10 failures within 5 minutes (POST /auth/token's, and wrong currentPasswords). */
export const USER_LOCKOUT: LockoutRule = { limit: 10, windowMs: 5 * 60_000 };

export const sessionStream = (sid: string): string => streamName(LOGIN_SESSION, sid);

/** A user's lockout now: the failures that count (inside the window, after the last reset) and,
 * when they reach the limit, until when logins are refused. */
export type Lockout = { failures: number; lockedUntil?: Date };

/** The lockout from the events of a user's failure streams, oldest first. */
export function lockoutOf(events: readonly { type: string; at: string }[], now: number, rule: LockoutRule): Lockout {
  let times: number[] = [];
  for (const e of events) {
    if (e.type === 'LoginLockoutReset') times = [];
    else if (e.type === 'LoginFailed') times.push(Date.parse(e.at));
  }
  const counted = times.filter((t) => t > now - rule.windowMs && t <= now).sort((a, b) => a - b);
  if (counted.length < rule.limit) return { failures: counted.length };
  // Refused until enough of them leave the window that fewer than `limit` remain.
  const freedAt = (counted[counted.length - rule.limit] ?? now) + rule.windowMs;
  return { failures: counted.length, lockedUntil: new Date(freedAt) };
}

/** For the event catalogue (docs/events.md). */
export const credentialStreams: readonly StreamDeclaration[] = [
  {
    category: LOGIN_FAILURES,
    description:
      "`loginFailures-<userId>.<n>`: a user's failed logins (POST /api/v1/auth/token, and a wrong `currentPassword`) in the n-th time window since the epoch " +
      `(window: ${String(USER_LOCKOUT.windowMs / 60_000)} minutes); the lockout counts those of the last window (${String(USER_LOCKOUT.limit)} lock the user) ` +
      'and admins reset it (DELETE /api/v1/users/{idOrCode}/lockout). Metadata `actor` is `anonymous` for a login, the user for a wrong `currentPassword`.',
    events: {
      LoginFailed: {
        meaning: 'A login of the user failed (any reason: every failure is the same 401 to the client).',
        data: z.strictObject({}),
      },
      LoginLockoutReset: {
        meaning: "An admin reset the user's lockout: the failures before it no longer count.",
        data: z.strictObject({}),
      },
    },
  },
  {
    category: LOGIN_SESSION,
    description: '`loginSession-<sid>`: one login session (the `sid` of its token), written only when it ends.',
    events: {
      LoginSessionEnded: {
        meaning: 'The session was ended by a logout (POST /api/v1/auth/logout): its token answers 401 from then on, on every instance.',
        data: z.strictObject({ userId: z.string().meta({ description: 'the user whose session it was' }) }),
      },
    },
  },
];
