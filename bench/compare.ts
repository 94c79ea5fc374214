// `node bench/compare.ts --before <git ref> [--after <git ref>] [--runs N] [-- <bench flags>]`:
// `npm run bench` of two commits measured in one run, to tell whether a change moved its ratios.
//
// `before` is checked out into a temporary `git worktree`; `after` is this checkout as it stands
// (uncommitted changes included), or with --after a second temporary worktree. The two run
// `npm run bench -- <bench flags>` in turn, each its own bench on its own code, N times each, the
// order flipping every round (before after, after before, …) so that a drift of the machine's load
// weighs on both alike. Each run's table already gives every figure as a ratio against a baseline
// measured in the same run; this prints, for each figure with a ratio, the ratio of every run of
// each side, their medians, and after/before (1.00 = unchanged). The spread (largest over smallest
// ratio of one side, less 1) is the noise to judge that quotient by. Absolute rows (p99s, the lag)
// are left out: they move with the machine's load, and the ratios are the figures to compare.
//
// A temporary worktree gets this checkout's node_modules as a symlink where both commits'
// package-lock.json and package.json's dependencies are equal, else its own `npm install` (from
// npm's cache, with .tools/ linked from here first so that Node 24 and the Kafka broker's jars are
// not fetched again). The peer's Emmett (bench/emmett/node_modules) is linked where its lock file
// is equal; nothing else is installed.
// The worktrees are removed at the end, and the runs' logs too unless --keep.
//
// Flags: --before REF (required), --after REF, --runs N (per side, default 2), --keep; after `--`,
// the bench's own flags (default: the short run below, a few minutes a side).

import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensurePeerInstalled } from './emmett/install.ts';
import { median } from './httpSupport.ts';

/** A few minutes a side: every figure, with short rounds (no peer: it compiles Emmett first). The
 * warm-ups stay at the bench's default 2 s: they also create the records the reads rotate over, and
 * 1 s created none under a load average of 30 (bench/telemetry.ts stopped the run). */
const SHORT = [
  '--duration',
  '4',
  '--warmup',
  '2',
  '--rounds',
  '2',
  '--append-duration',
  '2',
  '--no-peer',
  '--lag-duration',
  '10',
  '--pdf-renders',
  '10',
  '--pdf-seconds',
  '1',
];

const { values: flags, positionals } = parseArgs({
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    runs: { type: 'string', default: '2' },
    keep: { type: 'boolean', default: false },
  },
  allowPositionals: true,
});
if (flags.before === undefined) throw new Error('--before <git ref> is required (e.g. --before main)');
const RUNS = Math.round(Number(flags.runs));
if (!(RUNS >= 1)) throw new Error(`--runs must be a positive number, got "${flags.runs}"`);
const benchFlags = positionals.length > 0 ? positionals : SHORT;

const root = join(import.meta.dirname, '..');
const git = (args: string[], cwd = root): string => {
  const r = spawnSync('git', args, { cwd, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr.trim()}`);
  return r.stdout.trim();
};
const load = (): string =>
  loadavg()
    .map((n) => n.toFixed(2))
    .join(' ');

type Side = { name: 'before' | 'after'; label: string; dir: string; worktree: boolean };

const scratch = mkdtempSync(join(tmpdir(), 'bench-compare-'));

/** Links `path` of this checkout into `dir`, where this checkout has it and `dir` does not. */
function linkFromHere(dir: string, path: string): void {
  if (existsSync(join(root, path)) && !existsSync(join(dir, path))) symlinkSync(join(root, path), join(dir, path));
}

function same(dir: string, file: string): boolean {
  return existsSync(join(dir, file)) && readFileSync(join(root, file), 'utf8') === readFileSync(join(dir, file), 'utf8');
}

/** Whether package.json asks for the same packages in both (its scripts may differ). */
function sameDependencies(dir: string): boolean {
  const deps = (base: string): string => {
    const pkg = JSON.parse(readFileSync(join(base, 'package.json'), 'utf8')) as Record<string, unknown>;
    return JSON.stringify([pkg.dependencies, pkg.devDependencies, pkg.optionalDependencies, pkg.overrides, pkg.engines]);
  };
  return existsSync(join(dir, 'package.json')) && deps(root) === deps(dir);
}

function checkout(name: Side['name'], ref: string): Side {
  const commit = git(['rev-parse', '--short', `${ref}^{commit}`]);
  const dir = join(scratch, name);
  git(['worktree', 'add', '--detach', dir, commit]);
  linkFromHere(dir, '.tools');
  if (sameDependencies(dir) && same(dir, 'package-lock.json')) {
    linkFromHere(dir, 'node_modules');
  } else {
    console.log(`${name}: its package.json or package-lock.json differs from this checkout's: npm install there ...`);
    const r = spawnSync('npm', ['install', '--no-audit', '--no-fund'], { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) throw new Error(`npm install in the worktree of ${ref} failed`);
  }
  if (same(dir, join('bench', 'emmett', 'package-lock.json'))) linkFromHere(dir, join('bench', 'emmett', 'node_modules'));
  return { name, label: `${ref} (${commit})`, dir, worktree: true };
}

function here(): Side {
  const dirty = git(['status', '--porcelain', '--untracked-files=no']) === '' ? '' : ' + uncommitted changes';
  return {
    name: 'after',
    label: `this checkout, ${git(['rev-parse', '--abbrev-ref', 'HEAD'])} (${git(['rev-parse', '--short', 'HEAD'])}${dirty})`,
    dir: root,
    worktree: false,
  };
}

/** The figure → ratio of one run's table ("1.23x" or "45%"); rows without a ratio are left out. */
function ratios(output: string): Map<string, number> {
  const found = new Map<string, number>();
  for (const line of output.split('\n')) {
    const cells = line.split('|').map((c) => c.trim());
    if (cells.length !== 8 || cells[1] === 'figure') continue;
    const [figure, ratio] = [cells[1] ?? '', cells[4] ?? ''];
    const times = /^(\d+(?:\.\d+)?)x$/.exec(ratio);
    const percent = /^(\d+(?:\.\d+)?)%$/.exec(ratio);
    if (times !== null) found.set(figure, Number(times[1]));
    else if (percent !== null) found.set(figure, Number(percent[1]) / 100);
  }
  return found;
}

/** One `npm run bench` in `side`'s checkout, its output kept in a log; the table's ratios, or
 * none when it printed no table (a figure failed: the log says why; the other runs still count). */
async function run(side: Side, n: number): Promise<Map<string, number>> {
  const log = join(scratch, `${side.name}-${String(n)}.log`);
  const started = performance.now();
  console.log(`${side.name} run ${String(n)}: started, load average ${load()} (log ${log})`);
  const out = createWriteStream(log);
  let output = '';
  const child = spawn('npm', ['run', '--silent', 'bench', '--', ...benchFlags], { cwd: side.dir, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    out.write(chunk);
  });
  child.stderr.on('data', (chunk: Buffer) => out.write(chunk));
  const code = await new Promise<number | null>((done) => child.once('close', done));
  await new Promise((done) => out.end(done));
  const found = ratios(output);
  const seconds = ((performance.now() - started) / 1000).toFixed(0);
  console.log(`${side.name} run ${String(n)}: ${String(found.size)} ratios in ${seconds} s, exit ${String(code)}, load average ${load()}`);
  if (found.size === 0) {
    console.log(
      `${side.name} run ${String(n)} printed no table; the end of ${log}:\n${readFileSync(log, 'utf8').split('\n').slice(-12).join('\n')}`,
    );
    process.exitCode = 1;
  }
  return found;
}

const two = (n: number | undefined): string => (n === undefined || Number.isNaN(n) ? '—' : n.toFixed(2));

function report(before: Map<string, number>[], after: Map<string, number>[]): string {
  const figures = [...new Set([...before, ...after].flatMap((m) => [...m.keys()]))];
  const rows = figures.map((figure) => {
    const b = before.map((m) => m.get(figure)).filter((r) => r !== undefined);
    const a = after.map((m) => m.get(figure)).filter((r) => r !== undefined);
    const spread = (rs: number[]): number => (rs.length < 2 ? NaN : Math.max(...rs) / Math.min(...rs) - 1);
    const noise = Math.max(spread(b), spread(a));
    const quotient = b.length > 0 && a.length > 0 ? median(a) / median(b) : NaN;
    return `| ${figure} | ${b.map(two).join(', ')} | ${a.map(two).join(', ')} | ${two(median(b))} | ${two(median(a))} | ${two(quotient)} | ${Number.isNaN(noise) ? '—' : `${(noise * 100).toFixed(0)}%`} |`;
  });
  return [
    '| figure | before, each run | after, each run | before | after | after/before | spread |',
    '|---|---|---|---|---|---|---|',
    ...rows,
  ].join('\n');
}

async function main(): Promise<void> {
  const sides: Side[] = [];
  try {
    if (!benchFlags.includes('--no-peer')) {
      const install = ensurePeerInstalled();
      if (!install.ok) throw new Error(`the peer is not installed here (${install.reason}); pass --no-peer among the bench flags`);
    }
    sides.push(checkout('before', flags.before ?? ''), flags.after === undefined ? here() : checkout('after', flags.after));
    const [before, after] = sides as [Side, Side];
    console.log(
      `before: ${before.label}\nafter:  ${after.label}\nbench flags: ${benchFlags.join(' ')}; ${String(RUNS)} runs each, alternating\nload average at the start: ${load()}\n`,
    );
    const results = { before: [] as Map<string, number>[], after: [] as Map<string, number>[] };
    for (let round = 1; round <= RUNS; round++) {
      for (const side of round % 2 === 1 ? [before, after] : [after, before]) results[side.name].push(await run(side, round));
    }
    console.log(`\nload average at the end: ${load()}\n`);
    console.log(report(results.before, results.after));
    console.log(
      `\n(each ratio against its baseline in the same run, as npm run bench prints it, rounded down to 0.01 or 1%; before and after the medians of ${String(RUNS)} runs; spread: the largest over the smallest ratio of one side, less 1, the larger of the two sides)`,
    );
  } finally {
    for (const side of sides) if (side.worktree) git(['worktree', 'remove', '--force', side.dir]);
    if (flags.keep) console.log(`logs kept in ${scratch}`);
    else rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exitCode = 1;
});
