#!/usr/bin/env node
// The administration CLI: a thin client of the REST API (API.md). `npx admin --help`, or
// `npm run cli -- --help`. Base URL and token from --url/--token or ADMIN_URL/ADMIN_TOKEN.

import { Command, CommanderError, Option } from 'commander';
import { registerAudit } from './commands/audit.ts';
import { registerExchange } from './commands/exchange.ts';
import { registerHistory } from './commands/history.ts';
import { registerIndexes } from './commands/indexes.ts';
import { CliError, EXIT, writeErr } from './output.ts';

/** Commander's messages as one `admin: …` line. */
const oneLine = (text: string): string =>
  `admin: ${text
    .replace(/^error: /, '')
    .trim()
    .replace(/\s*\n\s*/g, ' ')}\n`;

export function buildProgram(): Command {
  const program = new Command('admin')
    .description('Administration of the telecom admin service over its REST API')
    .addOption(new Option('--url <url>', 'base URL of the service').env('ADMIN_URL').default('http://127.0.0.1:8080'))
    .addOption(
      new Option(
        '--token <token>',
        'bearer token (`npm run token` prints one; docs/operations.md, The CLI, says which role each command needs)',
      ).env('ADMIN_TOKEN'),
    )
    .option('--json', 'machine output: JSON on stdout instead of tables')
    .configureHelp({ showGlobalOptions: true })
    .showSuggestionAfterError()
    .exitOverride()
    .configureOutput({
      outputError: (text, write) => {
        write(oneLine(text));
      },
    })
    .addHelpText(
      'after',
      `
Exit codes: ${String(EXIT.ok)} ok, ${String(EXIT.failed)} the command failed (a rebuild job FAILED, an unreadable file), ` +
        `${String(EXIT.usage)} usage, ${String(EXIT.server)} the server answered with an error, ${String(EXIT.network)} the server could not be reached.`,
    );
  registerHistory(program);
  registerIndexes(program);
  registerExchange(program);
  registerAudit(program);
  for (const command of program.commands) {
    command.exitOverride().configureOutput({
      outputError: (text, write) => {
        write(oneLine(text));
      },
    });
  }
  return program;
}

export async function main(argv: readonly string[]): Promise<number> {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    // `admin … | head`: the reader has gone, which is not a failure.
    if (error.code === 'EPIPE') process.exit(EXIT.ok);
  });
  try {
    await buildProgram().parseAsync([...argv], { from: 'user' });
    return EXIT.ok;
  } catch (error) {
    if (error instanceof CommanderError) {
      // Commander has written its message (or the help) already.
      return error.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    if (error instanceof CliError) {
      writeErr(`admin: ${error.message}`);
      return error.exitCode;
    }
    writeErr(`admin: ${error instanceof Error ? error.message : String(error)}`);
    return EXIT.failed;
  }
}

process.exitCode = await main(process.argv.slice(2));
