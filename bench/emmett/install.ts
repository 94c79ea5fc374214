// The peer's install, run by bench/http.ts before its peer figures (never by the project's own
// `npm install` or `npm test`): Emmett's SQLite event store, pinned in bench/emmett/package.json,
// goes into bench/emmett/node_modules (git-ignored) the first time, and again whenever it no longer
// loads in the Node that runs the bench.
//
// Its sqlite3 dependency is a native addon. Its prebuilt binaries come from GitHub, which is not
// reachable from every machine, so it may compile from source (about a minute or two); it must
// compile against the headers of the Node that will load it. This machine's npm config sends
// native builds to Node 20's headers (`nodedir=/usr`), so the install runs with npm_config_nodedir
// set to the running Node's own: an official build keeps them beside its bin/, in
// <prefix>/include/node (the Node 24 in .tools does), and with that Node first on PATH, so that
// node-gyp and the install scripts run on it too.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { delimiter, dirname, join, relative } from 'node:path';

const DIR = import.meta.dirname;
const PACKAGE = '@event-driven-io/emmett-sqlite';

export type PeerInstall = { ok: true; version: string; installSeconds: number | undefined } | { ok: false; reason: string };

const readJson = (file: string): unknown => JSON.parse(readFileSync(file, 'utf8'));

/** The version bench/emmett/package.json pins. */
function pinned(): string {
  const pkg = readJson(join(DIR, 'package.json')) as { dependencies?: Record<string, string> };
  const version = pkg.dependencies?.[PACKAGE];
  if (version === undefined) throw new Error(`bench/emmett/package.json does not pin ${PACKAGE}`);
  return version;
}

function installedVersion(): string | undefined {
  const file = join(DIR, 'node_modules', ...PACKAGE.split('/'), 'package.json');
  return existsSync(file) ? (readJson(file) as { version: string }).version : undefined;
}

/** Whether Emmett (and so the sqlite3 addon) loads in the Node that runs the bench: the stderr's
 * last lines when it does not. */
function loadError(): string | undefined {
  const probe = spawnSync(
    process.execPath,
    ['--input-type=module', '-e', `await import('${PACKAGE}'); await import('@event-driven-io/emmett');`],
    { cwd: DIR, encoding: 'utf8' },
  );
  return probe.status === 0 ? undefined : probe.stderr.trim().split('\n').slice(-3).join(' | ') || `exit ${String(probe.status)}`;
}

/** npm itself: the CLI that runs this script under `npm run` (on this Node), else the one on PATH. */
function npmCommand(): [string, string[]] {
  const cli = process.env.npm_execpath;
  return cli?.endsWith('.js') === true ? [process.execPath, [cli]] : ['npm', []];
}

function runNpm(args: string[], headers: string): boolean {
  const [file, pre] = npmCommand();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    npm_config_nodedir: headers,
    PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}`,
  };
  // Left by `npm run bench` for the project: the nested npm works on bench/emmett alone.
  delete env.npm_config_local_prefix;
  const result = spawnSync(file, [...pre, ...args, '--prefix', DIR, '--no-audit', '--no-fund'], {
    cwd: DIR,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return result.status === 0;
}

/** Installs the peer when it is missing, at another version, or does not load; reports how long it took. */
export function ensurePeerInstalled(): PeerInstall {
  const want = pinned();
  if (installedVersion() === want && loadError() === undefined) return { ok: true, version: want, installSeconds: undefined };

  const prefix = dirname(dirname(realpathSync(process.execPath)));
  if (!existsSync(join(prefix, 'include', 'node', 'node.h'))) {
    return { ok: false, reason: `${prefix} has no include/node headers for Node ${process.version} to compile sqlite3 against` };
  }
  console.log(
    `Peer: installing ${PACKAGE}@${want} into ${relative(process.cwd(), join(DIR, 'node_modules')) || 'bench/emmett/node_modules'} (native sqlite3 against Node ${process.version}'s headers in ${prefix}) ...`,
  );
  const started = performance.now();
  let ok = runNpm(['install'], prefix);
  // An addon left from a build for another Node: installed, but it does not load.
  if (ok && loadError() !== undefined) ok = runNpm(['rebuild', 'sqlite3'], prefix);
  const installSeconds = (performance.now() - started) / 1000;
  const error = loadError();
  if (!ok || error !== undefined || installedVersion() !== want) {
    return {
      ok: false,
      reason: `npm install in bench/emmett ${ok ? `left ${PACKAGE} unloadable: ${error ?? `version ${installedVersion() ?? 'none'}`}` : 'failed'}`,
    };
  }
  console.log(`Peer: installed in ${installSeconds.toFixed(0)} s`);
  return { ok: true, version: want, installSeconds };
}
