// Passwords: argon2id at OWASP's recommended minimum (m = 19 MiB, t = 2, p = 1) through Node's
// own crypto.argon2, kept as a PHC string. Only the hash is ever stored; the plain text lives in
// the request that sets or checks it and nowhere else.

import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';

export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;

/** OWASP Password Storage Cheat Sheet, argon2id: m=19456 (19 MiB), t=2, p=1. */
export const ARGON2 = { memory: 19_456, passes: 2, parallelism: 1, tagLength: 32, saltLength: 16 } as const;

const b64 = (b: Buffer): string => b.toString('base64').replace(/=+$/, '');

function derive(
  password: string,
  salt: Buffer,
  params: { memory: number; passes: number; parallelism: number; tagLength: number },
): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    argon2('argon2id', { message: password, nonce: salt, ...params }, (error, key) => {
      if (error) reject(error);
      else resolve(key);
    });
  });
}

/** The PHC string of a password: `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(ARGON2.saltLength);
  const key = await derive(password, salt, ARGON2);
  return `$argon2id$v=19$m=${String(ARGON2.memory)},t=${String(ARGON2.passes)},p=${String(ARGON2.parallelism)}$${b64(salt)}$${b64(key)}`;
}

const PHC = /^\$argon2id\$v=19\$m=(\d{1,7}),t=(\d{1,3}),p=(\d{1,3})\$([A-Za-z0-9+/]{11,64})\$([A-Za-z0-9+/]{16,128})$/;

/** A hash that no password matches, verified when there is no user, so that an unknown user
 * costs the same time as a wrong password. */
const DECOY = `$argon2id$v=19$m=${String(ARGON2.memory)},t=${String(ARGON2.passes)},p=${String(ARGON2.parallelism)}$${b64(Buffer.alloc(16))}$${b64(Buffer.alloc(32))}`;

/** Whether a password matches a PHC string (constant-time comparison); an absent or unreadable
 * hash is verified against a decoy and answers false. */
export async function verifyPassword(password: string, phc: string | undefined): Promise<boolean> {
  const parsed = PHC.exec(phc ?? '') ?? PHC.exec(DECOY);
  if (parsed === null) return false;
  const [, m, t, p, salt, hash] = parsed as unknown as [string, string, string, string, string, string];
  const expected = Buffer.from(hash, 'base64');
  const key = await derive(password, Buffer.from(salt, 'base64'), {
    memory: Number(m),
    passes: Number(t),
    parallelism: Number(p),
    tagLength: expected.length,
  });
  return timingSafeEqual(key, expected) && phc !== undefined && PHC.test(phc);
}

/** The password policy: reasons a password is refused, never quoting it. */
export function passwordProblems(password: string, user: { code?: unknown; email?: unknown }): string[] {
  // Characters as a person counts them: code points (an emoji is one, not two UTF-16 units).
  const length = Array.from(password).length;
  const problems: string[] = [];
  if (length < PASSWORD_MIN_LENGTH) problems.push(`password: must be at least ${String(PASSWORD_MIN_LENGTH)} characters`);
  if (length > PASSWORD_MAX_LENGTH) problems.push(`password: must be at most ${String(PASSWORD_MAX_LENGTH)} characters`);
  const lower = password.toLowerCase();
  if (typeof user.code === 'string' && lower === user.code.toLowerCase()) problems.push("password: must not be the user's code");
  if (typeof user.email === 'string' && lower === user.email.toLowerCase()) problems.push("password: must not be the user's e-mail");
  return problems;
}
