// Command-line tools for the people who run the service: `node api/cli.ts <command> [options]`,
// or `npm run <command> -- [options]`. A composition root like main.ts: it reads the configuration
// the service would read, so what it does matches what `npm start` uses.

import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { hs256Secret } from '../infra/authSecret.ts';
import { loadConfig } from '../infra/config.ts';
import { openSqliteBlobStore } from '../infra/sqlite/blobStore.ts';
import { openSqliteEventStore } from '../infra/sqlite/eventStore.ts';
import { openSqliteReadStore } from '../infra/sqlite/readStore.ts';
import { BUILT_IN_ROLES, hs256Tokens, MAX_TOKEN_LIFETIME_SECONDS, signHs256 } from './auth.ts';
import { composeService } from './compose.ts';

/** A command called the wrong way: its message is printed and the exit code is 2. */
class UsageError extends Error {}

type Command = { summary: string; run: (args: readonly string[]) => Promise<void> };

const TOKEN_USAGE = `Usage: npm run token -- --role <role> --sub <subject> [--ttl <duration>]
       node api/cli.ts token --role <role> --sub <subject> [--ttl <duration>]

Prints a bearer token signed with the service's HS256 secret: AUTH_JWT_SECRET when set (in the
environment or .env), else the secret generated into DATA_DIR (created now if absent, as npm start
would).

  --role <role>     ${BUILT_IN_ROLES.join(', ')}; repeat it or separate roles with commas
  --sub <subject>   whom the token names: the actor recorded in auditInfo and in every event
  --ttl <duration>  lifetime: <n>s, <n>m, <n>h or <n>d (a bare <n> is seconds); at most 24h; default 12h
  --help            this text

Not available when AUTH_ISSUER is set: the service then accepts only the OIDC issuer's tokens.`;

function parseOptions<T extends NonNullable<ParseArgsConfig['options']>>(args: readonly string[], options: T) {
  try {
    return parseArgs({ args: [...args], options, strict: true, allowPositionals: false }).values;
  } catch (error) {
    // parseArgs's messages name the offending option and say what is wrong with it.
    throw new UsageError(error instanceof Error ? error.message : String(error));
  }
}

const UNIT_SECONDS: ReadonlyMap<string, number> = new Map([
  ['s', 1],
  ['m', 60],
  ['h', 3600],
  ['d', 86_400],
]);

function ttlSeconds(text: string): number {
  const match = /^(\d{1,9})([smhd])?$/.exec(text.trim());
  const seconds = match?.[1] === undefined ? Number.NaN : Number(match[1]) * (UNIT_SECONDS.get(match[2] ?? 's') ?? Number.NaN);
  if (!Number.isSafeInteger(seconds) || seconds < 1)
    throw new UsageError(`--ttl ${JSON.stringify(text)}: expected a duration such as 30m, 12h or 1d`);
  if (seconds > MAX_TOKEN_LIFETIME_SECONDS) {
    throw new UsageError(`--ttl ${text}: a token may live at most 24h; the service refuses longer-lived tokens`);
  }
  return seconds;
}

function rolesOf(values: readonly string[]): string[] {
  const roles = [
    ...new Set(
      values
        .flatMap((v) => v.split(','))
        .map((r) => r.trim())
        .filter((r) => r !== ''),
    ),
  ];
  if (roles.length === 0) throw new UsageError(`--role is required: one or more of ${BUILT_IN_ROLES.join(', ')}`);
  const unknown = roles.filter((r) => !BUILT_IN_ROLES.includes(r));
  if (unknown.length > 0) {
    throw new UsageError(
      `unknown role ${unknown.map((r) => JSON.stringify(r)).join(', ')}: the built-in roles are ${BUILT_IN_ROLES.join(', ')}`,
    );
  }
  return roles;
}

async function token(args: readonly string[]): Promise<void> {
  const values = parseOptions(args, {
    role: { type: 'string', multiple: true },
    sub: { type: 'string' },
    ttl: { type: 'string' },
    help: { type: 'boolean' },
  });
  if (values.help === true) {
    console.log(TOKEN_USAGE);
    return;
  }
  const roles = rolesOf(values.role ?? []);
  const sub = values.sub ?? '';
  if (sub.trim() === '') throw new UsageError('--sub is required: whom the token names, e.g. --sub alice');
  const ttl = ttlSeconds(values.ttl ?? '12h');
  const config = loadConfig();
  if (config.AUTH_ISSUER !== undefined) {
    throw new UsageError(
      `AUTH_ISSUER is set (${config.AUTH_ISSUER}): the service accepts only that OIDC issuer's tokens, so get tokens from the issuer`,
    );
  }
  console.log(await signHs256(hs256Secret(config), { sub, roles }, ttl));
}

const OPENAPI_USAGE = `Usage: npm run openapi [-- --out <file>]

Writes the service's OpenAPI 3.1 document (the HTTP contract, as GET /openapi.json serves it) to
openapi.json in the repository (or --out <file>; - for standard output). A test fails when the
committed file differs from what the code serves: run this after changing a route or a schema.`;

async function openapi(args: readonly string[]): Promise<void> {
  const values = parseOptions(args, { out: { type: 'string' }, help: { type: 'boolean' } });
  if (values.help === true) {
    console.log(OPENAPI_USAGE);
    return;
  }
  const text = await openApiDocument();
  const out = values.out ?? 'openapi.json';
  if (out === '-') process.stdout.write(text);
  else {
    writeFileSync(out, text);
    console.error(`wrote ${out}`);
  }
}

/** The document as `npm start` serves it on its default configuration, from an app on throwaway
 * in-memory stores: tokens are HS256 as there (a throwaway secret), so the login route that exists
 * only then is described too. */
export async function openApiDocument(): Promise<string> {
  const service = await composeService({
    eventStore: openSqliteEventStore(':memory:'),
    readStore: openSqliteReadStore({ path: ':memory:' }),
    blobStore: openSqliteBlobStore(':memory:'),
    ...hs256Tokens(randomBytes(48)),
  });
  try {
    const response = await service.app.inject({ method: 'GET', url: '/openapi.json' });
    return `${JSON.stringify(response.json(), null, 2)}\n`;
  } finally {
    await service.close();
  }
}

const COMMANDS: ReadonlyMap<string, Command> = new Map([
  ['token', { summary: "print a bearer token signed with the service's HS256 secret", run: token }],
  ['openapi', { summary: 'write the OpenAPI document (the HTTP contract) to openapi.json', run: openapi }],
]);

const usage = (): string =>
  'Usage: node api/cli.ts <command> [options]   (or npm run <command> -- [options])\n\nCommands:\n' +
  [...COMMANDS].map(([name, c]) => `  ${name.padEnd(10)}${c.summary}`).join('\n') +
  '\n\nEach command takes --help.';

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return 0;
  }
  const command = name === undefined ? undefined : COMMANDS.get(name);
  if (name === undefined || command === undefined) {
    console.error(name === undefined ? usage() : `Unknown command ${JSON.stringify(name)}.\n\n${usage()}`);
    return 2;
  }
  try {
    await command.run(args);
    return 0;
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${name}: ${error.message}\n(${name} --help shows the options)`);
    return 2;
  }
}

// exitCode rather than exit(): a token written to a pipe is flushed before the process ends.
// Imported (by the test of the committed document), it runs nothing.
if (import.meta.main)
  void main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exitCode = 1;
    },
  );
