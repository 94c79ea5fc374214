// `node --expose-gc bench/importHeap.ts [records]`: where the memory of an import's diff goes, in
// this process (no HTTP, no read model): importDiff (api/importDiff.ts) over a generated export
// file of N worklog types (default 1,000,000), fed in chunks, against N records "here" of which
// one in 1,000 is renamed. Prints the growth of process.memoryUsage() at its peak (sampled every
// 20 ms) above a baseline taken after a GC, and the heap in use after a GC at the end: V8's heap
// size (heapTotal), what it held at once (heapUsed), and the typed arrays of the index
// (arrayBuffers).

import { importDiff } from '../api/importDiff.ts';
import { worklogType } from '../modules/registries/domain/worklogType.ts';

const N = Number(process.argv[2] ?? '1000000');
const at = '2026-01-01T00:00:00.000Z';
const record = (i: number, name: string) => ({
  id: `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`,
  code: `WT-${String(i).padStart(7, '0')}`,
  name,
  description: `Imported by the heap probe, record ${String(i)}`,
  validityFrom: at,
  auditInfo: { version: 0, whoInserted: 'bench', whenInserted: at, whoEdited: 'bench', whenEdited: at },
});

function* file(): Generator<Buffer> {
  yield Buffer.from('{"filtering":[],"compareField":"code","data":[');
  let parts: string[] = [];
  for (let i = 0; i < N; i++) {
    parts.push((i === 0 ? '' : ',') + JSON.stringify(record(i, `Worklog type ${String(i)}`)));
    if (parts.length === 200) {
      yield Buffer.from(parts.join(''));
      parts = [];
    }
  }
  yield Buffer.from(`${parts.join('')}]}`);
}

async function* here(): AsyncGenerator<ReturnType<typeof record>> {
  for (let i = 0; i < N; i++) {
    yield record(i, i % 1000 === 1 ? 'Renamed' : `Worklog type ${String(i)}`);
    if (i % 500 === 0) await Promise.resolve();
  }
}

const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');
gc();
const base = process.memoryUsage();
const peak = { ...base };
const sampler = setInterval(() => {
  const now = process.memoryUsage();
  for (const k of Object.keys(now) as (keyof typeof now)[]) peak[k] = Math.max(peak[k], now[k]);
}, 20);
const started = performance.now();
const diff = await importDiff(
  { def: worklogType, asked: undefined, checkFilter: () => undefined, here, heldTwice: () => Promise.resolve(false) },
  file(),
);
let entries = 0;
for await (const _ of diff.entries()) entries++;
clearInterval(sampler);
diff.close();
gc();
const after = process.memoryUsage();
const mb = (x: number): string => `${(x / 1048576).toFixed(1)} MB`;
console.log(`${String(N)} records, ${String(entries)} entries in ${((performance.now() - started) / 1000).toFixed(1)} s`);
console.log(
  `growth at the peak: rss ${mb(peak.rss - base.rss)}, heapTotal ${mb(peak.heapTotal - base.heapTotal)}, heapUsed ${mb(peak.heapUsed - base.heapUsed)}, ` +
    `arrayBuffers ${mb(peak.arrayBuffers - base.arrayBuffers)}; heap in use after a GC: ${mb(after.heapUsed - base.heapUsed)}`,
);
