// An import spools the uploaded file into a folder of the system's temporary folder
// (admin-import-<pid>-…), deleted when its diff is answered or applied. A process killed during an
// import cannot delete it: the next start sweeps the folders whose process has ended, and its own
// pid's from before it started (a container's service is pid 1 every time), never a folder of a
// process still running (tests and several services share one temporary folder).

import { spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { IMPORT_FOLDER_PREFIX, sweepStaleImports } from '../../api/importDiff.ts';
import { defaultServiceEnv, startServiceProcess, stopServiceProcess } from '../support/serviceProcess.ts';

const made: string[] = [];
const folder = (prefix: string): string => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.push(dir);
  return dir;
};
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

const imports = (dir: string): string[] => readdirSync(dir).filter((n) => n.startsWith(IMPORT_FOLDER_PREFIX));

describe('the temporary folder of an import', () => {
  it('is left by a process killed during the import, and removed when the service starts again', async () => {
    const tmp = folder('import-sweep-tmp-');
    const env = defaultServiceEnv({ DATA_DIR: folder('import-sweep-data-'), TMPDIR: tmp });
    const first = await startServiceProcess(env);
    // An upload that has begun and does not end: the service is spooling it when it is killed.
    const boundary = `----sweep${randomUUID()}`;
    const upload = request(`${first.url}/api/v1/user-group-types/import`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.token}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    });
    upload.on('error', () => undefined);
    upload.write(
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="export.json"\r\nContent-Type: application/json\r\n\r\n{"data":[`,
    );
    upload.write(
      Array.from({ length: 2000 }, (_, i) => JSON.stringify({ code: `C${String(i)}`, name: 'x'.repeat(40), registry: {} })).join(','),
    );
    for (const deadline = Date.now() + 20_000; imports(tmp).length === 0 && Date.now() < deadline;)
      await new Promise((resolve) => setTimeout(resolve, 50));
    await stopServiceProcess(first, 'SIGKILL');
    upload.destroy();
    const left = imports(tmp);
    expect(left).toHaveLength(1);
    expect(readdirSync(join(tmp, left[0] ?? ''))).toContain('items.jsonl');

    const second = await startServiceProcess(env);
    try {
      expect(imports(tmp)).toEqual([]);
    } finally {
      await stopServiceProcess(second);
    }
    // Two starts of the service, each up to a minute on a busy machine.
  }, 150_000);

  it('is swept only when its process has ended, or is this one from before it started', async () => {
    const root = folder('import-sweep-rules-');
    const dead = spawnSync(process.execPath, ['-e', '']).pid;
    const named = {
      dead: `${IMPORT_FOLDER_PREFIX}${String(dead)}-aaaaaa`,
      running: `${IMPORT_FOLDER_PREFIX}${String(process.ppid)}-bbbbbb`,
      oursBefore: `${IMPORT_FOLDER_PREFIX}${String(process.pid)}-cccccc`,
      oursNow: `${IMPORT_FOLDER_PREFIX}${String(process.pid)}-dddddd`,
      otherProgram: 'import-eeeeee',
      notOurs: `${IMPORT_FOLDER_PREFIX}x-ffffff`,
    };
    for (const name of Object.values(named)) {
      mkdirSync(join(root, name));
      writeFileSync(join(root, name, 'items.jsonl'), '{}\n');
    }
    const beforeStart = new Date(performance.timeOrigin - 3_600_000);
    utimesSync(join(root, named.oursBefore), beforeStart, beforeStart);

    const removed = await sweepStaleImports(root);
    expect(removed.sort()).toEqual([join(root, named.dead), join(root, named.oursBefore)].sort());
    expect(readdirSync(root).sort()).toEqual([named.running, named.oursNow, named.otherProgram, named.notOurs].sort());
  });
});
