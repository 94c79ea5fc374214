// Vitest global setup: one FerretDB (a MongoDB-protocol server over SQLite files, built by
// scripts/ferretdb.ts) per test run, on a free loopback port and a fresh temporary folder, for the
// suites that run on every MongoDB peer (test/support/mongoPeers.ts); each test file uses its own
// database. Where Go is missing or the build fails, those suites skip with the reason printed.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildFerretdb, startFerretdb } from '../../scripts/ferretdb.ts';

declare module 'vitest' {
  // Declaration merging needs an interface.
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions
  export interface ProvidedContext {
    /** The run's FerretDB (`mongodb://127.0.0.1:PORT/`), undefined when there is none. */
    ferretdbUrl: string | undefined;
    /** Which FerretDB that is ("FerretDB v1.24.2"), or why there is none. */
    ferretdbSource: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const say = (line: string): void => {
    process.stderr.write(`[ferretdb] ${line}\n`);
  };
  const built = buildFerretdb(say);
  if ('missing' in built) {
    say(`no FerretDB for the MongoDB peer suites: ${built.missing}`);
    project.provide('ferretdbUrl', undefined);
    project.provide('ferretdbSource', built.missing);
    return () => Promise.resolve();
  }
  if (built.built) say(`built FerretDB ${built.version} in ${String(built.seconds)} s`);
  const stateDir = mkdtempSync(join(tmpdir(), 'ferretdb-'));
  try {
    const running = await startFerretdb(built.binary, { stateDir });
    say(`FerretDB ${built.version} (SQLite backend) at ${running.url}, files in ${stateDir}`);
    project.provide('ferretdbUrl', running.url);
    project.provide('ferretdbSource', `FerretDB ${built.version}`);
    return async () => {
      await running.stop();
      rmSync(stateDir, { recursive: true, force: true });
    };
  } catch (error) {
    rmSync(stateDir, { recursive: true, force: true });
    const reason = error instanceof Error ? error.message : String(error);
    say(`no FerretDB for the MongoDB peer suites: ${reason}`);
    project.provide('ferretdbUrl', undefined);
    project.provide('ferretdbSource', reason);
    return () => Promise.resolve();
  }
}
