// How a read of a read model waits for a write: `?minPosition=` (an X-Event-Position a client
// got), `?immediatelyRefresh=true` on writes, and the lookups that must see the log's head.

import { z } from 'zod';
import type { Position } from '../domain/ports.ts';
import { unavailable, validationFailed } from '../domain/shared/errors.ts';
import { traced } from '../workers/tracing.ts';
import type { AppDeps } from './module.ts';

const MIN_POSITION_WAIT_MS = 5000;

/** An `X-Event-Position` as a client got it: opaque decimal digits (KurrentDB's packed positions
 * run to 39 digits). */
export const position = z
  .string()
  .regex(/^\d{1,40}$/, { error: 'expected a log position (the decimal digits of an X-Event-Position)' })
  .meta({ description: 'an X-Event-Position from an earlier write: opaque decimal digits, at most 40' });
/** Waits (bounded) until a read model reflects a position; 503 READ_MODEL.LAGGING after. */
export async function waitForReadModelAt(
  deps: Pick<AppDeps, 'eventStore' | 'readModels'>,
  readModel: string,
  at: Position | undefined,
): Promise<void> {
  if (at === undefined) return;
  const attributes = { 'read_model.name': readModel, 'read_model.position': at.toString() };
  const ok = await traced('readModel.wait', attributes, async (span) => {
    const reached = await deps.readModels.waitFor(readModel, at, MIN_POSITION_WAIT_MS);
    span.setAttribute('read_model.reached', reached);
    return reached;
  });
  if (!ok) throw unavailable('READ_MODEL.LAGGING', `Read model ${readModel} did not reach position ${at.toString()} in time`);
}

/** `?minPosition=`: wait (bounded) until the read model reflects that write. A position the log
 * has not reached was never handed out: no wait can end, so it is refused at once. */
export async function catchUpTo(
  deps: Pick<AppDeps, 'eventStore' | 'readModels'>,
  readModel: string,
  minPosition: string | undefined,
): Promise<void> {
  if (minPosition === undefined) return;
  const at = BigInt(minPosition);
  // Reached already (the usual case): no need to ask the log for its head.
  if (await deps.readModels.waitFor(readModel, at, 0)) return;
  if (at > (await deps.eventStore.headPosition())) {
    throw validationFailed('minPosition is ahead of the log', [
      `query.minPosition: ${minPosition} is past the newest write; use the X-Event-Position of a write`,
    ]);
  }
  await waitForReadModelAt(deps, readModel, at);
}
