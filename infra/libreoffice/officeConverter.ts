// Office formats through LibreOffice: one long-running headless soffice, driven over UNO by a small
// Python bridge (bridge.py, in Debian's python3 where python3-uno's `uno` loads) that converts a
// document per request, instead of a cold `soffice --convert-to` per document. The same discipline
// as the PDF renderer: a bounded queue (503 with Retry-After), a time limit per document (the
// processes killed and started again), and a restart after N documents. Its profile points every
// network access at a proxy that does not exist and blocks links from untrusted documents; the
// HTML it imports has had every loading reference removed (offlineHtml.ts).

import { type ChildProcess, type ChildProcessWithoutNullStreams, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { accessSync, constants, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { rendererUnavailable, renderTimedOut } from '../../modules/documents/domain/documents.ts';
import { redateZip } from '../../modules/documents/domain/fileTemplates.ts';
import type { OfficeConverter, OfficeFormat, OfficeInput, Paper, TemplateCaller } from '../../domain/ports.ts';
import { DomainError } from '../../domain/shared/errors.ts';
import { callerShares, RenderQueue, shareKeyOf, withTimeout } from '../renderQueue.ts';
import { offlineHtml } from './offlineHtml.ts';

export const OFFICE_INSTALL_HINT =
  'install LibreOffice (Debian: apt-get install libreoffice-writer-nogui libreoffice-calc-nogui python3-uno) or set SOFFICE_PATH';

export type LibreOffice = { soffice: string; python: string };

const BRIDGE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bridge.py');

/** soffice (SOFFICE_PATH, else on PATH or where Debian puts it) and a python3 that loads `uno`
 * (Debian's own first: a pyenv one earlier on PATH has no python3-uno); undefined when either is missing. */
export function findLibreOffice(configured?: string): LibreOffice | undefined {
  const candidates =
    configured !== undefined
      ? [configured]
      : [...onPath('soffice'), '/usr/bin/soffice', '/usr/lib/libreoffice/program/soffice', '/opt/libreoffice/program/soffice'];
  const soffice = candidates.find((c) => isExecutable(c));
  if (soffice === undefined) return undefined;
  const python = ['/usr/bin/python3', ...onPath('python3')].find(
    (p) => isExecutable(p) && spawnSync(p, ['-c', 'import uno'], { stdio: 'ignore', timeout: 10_000 }).status === 0,
  );
  return python === undefined ? undefined : { soffice, python };
}

function onPath(name: string): string[] {
  return (process.env.PATH ?? '')
    .split(path.delimiter)
    .filter((d) => d !== '')
    .map((d) => path.join(d, name));
}
function isExecutable(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

const IMPORT_FILTERS: Readonly<Record<OfficeInput, { extension: string; filter?: string; calc: boolean }>> = {
  'html-text': { extension: 'html', filter: 'HTML (StarWriter)', calc: false },
  'html-table': { extension: 'html', filter: 'HTML (StarCalc)', calc: true },
  docx: { extension: 'docx', calc: false },
  odt: { extension: 'odt', calc: false },
  xlsx: { extension: 'xlsx', calc: true },
  ods: { extension: 'ods', calc: true },
};
/** Formats that are zips, whose parts LibreOffice dates with the time of writing. */
const ZIPPED: ReadonlySet<OfficeFormat> = new Set(['docx', 'odt', 'xlsx', 'ods']);
const WRITER_FILTERS: Partial<Record<OfficeFormat, string>> = {
  docx: 'MS Word 2007 XML',
  doc: 'MS Word 97',
  odt: 'writer8',
  pdf: 'writer_pdf_Export',
};
const CALC_FILTERS: Partial<Record<OfficeFormat, string>> = {
  xlsx: 'Calc MS Excel 2007 XML',
  xls: 'MS Excel 97',
  ods: 'calc8',
  pdf: 'calc_pdf_Export',
};

/** The profile's settings: every connection through a proxy on a closed port (loopback too), links
 * from untrusted documents blocked, macros off, no update checks. */
const PROFILE = `<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
${[
  ['/org.openoffice.Inet/Settings', 'ooInetProxyType', '1'],
  ['/org.openoffice.Inet/Settings', 'ooInetNoProxy', ''],
  ...['HTTP', 'HTTPS', 'FTP'].flatMap((p) => [
    ['/org.openoffice.Inet/Settings', `ooInet${p}ProxyName`, '127.0.0.1'],
    ['/org.openoffice.Inet/Settings', `ooInet${p}ProxyPort`, '9'],
  ]),
  ['/org.openoffice.Office.Common/Security/Scripting', 'BlockUntrustedRefererLinks', 'true'],
  ['/org.openoffice.Office.Common/Security/Scripting', 'MacroSecurityLevel', '3'],
  ['/org.openoffice.Office.Common/Security/Scripting', 'DisableMacrosExecution', 'true'],
  ['/org.openoffice.Office.Common/Misc', 'UseOpenCL', 'false'],
  ["/org.openoffice.Office.Jobs/Jobs/org.openoffice.Office.Jobs:Job['UpdateCheck']/Arguments", 'AutoCheckEnabled', 'false'],
]
  .map(
    ([item, name, value]) =>
      `<item oor:path="${item ?? ''}"><prop oor:name="${name ?? ''}" oor:op="fuse"><value>${value ?? ''}</value></prop></item>`,
  )
  .join('\n')}
</oor:items>
`;

type Answer = { ok?: boolean; error?: string; crashed?: string };
type Running = {
  soffice: ChildProcess;
  bridge: ChildProcessWithoutNullStreams;
  pending: Map<number, (answer: Answer) => void>;
  documents: number;
};

export type LibreOfficeOptions = {
  /** SOFFICE_PATH, else found (findLibreOffice). */
  sofficePath?: string | undefined;
  queueLimit?: number;
  timeoutMs?: number;
  recycleAfter?: number;
  /** Conversions one caller may have waiting or running (default 2; 429 beyond): one caller's
   * documents that run to the time limit hold the one process for that many of them at most. */
  jobsPerCaller?: number;
  logger?: { info: (obj: object, msg: string) => void; warn: (obj: object, msg: string) => void };
  /** Cleans HTML before LibreOffice imports it, as the conversion's caller's work; default
   * offlineHtml on this thread (the service runs it in a template worker: parse5 over a large text
   * takes seconds). */
  offlineHtml?: (html: string, caller: TemplateCaller | undefined) => Promise<string>;
};

export class LibreOfficeConverter implements OfficeConverter {
  readonly #options: Required<Pick<LibreOfficeOptions, 'queueLimit' | 'timeoutMs' | 'recycleAfter' | 'jobsPerCaller'>> & LibreOfficeOptions;
  /** One document at a time: one soffice renders one document at a time anyway. */
  readonly #queue: RenderQueue;
  readonly #work = mkdtempSync(path.join(tmpdir(), 'admin-office-'));
  #running: Promise<Running> | undefined;
  #next = 0;
  #closed = false;
  starts = 0;

  constructor(options: LibreOfficeOptions = {}) {
    this.#options = { queueLimit: 32, timeoutMs: 30_000, recycleAfter: 200, jobsPerCaller: 2, ...options };
    this.#queue = new RenderQueue({
      slots: 1,
      queueLimit: this.#options.queueLimit,
      what: 'office',
      shares: callerShares('office', this.#options.jobsPerCaller),
    });
  }

  async convert(
    input: Uint8Array,
    from: OfficeInput,
    to: OfficeFormat,
    options: { date?: Date; paper?: Paper; caller?: TemplateCaller } = {},
  ): Promise<Uint8Array> {
    const source = IMPORT_FILTERS[from];
    const filter = (source.calc ? CALC_FILTERS : WRITER_FILTERS)[to];
    if (filter === undefined) {
      throw new DomainError(
        'FORMATTER.FORMAT_NOT_AVAILABLE',
        `A ${source.calc ? 'spreadsheet' : 'text document'} cannot be made into ${to}`,
      );
    }
    const clean = this.#options.offlineHtml ?? ((html: string) => Promise.resolve(offlineHtml(html)));
    const bytes = from.startsWith('html') ? new TextEncoder().encode(await clean(new TextDecoder().decode(input), options.caller)) : input;
    return this.#queue.run(() => this.#convert(bytes, source, filter, to, options), shareKeyOf(options.caller));
  }

  async #convert(
    bytes: Uint8Array,
    source: { extension: string; filter?: string },
    filter: string,
    to: OfficeFormat,
    options: { date?: Date; paper?: Paper },
  ): Promise<Uint8Array> {
    const { date, paper } = options;
    const id = ++this.#next;
    const input = path.join(this.#work, `in-${String(id)}.${source.extension}`);
    const output = path.join(this.#work, `out-${String(id)}.${to}`);
    await writeFile(input, bytes);
    try {
      const running = await this.#process();
      running.documents += 1;
      const request = {
        id,
        input,
        output,
        filter_in: source.filter,
        filter_out: filter,
        date: date?.toISOString(),
        name: `document.${to}`,
        // Page sizes in 1/100 mm, portrait (LibreOffice swaps them for landscape).
        paper:
          paper === undefined
            ? undefined
            : { width: Math.round(paper.widthMm * 100), height: Math.round(paper.heightMm * 100), landscape: paper.landscape },
      };
      const answer = await withTimeout(this.#ask(running, request), this.#options.timeoutMs, () => {
        this.#stop('timed out');
        return renderTimedOut('office', this.#options.timeoutMs);
      });
      if (answer.crashed !== undefined) {
        this.#stop(`crashed: ${answer.crashed}`);
        throw new DomainError(
          'FORMATTER.RENDERER_CRASHED',
          `The office renderer stopped during this document (${answer.crashed}); it starts again with the next one`,
          [],
          { retryAfterSeconds: 1 },
        );
      }
      if (answer.error !== undefined) {
        // LibreOffice's own words name its internals: logged, not answered.
        this.#options.logger?.warn({ detail: answer.error.slice(0, 500) }, 'office conversion failed');
        throw new DomainError('FORMATTER.CONVERSION_FAILED', 'LibreOffice could not convert this document');
      }
      if (running.documents >= this.#options.recycleAfter) this.#stop('recycled');
      const converted = new Uint8Array(await readFile(output));
      return date !== undefined && ZIPPED.has(to) ? redateZip(converted, date) : converted;
    } finally {
      await Promise.all([rm(input, { force: true }), rm(output, { force: true })]);
    }
  }

  #ask(running: Running, request: Record<string, unknown>): Promise<Answer> {
    return new Promise((resolve) => {
      running.pending.set(request.id as number, resolve);
      running.bridge.stdin.write(`${JSON.stringify(request)}\n`);
    });
  }

  async #process(): Promise<Running> {
    if (this.#closed) throw rendererUnavailable('office', 'the service is shutting down');
    this.#running ??= this.#start().catch((error: unknown) => {
      this.#running = undefined;
      throw error;
    });
    return this.#running;
  }

  async #start(): Promise<Running> {
    const found = findLibreOffice(this.#options.sofficePath);
    if (found === undefined) throw rendererUnavailable('office', OFFICE_INSTALL_HINT);
    // A fresh profile and temporary folder for each start, the last one's removed: a killed soffice
    // leaves its lock files and temporary files behind.
    const profile = path.join(this.#work, 'profile');
    const temporary = path.join(this.#work, 'tmp');
    rmSync(profile, { recursive: true, force: true });
    rmSync(temporary, { recursive: true, force: true });
    mkdirSync(path.join(profile, 'user'), { recursive: true });
    mkdirSync(temporary, { recursive: true });
    writeFileSync(path.join(profile, 'user', 'registrymodifications.xcu'), PROFILE);
    const pipe = `admin-office-${randomUUID()}`;
    const soffice = spawn(
      found.soffice,
      [
        '--headless',
        '--invisible',
        '--nologo',
        '--norestore',
        '--nodefault',
        '--nolockcheck',
        '--nofirststartwizard',
        `-env:UserInstallation=file://${profile}`,
        `--accept=pipe,name=${pipe};urp;StarOffice.ComponentContext`,
      ],
      // LIBO_ONEWAY_STABLE_ODF_EXPORT: ODF written without its random session ids, so the same input
      // gives the same bytes.
      {
        stdio: 'ignore',
        env: { ...process.env, TZ: 'UTC', SAL_USE_VCLPLUGIN: 'svp', TMPDIR: temporary, LIBO_ONEWAY_STABLE_ODF_EXPORT: '1' },
        detached: true,
      },
    );
    const bridge = spawn(found.python, [BRIDGE, pipe], { env: { ...process.env, TMPDIR: temporary } });
    const running: Running = { soffice, bridge, pending: new Map(), documents: 0 };
    const lines = createInterface({ input: bridge.stdout });
    let stderr = '';
    bridge.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    const ready = new Promise<void>((resolve, reject) => {
      lines.on('line', (line) => {
        const message = JSON.parse(line) as { ready?: boolean; id?: number; ok?: boolean; error?: string };
        if (message.ready === true) resolve();
        else if (message.id !== undefined) {
          running.pending.get(message.id)?.(message);
          running.pending.delete(message.id);
        }
      });
      const gone = (what: string) => () => {
        reject(new Error(`${what} exited: ${stderr.trim().split('\n').at(-1) ?? ''}`));
        for (const answer of running.pending.values()) answer({ crashed: `${what} exited` });
        running.pending.clear();
        void this.#running?.then((r) => {
          if (r === running) this.#stop(`${what} exited`);
        });
      };
      bridge.on('exit', gone('the UNO bridge'));
      soffice.on('exit', gone('soffice'));
    });
    this.starts += 1;
    try {
      await withTimeout(ready, 60_000, () => new Error('LibreOffice did not start within 60 s'));
    } catch (error) {
      kill(running);
      throw rendererUnavailable(
        'office',
        `LibreOffice at ${found.soffice} did not start (${error instanceof Error ? error.message : String(error)}); ${OFFICE_INSTALL_HINT}`,
      );
    }
    this.#options.logger?.info({ soffice: found.soffice, python: found.python }, 'office renderer started');
    return running;
  }

  /** The processes go; the next document starts fresh ones. */
  #stop(reason: string): void {
    const running = this.#running;
    this.#running = undefined;
    void running?.then(
      (r) => {
        if (reason !== 'recycled') this.#options.logger?.warn({ reason, documents: r.documents }, 'office renderer restarted');
        kill(r);
      },
      () => undefined,
    );
  }

  /** The soffice process in use, if one runs (for tests that crash it). */
  async processId(): Promise<number | undefined> {
    return (await this.#running?.catch(() => undefined))?.soffice.pid;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const running = await this.#running?.catch(() => undefined);
    this.#running = undefined;
    if (running !== undefined) kill(running);
    rmSync(this.#work, { recursive: true, force: true });
  }
}

function kill(running: Running): void {
  running.bridge.stdin.end();
  running.bridge.kill('SIGKILL');
  // soffice runs in its own process group (detached): its children (oosplash, soffice.bin) go too.
  try {
    if (running.soffice.pid !== undefined) process.kill(-running.soffice.pid, 'SIGKILL');
  } catch {
    running.soffice.kill('SIGKILL');
  }
}
