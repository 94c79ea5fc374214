// What the CLI writes: machine output (--json) or padded tables on stdout, progress bars and the
// one-line error on stderr. Progress bars only when stderr is a terminal, so `> file.json` and CI
// logs stay clean.

import { SingleBar, Presets } from 'cli-progress';

/** Exit codes by kind of failure: a script can tell a typo from a server that said no from a
 * server it could not reach. */
export const EXIT = {
  ok: 0,
  /** The command ran and reports a failure (a rebuild job FAILED, a file that is not an export). */
  failed: 1,
  usage: 2,
  /** The server answered with an error (4xx, 5xx). */
  server: 3,
  /** The server could not be reached (refused, DNS, reset). */
  network: 4,
} as const;

export class CliError extends Error {
  readonly exitCode: number;
  /** The HTTP status the server answered with, when it did. */
  readonly status: number | undefined;

  constructor(message: string, exitCode: number, status?: number) {
    super(message);
    this.exitCode = exitCode;
    this.status = status;
  }
}

export const writeOut = (text: string): void => {
  process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
};

export const writeErr = (text: string): void => {
  process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
};

export const printJson = (value: unknown): void => {
  writeOut(JSON.stringify(value, null, 2));
};

/** One cell: strings as they are, the rest as compact JSON, cut to `max` characters on one line. */
export function cell(value: unknown, max = 60): string {
  const text = value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  const line = text.replace(/\s+/g, ' ');
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** Rows as padded columns under a header; the last column is not padded. */
export function table(headers: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: readonly string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

export type Progress = {
  start(total: number, payload?: Record<string, string>): void;
  update(value: number, payload?: Record<string, string>): void;
  setTotal(total: number): void;
  /** Moves the bar to its end. */
  complete(payload?: Record<string, string>): void;
  stop(): void;
};

const silent: Progress = {
  start: () => undefined,
  update: () => undefined,
  setTotal: () => undefined,
  complete: () => undefined,
  stop: () => undefined,
};

/** A bar on stderr, or nothing when stderr is not a terminal. `{label}` is a payload field. */
export function progressBar(format = '{label} [{bar}] {percentage}% | {value}/{total}'): Progress {
  if (!process.stderr.isTTY) return silent;
  const bar = new SingleBar(
    { format, stream: process.stderr, hideCursor: true, clearOnComplete: false, etaBuffer: 50 },
    Presets.shades_classic,
  );
  let started = false;
  return {
    start: (total, payload = {}) => {
      bar.start(total, 0, { label: '', ...payload });
      started = true;
    },
    update: (value, payload = {}) => {
      if (started) bar.update(value, payload);
    },
    setTotal: (total) => {
      if (started) bar.setTotal(total);
    },
    complete: (payload = {}) => {
      if (started) bar.update(bar.getTotal(), payload);
    },
    stop: () => {
      if (started) bar.stop();
      started = false;
    },
  };
}
