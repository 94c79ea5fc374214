// `admin indexes` lists the read models; `admin rebuild <index>` starts a blue/green recreate job
// (POST /api/v1/indexes/{name}/recreate) and follows the job (GET /api/v1/jobs/{id}) until it ends.

import type { Command } from 'commander';
import { contextOf } from '../context.ts';
import { followJob, milliseconds } from '../jobs.ts';
import { CliError, EXIT, cell, printJson, progressBar, table, writeOut } from '../output.ts';

type ReadModel = {
  name: string;
  state: string;
  documents: number;
  position: string;
  lag: number;
  lagMs: number;
  generation: number | null;
  building: number | null;
  jobId: string | null;
};

export function registerIndexes(program: Command): void {
  program
    .command('indexes')
    .description('The read models: state, documents, folded log position, lag, and the job rebuilding one')
    .addHelpText('after', "\nExamples:\n  admin indexes\n  admin indexes --json | jq '.[] | select(.lag > 0)'")
    .action(async (_options: unknown, command: Command) => {
      const { client, json } = contextOf(command);
      const { body } = await client.json<ReadModel[]>('/api/v1/indexes');
      if (json) {
        printJson(body);
        return;
      }
      const rows = body.map((m) => [
        m.name,
        m.state,
        String(m.documents),
        m.position,
        String(m.lag),
        `${String(Math.round(m.lagMs))} ms`,
        m.generation === null ? '-' : String(m.generation),
        m.jobId ?? '',
      ]);
      writeOut(table(['NAME', 'STATE', 'DOCUMENTS', 'POSITION', 'LAG', 'LAG TIME', 'GENERATION', 'JOB'], rows));
    });

  program
    .command('rebuild')
    .description(
      'Recreate a read model from the log as a job (the live one keeps serving until the new one swaps in) and follow it to its end',
    )
    .argument('<index>', "the read model's name, as `admin indexes` lists it")
    .option('--no-wait', 'print the job id and return at once')
    .option('--interval <ms>', 'how often to read the job', milliseconds, 500)
    .addHelpText(
      'after',
      '\nExits 0 when the job COMPLETED, 1 when it FAILED (with its reason).\n\nExamples:\n  admin rebuild user_groups\n  admin rebuild users --json',
    )
    .action(async (index: string, options: { wait: boolean; interval: number }, command: Command) => {
      const { client, json } = contextOf(command);
      const { body: ack } = await client.json<{ jobId: string }>(`/api/v1/indexes/${encodeURIComponent(index)}/recreate`, {
        method: 'POST',
      });
      if (!options.wait) {
        if (json) printJson(ack);
        else writeOut(`rebuild of ${index} started: job ${ack.jobId}`);
        return;
      }
      const job = await followJob(
        client,
        ack.jobId,
        options.interval,
        progressBar('{label} [{bar}] {percentage}% | {value}/{total} {unit}'),
      );
      if (json) printJson(job);
      if (job.status === 'FAILED')
        throw new CliError(`rebuild of ${index} failed (job ${job.id}): ${job.data?.failure ?? 'no reason given'}`, EXIT.failed);
      if (!json) {
        const result = job.data?.result ?? {};
        writeOut(
          table(
            ['JOB', 'STATUS', ...Object.keys(result).map((k) => k.toUpperCase())],
            [[job.id, job.status, ...Object.values(result).map((v) => cell(v, 40))]],
          ),
        );
      }
    });
}
