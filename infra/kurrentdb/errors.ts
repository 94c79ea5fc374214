// The client's failures in the port's terms: a conflict on the expected revision becomes
// WrongExpectedRevisionError, a server that is unreachable, slow, changing leader or failing on its
// side (gRPC Unavailable, Internal, DataLoss, Unknown, Cancelled, DeadlineExceeded) becomes
// StoreUnavailableError (a 503), anything else stays as it was (a 500). Reads go through the
// client's Rust bridge and appends through gRPC-js, which report the same failures differently:
// both are recognised here.

import {
  CancelledError,
  DeadlineExceededError,
  NotLeaderError,
  TimeoutError,
  UnavailableError,
  UnknownError,
  WrongExpectedVersionError,
  convertToCommandError,
  isCommandError,
  type AppendResult as ClientAppendResult,
  type AppendStreamState,
} from '@kurrent/kurrentdb-client';
import { WrongExpectedRevisionError, type AppendRequest } from '../../domain/ports.ts';
import { StoreUnavailableError } from '../../domain/shared/errors.ts';
import { actualRevision, revisionOf } from './streams.ts';

/** What the Rust reader (KurrentDB-Client-Rust's `Error`, passed on by the bridge as UnknownError
 * with its Display text) says when the server is unavailable, slow or failing on its side:
 * - `Server-side error: …`: `Error::ServerError`, which the Rust client makes of gRPC Unavailable,
 *   Internal, DataLoss and Unknown (`status: Unavailable, message: "…", details: …` with tonic up
 *   to 0.13, `code: 'The service is currently unavailable', message: "…"` after);
 * - `Unmapped gRPC error: code: The operation was cancelled, …`: `Error::Grpc` for a cancelled call
 *   (a code is printed as its description);
 * - `Deadline exceeded`, `Connection is closed.`, `gRPC connection error: …` (no node to talk to). */
const TRANSIENT_BRIDGE_MESSAGE =
  /^Server-side error: |^Unmapped gRPC error: code: '?(The operation was cancelled|Cancelled|The service is currently unavailable|Unavailable)\b|deadline exceeded|connection (is )?closed|^gRPC connection error: /i;

/** gRPC's UNKNOWN, which gRPC-js (appends) leaves as UnknownError where the Rust reader makes it a
 * server-side error; INTERNAL and DATA_LOSS the client already turns into UnavailableError. */
const GRPC_UNKNOWN = 2;

function isTransient(e: Error): boolean {
  return (
    e instanceof UnavailableError ||
    e instanceof DeadlineExceededError ||
    e instanceof NotLeaderError ||
    e instanceof CancelledError ||
    e instanceof TimeoutError ||
    (e instanceof UnknownError && (Number(e.code) === GRPC_UNKNOWN || TRANSIENT_BRIDGE_MESSAGE.test(e.message)))
  );
}

/** The client's conversion of raw gRPC errors, which assumes a gRPC error's shape (`details`) once
 * it sees a numeric `code`: anything else it chokes on stays as it was. */
function asCommandError(error: Error): Error {
  try {
    return convertToCommandError(error);
  } catch {
    return error;
  }
}

/** The port's error for a client error: WrongExpectedVersion → WrongExpectedRevisionError (for the
 * request's stream and expectation when given), transient failures → StoreUnavailableError, the
 * rest as the client's own error (raw gRPC errors first converted to the client's classes). */
export function translateError(error: unknown, request?: Pick<AppendRequest, 'stream' | 'expected'>): Error {
  const e = error instanceof Error ? asCommandError(error) : new Error(String(error));
  if (e instanceof WrongExpectedVersionError) {
    const stream = request?.stream ?? e.streamName;
    const expected = request?.expected ?? revisionOf(e.expectedState) ?? 'no_stream';
    return new WrongExpectedRevisionError(stream, expected, actualRevision(e.actualState));
  }
  return isTransient(e) ? new StoreUnavailableError('EVENT_STORE', e) : e;
}

/** The conflict an append answered with `success: false` instead of throwing it (a connection
 * string with `throwOnAppendFailure=false`), as the client throws it otherwise. */
export function refusedAppend(streamName: string, expected: AppendStreamState, written: ClientAppendResult): WrongExpectedVersionError {
  const current = written.nextExpectedRevision < 0n ? 'no_stream' : written.nextExpectedRevision;
  return new WrongExpectedVersionError(undefined, { streamName, expected, current });
}

/** Whether a failed append certainly wrote nothing: the server refused it. After a timeout or a
 * dropped connection it may have committed all the same, so its claims must stay: the claim check
 * finds out later from the holder's stream whether they hold. */
export function refusedForSure(failure: Error): boolean {
  return failure instanceof WrongExpectedRevisionError || (isCommandError(failure) && !(failure instanceof UnknownError));
}
