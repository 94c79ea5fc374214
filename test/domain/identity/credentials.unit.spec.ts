// The lockout's arithmetic (modules/identity/domain/credentials.ts): a sliding window over a
// user's failures after the last reset, and the two window streams a check reads.

import { describe, expect, it } from 'vitest';
import { failureStreams, lockoutOf, USER_LOCKOUT } from '../../../modules/identity/domain/credentials.ts';

const rule = { limit: 3, windowMs: 60_000 };
const at = (ms: number) => new Date(ms).toISOString();
const failed = (ms: number) => ({ type: 'LoginFailed', at: at(ms) });

describe('lockoutOf', () => {
  it('counts the failures inside the window and locks at the limit until the oldest that keeps it there leaves', () => {
    const events = [failed(0), failed(10_000), failed(20_000), failed(30_000)];
    expect(lockoutOf(events.slice(0, 2), 30_000, rule)).toEqual({ failures: 2 });
    // Four count, the limit is three: locked until the second oldest (10 s) is a window old.
    expect(lockoutOf(events, 30_000, rule)).toEqual({ failures: 4, lockedUntil: new Date(70_000) });
    // At 60 s the first has left: three count, still locked until 70 s.
    expect(lockoutOf(events, 60_000, rule)).toEqual({ failures: 3, lockedUntil: new Date(70_000) });
    expect(lockoutOf(events, 70_000, rule)).toEqual({ failures: 2 });
  });

  it('forgets the failures before a reset, and ignores events it does not know', () => {
    const events = [
      failed(0),
      failed(1000),
      failed(2000),
      { type: 'LoginLockoutReset', at: at(3000) },
      failed(4000),
      { type: 'Other', at: at(5000) },
    ];
    expect(lockoutOf(events, 5000, rule)).toEqual({ failures: 1 });
  });
});

describe('failureStreams', () => {
  it('names the window before and the current one, per user', () => {
    const now = 17 * USER_LOCKOUT.windowMs + 5;
    expect(failureStreams('u-1', now, USER_LOCKOUT)).toEqual(['loginFailures-u-1.16', 'loginFailures-u-1.17']);
  });
});
