// FerretDB, a MongoDB-protocol server over SQLite files, for the tests and by hand. Our Go main
// (scripts/ferretdb/main.go, which embeds FerretDB's package; go.mod pins the version) is built
// once into .tools/ferretdb-<version>/ferretdb, with Go's module and build caches in .tools/go/, so
// a fresh machine builds it the same way from the Go module proxy (CGO_ENABLED=0: pure Go).
//
//   npm run ferretdb:build                                   build it (nothing to do when built)
//   npm run ferretdb [-- --port 27017 --dir data/ferretdb]   run it on 127.0.0.1 until Ctrl-C
//
// The test run's FerretDB is started by test/support/ferretdb.globalSetup.ts through startFerretdb.

import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'scripts', 'ferretdb');
const SOURCE_FILES = ['main.go', 'go.mod', 'go.sum'];
/** Go's module cache, build cache and GOPATH: kept with the project's other tools, not in ~/go. */
export const GO_CACHE_DIR = join(root, '.tools', 'go');
/** The oldest Go that builds FerretDB 1.24 (its go.mod says `go 1.24`). */
const MIN_GO = [1, 24] as const;
const START_TIMEOUT_MS = 30_000;
const LISTENING = /^ferretdb listening on (mongodb:\/\/\S+)$/m;

/** The FerretDB version go.mod pins, e.g. "v1.24.2". */
export function ferretdbVersion(): string {
  const pinned = /^require github\.com\/FerretDB\/FerretDB (v\S+)$/m.exec(readFileSync(join(source, 'go.mod'), 'utf8'));
  if (pinned?.[1] === undefined)
    throw new Error('scripts/ferretdb/go.mod pins no github.com/FerretDB/FerretDB version on a require line of its own');
  return pinned[1];
}

export const ferretdbBinary = (): string => join(root, '.tools', `ferretdb-${ferretdbVersion()}`, 'ferretdb');

/** Our sources' digest: a binary built from other sources is built again. */
function sourceDigest(): string {
  const hash = createHash('sha256');
  for (const file of SOURCE_FILES) hash.update(file).update(readFileSync(join(source, file)));
  return hash.digest('hex');
}

/** Why Go cannot build it here, or undefined when it can. */
function goMissing(): string | undefined {
  const found = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (found.error !== undefined) return 'Go is not on PATH (FerretDB is built from source with Go 1.24 or later)';
  const version = /go(\d+)\.(\d+)/.exec(found.stdout);
  const [major, minor] = [Number(version?.[1] ?? 0), Number(version?.[2] ?? 0)];
  if (major < MIN_GO[0] || (major === MIN_GO[0] && minor < MIN_GO[1])) {
    return `${found.stdout.trim()} is older than the Go ${MIN_GO.join('.')} FerretDB ${ferretdbVersion()} needs`;
  }
  return undefined;
}

export type Built = { binary: string; version: string; built: boolean; seconds: number } | { missing: string };

/** Builds the binary unless a build of the same sources is there; answers why not where Go is
 * missing or the build fails. `say` hears what takes time. */
export function buildFerretdb(say: (line: string) => void = () => undefined): Built {
  const version = ferretdbVersion();
  const binary = ferretdbBinary();
  const stamp = `${binary}.sources`;
  const digest = sourceDigest();
  if (existsSync(binary) && existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === digest)
    return { binary, version, built: false, seconds: 0 };
  const missing = goMissing();
  if (missing !== undefined) return { missing };
  mkdirSync(dirname(binary), { recursive: true });
  say(`building FerretDB ${version} (scripts/ferretdb/main.go) into ${binary}; Go's caches in ${GO_CACHE_DIR}`);
  const started = Date.now();
  // Another build (a second test run) may finish first: each writes its own file, then renames.
  const partial = `${binary}.${String(process.pid)}.partial`;
  const build = spawnSync('go', ['build', '-trimpath', '-tags', 'ferretdb_no_postgresql', '-o', partial, '.'], {
    cwd: source,
    encoding: 'utf8',
    env: {
      ...process.env,
      GOPATH: GO_CACHE_DIR,
      GOMODCACHE: join(GO_CACHE_DIR, 'mod'),
      GOCACHE: join(GO_CACHE_DIR, 'cache'),
      // Read-only module files would make `rm -rf .tools` fail.
      GOFLAGS: '-modcacherw -mod=readonly',
      // The machine's Go builds it; none is downloaded.
      GOTOOLCHAIN: 'local',
      CGO_ENABLED: '0',
    },
  });
  if (build.status !== 0) {
    rmSync(partial, { force: true });
    const output = `${build.stderr}${build.stdout}`.trim().split('\n').slice(-5).join(' | ');
    return { missing: `go build of scripts/ferretdb failed (${build.error?.message ?? `exit ${String(build.status)}`}): ${output}` };
  }
  renameSync(partial, binary);
  writeFileSync(stamp, `${digest}\n`);
  return { binary, version, built: true, seconds: Math.round((Date.now() - started) / 100) / 10 };
}

export type RunningFerretdb = { url: string; stop: () => Promise<void> };

/** Starts the binary on 127.0.0.1 (port 0: a free one) with its SQLite files in `stateDir`;
 * answers its URL once it accepts connections. It also stops when this process dies (its stdin, a
 * pipe from here, closes). */
export function startFerretdb(binary: string, options: { stateDir: string; port?: number; logLevel?: string }): Promise<RunningFerretdb> {
  const args = [
    '-listen-addr',
    `127.0.0.1:${String(options.port ?? 0)}`,
    '-state-dir',
    options.stateDir,
    '-log-level',
    options.logLevel ?? 'warn',
    '-stop-on-eof',
  ];
  const child = spawn(binary, args, { stdio: ['pipe', 'pipe', 'pipe'] });
  let output = '';
  const stop = (): Promise<void> =>
    new Promise((done) => {
      if (child.exitCode !== null || child.signalCode !== null) {
        done();
        return;
      }
      const force = setTimeout(() => child.kill('SIGKILL'), 5_000);
      child.once('exit', () => {
        clearTimeout(force);
        done();
      });
      child.kill('SIGTERM');
    });
  return new Promise((resolveStart, reject) => {
    const fail = (reason: string): void => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${reason}; its output: ${output.trim().slice(-600) || 'none'}`));
    };
    const timer = setTimeout(() => {
      fail(`FerretDB did not say it was listening within ${String(START_TIMEOUT_MS / 1000)} s`);
    }, START_TIMEOUT_MS);
    child.on('error', (error) => {
      fail(`FerretDB could not start (${binary}): ${error.message}`);
    });
    child.on('exit', (code, signal) => {
      fail(`FerretDB exited (${signal ?? `code ${String(code)}`}) before it listened`);
    });
    const read = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      const url = LISTENING.exec(output)?.[1];
      if (url === undefined) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      child.removeAllListeners('error');
      child.on('error', () => undefined);
      // Keep draining its output so it never blocks on a full pipe.
      child.stdout.removeListener('data', read);
      child.stderr.removeListener('data', read);
      child.stdout.resume();
      child.stderr.resume();
      resolveStart({ url, stop });
    };
    child.stdout.on('data', read);
    child.stderr.on('data', read);
  });
}

async function main(): Promise<void> {
  const command = process.argv[2];
  if (command !== 'build' && command !== 'run') {
    console.error('usage: node scripts/ferretdb.ts build | run [--port 27017] [--dir data/ferretdb]');
    process.exit(2);
  }
  const { values } = parseArgs({
    args: process.argv.slice(3),
    options: { port: { type: 'string', default: '27017' }, dir: { type: 'string', default: join('data', 'ferretdb') } },
  });
  const built = buildFerretdb((line) => {
    console.error(line);
  });
  if ('missing' in built) {
    console.error(`FerretDB is not available: ${built.missing}`);
    process.exit(1);
  }
  if (built.built) console.error(`built FerretDB ${built.version} in ${String(built.seconds)} s: ${built.binary}`);
  if (command === 'build') {
    if (!built.built) console.error(`FerretDB ${built.version} is built: ${built.binary}`);
    return;
  }
  const stateDir = resolve(values.dir);
  const running = await startFerretdb(built.binary, { stateDir, port: Number(values.port), logLevel: 'info' });
  console.log(`FerretDB ${built.version} listening on ${running.url} (SQLite files in ${stateDir}); Ctrl-C stops it`);
  console.log(`  MONGODB_URL=${running.url}admin-read-models npm start`);
  const stop = (): void => {
    void running.stop().then(() => process.exit(0));
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
