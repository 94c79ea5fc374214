// Records as a service stored them before a check refused their shape: for tests that a record
// already in the log still folds and is served, while new writes are refused.

import { randomUUID } from 'node:crypto';
import type { EventStore } from '../../domain/ports.ts';

/** The creation of `like` (made through the API) written again under a new id with `changes`, its
 * code reserved as the service reserves it: its id and the append's position. */
export async function storedBefore(
  events: EventStore,
  category: string,
  like: { id: string },
  changes: Record<string, unknown>,
): Promise<{ id: string; position: string }> {
  const [first] = await events.readStream(`${category}-${like.id}`);
  if (first === undefined) throw new Error(`no record ${like.id}`);
  const id = randomUUID();
  const data: Record<string, unknown> = { ...first.data, id, ...changes };
  const { position } = await events.append({
    stream: `${category}-${id}`,
    expected: 'no_stream',
    events: [{ ...first, id: randomUUID(), data }],
    claim: [{ scope: category, code: String(data.code) }],
  });
  return { id, position: String(position) };
}
