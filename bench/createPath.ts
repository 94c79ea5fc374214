// The path a create request takes through the code, per resource: how many of the project's files
// run while it is served. Not a timing: counts, the same on a quiet or a busy machine.
//
//   node bench/createPath.ts            one line per resource with a create
//
// V8's precise coverage (node:inspector) around one create, after a first create of the same
// resource has warmed every lazy path; a file counts when one of its functions ran. The service runs
// as ROLE=api (it folds nothing and runs no reactor), so what counts is the request's own path, from
// the HTTP parser to the event log's append and back: --list names the files.

import { Session } from 'node:inspector/promises';
import { fileURLToPath } from 'node:url';
import { relative } from 'node:path';
import type { Module } from '../api/module.ts';
import { makeSampleReferences, sampleBody, uniqueCode } from '../test/support/samples.ts';
import { startTestApp } from '../test/support/testApp.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const own = (file: string) => {
  if (!file.startsWith('file://') && !file.startsWith('/')) return undefined; // node: built-ins, eval
  const path = file.startsWith('file://') ? fileURLToPath(file) : file;
  const rel = relative(root, path);
  return rel.startsWith('..') || rel.startsWith('node_modules') || rel.startsWith('test/') || rel.startsWith('bench/') ? undefined : rel;
};

// The module list moved (api/modules/index.ts before issue 25, modules/index.ts after): either.
type ModuleList = { modules: readonly Module[] };
const oldList = '../api/modules/index.ts';
const list: ModuleList = await import('../modules/index.ts').catch(async (): Promise<ModuleList> => (await import(oldList)) as ModuleList);

// The records samples name are made by a whole service (ROLE=all folds them into the read models a
// create checks references against), which then stops; the same data serves the ROLE=api one.
const maker = await startTestApp();
const refs = await makeSampleReferences((o) => maker.call(o));
await new Promise((r) => setTimeout(r, 1000));
await maker.close({ keepData: true });
const t = await startTestApp({ role: 'api', dataDir: maker.dataDir });

const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });

type Row = { module: string; path: string; files: string[] };
const rows: Row[] = [];
for (const module of list.modules) {
  for (const served of module.resources ?? []) {
    const def = served.definition;
    const create = async () => {
      const res = await t.call({ method: 'POST', url: `/api/v1/${def.path}`, payload: sampleBody(def, uniqueCode('P'), refs) });
      if (res.statusCode !== 201 && process.argv.includes('--why')) console.log(res.body);
      return res.statusCode;
    };
    const first = await create();
    if (first !== 201) {
      console.log(`${module.name.padEnd(24)} POST /api/v1/${def.path.padEnd(26)} skipped: the sample create answered ${String(first)}`);
      continue;
    }
    await session.post('Profiler.takePreciseCoverage'); // resets the counts
    const status = await create();
    const { result } = await session.post('Profiler.takePreciseCoverage');
    if (status !== 201) continue;
    const files = new Set(
      result.filter((s) => s.functions.some((f) => f.ranges.some((r) => r.count > 0))).flatMap((s) => own(s.url) ?? []),
    );
    rows.push({ module: module.name, path: def.path, files: [...files].sort() });
  }
}
await session.post('Profiler.stopPreciseCoverage');
session.disconnect();
await t.close();

const listFiles = process.argv.includes('--list');
for (const r of rows) {
  console.log(`${r.module.padEnd(24)} POST /api/v1/${r.path.padEnd(26)} files ${String(r.files.length).padStart(3)}`);
  if (listFiles) for (const f of r.files) console.log(`    ${f}`);
}
