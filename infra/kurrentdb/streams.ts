// Streams as the client names them: which streams a read of $all returns for a set of categories,
// and the port's expected and actual revisions in the client's terms (NO_STREAM, bigint).

import { NO_STREAM, streamNameFilter, type AppendStreamState, type CurrentStreamState, type Filter } from '@kurrent/kurrentdb-client';
import type { ExpectedRevision } from '../../domain/ports.ts';

/** Every stream but the server's (`$…`: $stats, $ce-…, $$metadata and the like). The adapter's own
 * events (claims and releases in the reservation streams, `<scope>Code-…`, which the embedded log
 * keeps in a table, and fences) are left out after the read (isAdapterEvent): by name alone a
 * record category ending in `Code` would go too. */
export const RECORD_STREAMS = '^(?![$])';

/** Server-side filter for readAll: the categories' streams (`<category>-…`: the dash keeps `user`
 * from matching `userGroup-…`), or every record stream when no category is given: both logs answer
 * the same. */
export function readAllFilter(categories: readonly string[] | undefined): Filter {
  if (categories === undefined) return streamNameFilter({ regex: RECORD_STREAMS });
  return streamNameFilter({ prefixes: categories.map((c) => `${c}-`) });
}

export function expectedState(expected: ExpectedRevision): AppendStreamState {
  return expected === 'no_stream' ? NO_STREAM : BigInt(expected);
}

export function actualRevision(state: CurrentStreamState): number | 'no_stream' {
  return state === NO_STREAM || state < 0n ? 'no_stream' : Number(state);
}

/** The port's expectation for the client's, when it has one (ANY and STREAM_EXISTS it has not). */
export function revisionOf(state: AppendStreamState): ExpectedRevision | undefined {
  if (typeof state === 'bigint') return state < 0n ? 'no_stream' : Number(state);
  return state === NO_STREAM ? 'no_stream' : undefined;
}
