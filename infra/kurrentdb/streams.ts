// Streams as the client names them: which streams a read of $all returns for a set of categories,
// and the port's expected and actual revisions in the client's terms (NO_STREAM, bigint).

import { NO_STREAM, streamNameFilter, type AppendStreamState, type CurrentStreamState, type Filter } from '@kurrent/kurrentdb-client';
import type { ExpectedRevision } from '../../domain/ports.ts';

/** Every stream but the server's own (`$…`: $stats, $ce-…, $$metadata and the like). */
export const NON_SYSTEM_STREAMS = '^[^$]';

/** Server-side filter for readAll: the categories' streams (`<category>-…`: the dash keeps `user`
 * from matching `userGroup-…`), or every non-system stream when no category is given. Reservation
 * streams are ordinary streams of the `<scope>Code` categories: they are part of the log's history
 * and come back only when asked for (or unfiltered). */
export function readAllFilter(categories: readonly string[] | undefined): Filter {
  if (categories === undefined) return streamNameFilter({ regex: NON_SYSTEM_STREAMS });
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
