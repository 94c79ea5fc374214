// What every command gets from the global options: a client of the service and the output mode.

import type { Command } from 'commander';
import { ApiClient } from './client.ts';
import { CliError, EXIT } from './output.ts';

export type GlobalOptions = { url: string; token?: string; json?: boolean };

export type Context = { client: ApiClient; json: boolean; token: string };

/** The context of the running command, from its options and its parents'. */
export function contextOf(command: Command): Context {
  const { url, token, json } = command.optsWithGlobals<GlobalOptions>();
  if (token === undefined || token === '') {
    throw new CliError('no token: pass --token or set ADMIN_TOKEN (`npm run token` prints one)', EXIT.usage);
  }
  try {
    new URL(url);
  } catch {
    throw new CliError(`--url ${JSON.stringify(url)} is not a URL (e.g. http://127.0.0.1:8080)`, EXIT.usage);
  }
  return { client: new ApiClient({ url, token }), json: json === true, token };
}

/** The caller the token names (its `sub`), read without verifying: the server verifies it. */
export function actorOf(token: string): string {
  try {
    const payload = token.split('.')[1] ?? '';
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { sub?: unknown };
    return typeof claims.sub === 'string' ? claims.sub : 'admin-cli';
  } catch {
    return 'admin-cli';
  }
}

/** A resource path as the API spells it (`user-groups`), checked before any request. */
export function resourcePath(value: string): string {
  if (!/^[a-z][a-z0-9-]*$/.test(value))
    throw new CliError(`${JSON.stringify(value)} is not a resource path (e.g. user-groups, users, access-rules)`, EXIT.usage);
  return value;
}
