// Passwords: argon2id at OWASP's recommended minimum (m = 19 MiB, t = 2, p = 1) through Node's
// own crypto.argon2, kept as a PHC string. Only the hash is ever stored; the plain text lives in
// the request that sets or checks it and nowhere else.

import { argon2, randomBytes, timingSafeEqual } from 'node:crypto';

/** The policy's default bounds (PASSWORD_MIN_LENGTH, PASSWORD_MAX_LENGTH change them). */
export const PASSWORD_MIN_LENGTH = 12;
export const PASSWORD_MAX_LENGTH = 256;
/** Never above this, whatever the configuration: argon2 hashes what it is given, and a request body
 * is bounded (the route takes at most 4 × this many UTF-16 units). */
export const PASSWORD_LENGTH_CEILING = 1024;

/** Members of the user a password may not equal (case-insensitively): each can be refused on its own. */
export const PasswordRefusals = ['code', 'name', 'givenName', 'familyName', 'email'] as const;
export type PasswordRefusal = (typeof PasswordRefusals)[number];

/** The password policy: lengths in characters (code points), and the user's members a password may
 * not be (PASSWORD_REFUSE). */
export type PasswordPolicy = { readonly minLength: number; readonly maxLength: number; readonly refuse: readonly PasswordRefusal[] };

export const DEFAULT_PASSWORD_POLICY: PasswordPolicy = {
  minLength: PASSWORD_MIN_LENGTH,
  maxLength: PASSWORD_MAX_LENGTH,
  refuse: PasswordRefusals,
};

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

const REFUSED_AS: Readonly<Record<PasswordRefusal, string>> = {
  code: "the user's code",
  name: "the user's name",
  givenName: "the user's given name",
  familyName: "the user's family name",
  email: "the user's e-mail",
};

/** The policy a configuration gives (ModuleSettings.identity.passwordPolicy), else the default;
 * members it names that are not refusals of this policy are left out (the configuration checks
 * them at start). */
export function passwordPolicyOf(
  configured: { minLength: number; maxLength: number; refuse: readonly string[] } | undefined,
): PasswordPolicy {
  if (configured === undefined) return DEFAULT_PASSWORD_POLICY;
  return {
    minLength: configured.minLength,
    maxLength: configured.maxLength,
    refuse: PasswordRefusals.filter((r) => configured.refuse.includes(r)),
  };
}

/** The policy in a sentence, for the route's description. */
export const policyText = (policy: PasswordPolicy): string =>
  `${String(policy.minLength)} to ${String(policy.maxLength)} characters` +
  (policy.refuse.length === 0 ? '' : `, not ${policy.refuse.map((r) => REFUSED_AS[r]).join(', ')} (compared case-insensitively)`);

/** The password policy: reasons a password is refused, never quoting it. */
export function passwordProblems(password: string, user: Readonly<Record<string, unknown>>, policy = DEFAULT_PASSWORD_POLICY): string[] {
  // Characters as a person counts them: code points (an emoji is one, not two UTF-16 units).
  const length = Array.from(password).length;
  const problems: string[] = [];
  if (length < policy.minLength) problems.push(`password: must be at least ${String(policy.minLength)} characters`);
  if (length > policy.maxLength) problems.push(`password: must be at most ${String(policy.maxLength)} characters`);
  const lower = password.toLowerCase();
  for (const member of policy.refuse) {
    const value = user[member];
    if (typeof value === 'string' && value !== '' && lower === value.toLowerCase())
      problems.push(`password: must not be ${REFUSED_AS[member]}`);
  }
  return problems;
}
