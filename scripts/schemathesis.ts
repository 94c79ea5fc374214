// Schemathesis, an outside fuzzer of HTTP APIs (https://schemathesis.readthedocs.io), against the
// service as `npm start` runs it, driven by openapi.json with an admin token and the settings of
// schemathesis.toml (what the document cannot state, each with its reason). Installed from PyPI
// once into a virtual environment in .tools/schemathesis-<version>/ (git-ignored, kept across
// `npm ci`); Python 3.9 or later is needed, else the callers say why and skip.
//
//   npm run fuzz                          install if needed, start the service, fuzz it, stop it
//   npm run fuzz -- --max-examples 200    a longer run (the test run uses MAX_EXAMPLES_IN_TESTS)
//   npm run fuzz -- --seed 123            repeat a run; --workers N (1 on a Python before 3.12); --install only installs
//
// test/api/schemathesis.int.spec.ts runs it in every `npm test`, bounded to fit CI.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultServiceEnv, startServiceProcess, stopServiceProcess } from '../test/support/serviceProcess.ts';

export const SCHEMATHESIS_VERSION = '4.32.5';
/** Examples per operation and phase in `npm test`: about five minutes on 2 cores under load. */
export const MAX_EXAMPLES_IN_TESTS = 8;
const MIN_PYTHON: readonly [number, number] = [3, 9];

const root = join(import.meta.dirname, '..');
const venv = join(root, '.tools', `schemathesis-${SCHEMATHESIS_VERSION}`);
const st = join(venv, 'bin', 'schemathesis');

type Missing = { missing: string };

/** A Python 3.9+ to make the virtual environment with, or why there is none. */
function findPython(): { python: string } | Missing {
  for (const python of ['python3', 'python']) {
    const probe = spawnSync(python, ['-c', 'import sys, venv; print("%d.%d" % sys.version_info[:2])'], { encoding: 'utf8' });
    if (probe.status !== 0) continue;
    const [major = 0, minor = 0] = probe.stdout.trim().split('.').map(Number);
    if (major > MIN_PYTHON[0] || (major === MIN_PYTHON[0] && minor >= MIN_PYTHON[1])) return { python };
    return {
      missing: `${python} is Python ${probe.stdout.trim()}; Schemathesis ${SCHEMATHESIS_VERSION} needs ${MIN_PYTHON.join('.')} or later`,
    };
  }
  return { missing: 'no Python 3 with venv (python3 or python on PATH) to install Schemathesis into' };
}

/** The schemathesis command, installed from PyPI first if needed; or why it cannot be had. */
export function installSchemathesis(log: (line: string) => void = () => undefined): { st: string } | Missing {
  if (existsSync(st)) return { st };
  const found = findPython();
  if ('missing' in found) return found;
  log(`installing schemathesis==${SCHEMATHESIS_VERSION} from PyPI into ${venv}`);
  const steps: [string, string[]][] = [
    [found.python, ['-m', 'venv', venv]],
    [join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `schemathesis==${SCHEMATHESIS_VERSION}`]],
  ];
  for (const [command, args] of steps) {
    const run = spawnSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    if (run.status !== 0) {
      rmSync(venv, { recursive: true, force: true });
      return { missing: `${[command, ...args].join(' ')} failed: ${(run.stderr || run.stdout || String(run.error)).trim().slice(-500)}` };
    }
  }
  return { st };
}

/** Workers Schemathesis may run in threads here. CPython before 3.12 miscounts the AST's recursion
 * depth when threads parse at once (python/cpython#106905: "AST constructor recursion depth
 * mismatch"), which Hypothesis does while describing its strategies: with more than one worker a
 * phase then stops with a runtime error. So one worker on such a Python. */
export function safeWorkers(wanted: number): number {
  const probe = spawnSync(join(venv, 'bin', 'python'), ['-c', 'import sys; print(int(sys.version_info >= (3, 12)))'], { encoding: 'utf8' });
  return probe.stdout.trim() === '1' ? wanted : 1;
}

export type FuzzOptions = { maxExamples: number; workers?: number; seed?: string; out?: (chunk: string) => void };
export type FuzzResult = { exitCode: number; output: string; summary: string };

/** Starts the service as `npm start` does (embedded stores in a fresh folder), fuzzes it, stops it. */
export async function fuzzService(command: string, options: FuzzOptions): Promise<FuzzResult> {
  const dataDir = mkdtempSync(join(tmpdir(), 'schemathesis-'));
  const service = await startServiceProcess(defaultServiceEnv({ DATA_DIR: dataDir }));
  try {
    const args = [
      '--no-color',
      '--config-file',
      join(root, 'schemathesis.toml'),
      'run',
      join(root, 'openapi.json'),
      '--url',
      service.url,
      '--header',
      `Authorization: Bearer ${service.token}`,
      '--max-examples',
      String(options.maxExamples),
      '--workers',
      String(safeWorkers(options.workers ?? 2)),
      ...(options.seed === undefined ? [] : ['--seed', options.seed]),
    ];
    const child = spawn(command, args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const take = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      options.out?.(text);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    const exitCode = await new Promise<number>((resolve) =>
      child.on('close', (code) => {
        resolve(code ?? 1);
      }),
    );
    return { exitCode, output, summary: summaryOf(output) };
  } finally {
    await stopServiceProcess(service);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** What a reader needs of Schemathesis's report: each failure with its reproduction, then the
 * summary (operations, phases, failures, warnings, counts). */
export const summaryOf = (output: string): string => {
  const summary = output.lastIndexOf('SUMMARY');
  const closing = summary < 0 ? output.slice(-2000) : output.slice(summary);
  // Failures (checks that failed) and errors (a phase that could not run), each with its details.
  const sections = ['= ERRORS =', '= FAILURES ='].flatMap((title) => {
    const at = output.indexOf(title);
    if (at < 0) return [];
    const next = output.slice(at + title.length).search(/\n=+ [A-Z]+ =+\n/);
    return [output.slice(at, next < 0 ? at + 30_000 : Math.min(at + title.length + next, at + 30_000))];
  });
  return [...sections, closing].join('\n');
};

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'max-examples': { type: 'string', default: '100' },
      workers: { type: 'string', default: '2' },
      seed: { type: 'string' },
      install: { type: 'boolean', default: false },
    },
  });
  const installed = installSchemathesis((line) => {
    console.error(line);
  });
  if ('missing' in installed) {
    console.error(`Schemathesis: ${installed.missing}`);
    process.exit(1);
  }
  if (values.install) return;
  const result = await fuzzService(installed.st, {
    maxExamples: Number(values['max-examples']),
    workers: Number(values.workers),
    ...(values.seed === undefined ? {} : { seed: values.seed }),
    out: (chunk) => {
      process.stdout.write(chunk);
    },
  });
  process.exit(result.exitCode);
}

if (import.meta.main) await main();
