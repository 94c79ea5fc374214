// The client's failures in the port's terms: a conflict on the expected revision becomes
// WrongExpectedRevisionError, a server that is unreachable, slow, busy, not ready, changing leader
// or failing on its side becomes StoreUnavailableError (a 503; with Retry-After when the server
// said it is busy, not ready or unavailable, or a deadline passed), anything else stays as it was
// (a 500).
// Reads go through the client's Rust bridge and appends through gRPC-js on the batch-append path
// (every server since 21.10 advertises BatchAppend), which report the same failures differently:
// both are recognised here.

import {
  CancelledError,
  DeadlineExceededError,
  MaxAppendSizeExceededError,
  NotLeaderError,
  TimeoutError,
  UnavailableError,
  UnknownError,
  WrongExpectedVersionError,
  convertToCommandError,
  isCommandError,
  type AppendStreamState,
  type CurrentStreamState,
} from '@kurrent/kurrentdb-client';
import { WrongExpectedRevisionError, type AppendRequest } from '../../domain/ports.ts';
import { AppendTooLargeError, StoreUnavailableError } from '../../domain/shared/errors.ts';
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

/** What says "come back in a moment": the server's busy and not-ready answers (a read's gRPC
 * message through the Rust reader; on the batch-append path a BatchAppendResp error whose details
 * are a bare Empty, which the client makes `UnknownError('Could not recognize Server Is Busy')`),
 * a read the server timed out (gRPC Aborted, `Operation timed out`), and a passed deadline. */
const BUSY_MESSAGE = /Server Is (Too )?Busy|Server Is Not Ready|Operation timed out|deadline exceeded/i;

/** How long a caller is asked to wait after a busy or not-ready server or a passed deadline. */
export const RETRY_AFTER_SECONDS = 1;

function isTransient(e: Error, append: boolean): boolean {
  return (
    e instanceof UnavailableError ||
    e instanceof DeadlineExceededError ||
    e instanceof NotLeaderError ||
    e instanceof CancelledError ||
    e instanceof TimeoutError ||
    // An append's unknown outcome (Status.Unknown, an answer the client cannot read) may well have
    // committed: a 503, and the claims stay for the holder check, as after a timeout.
    (e instanceof UnknownError &&
      (append || Number(e.code) === GRPC_UNKNOWN || TRANSIENT_BRIDGE_MESSAGE.test(e.message) || BUSY_MESSAGE.test(e.message)))
  );
}

/** Whether the caller is asked to come back in a moment: the server said it is busy or not ready,
 * a deadline passed, the leader is changing, or the server is unavailable (the Rust reader reports
 * a busy or not-ready read as UnavailableError with no message, so the three cannot be told apart). */
const asksToWait = (e: Error): boolean =>
  e instanceof DeadlineExceededError ||
  e instanceof TimeoutError ||
  e instanceof UnavailableError ||
  e instanceof NotLeaderError ||
  BUSY_MESSAGE.test(e.message);

/** The 503 for a call this adapter stopped waiting for (see KurrentEventStore's deadline). */
export function pastDeadline(what: 'read' | 'append', ms: number): StoreUnavailableError {
  const cause = new DeadlineExceededError();
  cause.message = `no answer to the ${what} within ${String(ms)} ms`;
  return unavailable(cause);
}

/** The 503 for a transient failure, with Retry-After when the server asked to wait. */
export const unavailable = (cause: Error): StoreUnavailableError =>
  new StoreUnavailableError('EVENT_STORE', cause, asksToWait(cause) ? { retryAfterSeconds: RETRY_AFTER_SECONDS } : {});

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
 * rest as the client's own error (raw gRPC errors first converted to the client's classes).
 * `append`: the error is an append's, whose unknown outcome is transient too. */
export function translateError(
  error: unknown,
  request?: Pick<AppendRequest, 'stream' | 'expected'>,
  append = request !== undefined,
): Error {
  if (error instanceof StoreUnavailableError) return error;
  const e = error instanceof Error ? asCommandError(error) : new Error(String(error));
  const tooLarge = sizeRefusal(e);
  if (tooLarge !== undefined) return tooLarge;
  if (e instanceof WrongExpectedVersionError) {
    const stream = request?.stream ?? e.streamName;
    const expected = request?.expected ?? revisionOf(e.expectedState) ?? 'no_stream';
    return new WrongExpectedRevisionError(stream, expected, actualRevision(e.actualState));
  }
  return isTransient(e, append) ? unavailable(e) : e;
}

/** The server's refusal of an append over its limits: the whole append over MaxAppendSize (the
 * client's MaxAppendSizeExceededError), or one event over MaxAppendEventSize (25.1 and later), which
 * the client does not know and reports as `UnknownError('Could not recognize
 * MaximumAppendEventSizeExceeded')`, the numbers lost. */
function sizeRefusal(e: Error): AppendTooLargeError | undefined {
  if (e instanceof MaxAppendSizeExceededError) return new AppendTooLargeError(undefined, e.maxAppendSize, "KurrentDB's MaxAppendSize");
  if (e instanceof UnknownError && e.message.includes('MaximumAppendEventSizeExceeded'))
    return new AppendTooLargeError(undefined, undefined, "KurrentDB's MaxAppendEventSize");
  return undefined;
}

/** The conflict an append answered with `success: false` instead of throwing it (a connection
 * string with `throwOnAppendFailure=false`), as the client throws it otherwise, with the stream's
 * current revision as read (the answer's own is wrong on the batch-append path). */
export function refusedAppend(streamName: string, expected: AppendStreamState, current: CurrentStreamState): WrongExpectedVersionError {
  return new WrongExpectedVersionError(undefined, { streamName, expected, current });
}

/** Whether a failed append certainly wrote nothing: the server refused it. After a timeout or a
 * dropped connection it may have committed all the same, so its claims must stay: the claim check
 * finds out later from the holder's stream whether they hold. */
export function refusedForSure(failure: Error): boolean {
  return (
    failure instanceof WrongExpectedRevisionError ||
    failure instanceof AppendTooLargeError ||
    (isCommandError(failure) && !(failure instanceof UnknownError))
  );
}
