// Following a job the service runs (GET /api/v1/jobs/{id}) until it ends, its `data.progress`
// moving a bar: a read-model rebuild (events folded, then the catch-up to the head) or a diff
// applied as a job (entries done).

import { InvalidArgumentError } from 'commander';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ApiClient } from './client.ts';
import type { Progress } from './output.ts';

export type JobRecord = {
  id: string;
  status: string;
  jobType?: string;
  data?: { progress?: Record<string, unknown>; result?: Record<string, unknown>; failure?: string };
};

/** `--interval <ms>` of the commands that follow a job. */
export function milliseconds(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('a whole number of milliseconds above 0');
  return n;
}

export const isEnded = (job: JobRecord): boolean => job.status === 'COMPLETED' || job.status === 'FAILED';

/** Reads the job every `intervalMs` until it is COMPLETED or FAILED. */
export async function followJob(client: ApiClient, jobId: string, intervalMs: number, bar: Progress): Promise<JobRecord> {
  bar.start(1, { label: 'queued', unit: '' });
  try {
    for (;;) {
      const { body: job }: { body: JobRecord } = await client.json<JobRecord>(`/api/v1/jobs/${jobId}`);
      if (isEnded(job)) {
        if (job.status === 'COMPLETED') bar.complete({ label: 'done' });
        return job;
      }
      showProgress(bar, job.data?.progress);
      await sleep(intervalMs);
    }
  } finally {
    bar.stop();
  }
}

/** [value, total, unit, label] of a job's progress, when it says how far it is. */
export function progressOf(progress: Record<string, unknown> | undefined): [number, number, string, string] | undefined {
  if (progress === undefined) return undefined;
  const phase = typeof progress.phase === 'string' ? progress.phase : 'apply';
  const [value, total, unit] =
    phase === 'catch-up'
      ? [Number(progress.position), Number(progress.head), 'position']
      : progress.done !== undefined
        ? [Number(progress.done), Number(progress.of), 'entries']
        : [Number(progress.folded), Number(progress.of), 'events'];
  if (!Number.isFinite(value) || !Number.isFinite(total) || total <= 0) return undefined;
  return [Math.min(value, total), total, unit, phase];
}

function showProgress(bar: Progress, progress: Record<string, unknown> | undefined): void {
  const at = progressOf(progress);
  if (at === undefined) return;
  const [value, total, unit, label] = at;
  bar.setTotal(total);
  bar.update(value, { label, unit });
}
