// `admin replay`'s fold: the audit feed's events up to a time, folded per stream with the
// resources' own evolve (domain/resource/decider.ts), the code GET ?asOf= folds with
// (domain/resource/service.ts stateAt): an event counts when its `at` is at or before the time.

import { deletedBy, deletionOf, log, logDeletion } from '../modules/logs/domain/log.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { evolve, initialState, type RecordState, type ResourceRecord } from '../domain/resource/decider.ts';
import { shown } from '../domain/resource/service.ts';
import { toQuery, type FilterItem } from '../domain/shared/filtering.ts';
import { categoryOf } from '../domain/shared/streams.ts';

/** One event of GET /api/v1/audit/events (API.md "Audit feed"). */
export type FeedEvent = {
  position: string | number;
  stream: string;
  version: number;
  type: string;
  at: string;
  actor: string;
  data: Record<string, unknown>;
  schemaVersion?: number;
};

export type Replayed = { resource: ResourceDefinition; records: ResourceRecord[] };

/** Folds events as they come; `records()` gives the live records of each resource at the time. */
export class Replay {
  readonly #until: number;
  readonly #byCategory: ReadonlyMap<string, ResourceDefinition>;
  readonly #states = new Map<string, { def: ResourceDefinition; state: RecordState; position: bigint }>();
  #folded = 0;

  constructor(resources: readonly ResourceDefinition[], until: Date) {
    this.#until = until.getTime();
    this.#byCategory = new Map(resources.map((r) => [r.category, r]));
  }

  get folded(): number {
    return this.#folded;
  }

  /** Events must come in log order (the feed's). Events after the time, or of streams that are
   * not the chosen resources' records, are passed over. */
  add(event: FeedEvent): void {
    if (Date.parse(event.at) > this.#until) return;
    if (event.type === logDeletion.createdEvent) this.#deleteLogs(event);
    const def = this.#byCategory.get(categoryOf(event.stream));
    if (def === undefined) return;
    const current = this.#states.get(event.stream) ?? { def, state: initialState() };
    const state = evolve(def, current.state, {
      type: event.type,
      data: event.data,
      revision: event.version,
      metadata: { actor: event.actor, at: event.at },
      ...(event.schemaVersion === undefined ? {} : { schemaVersion: event.schemaVersion }),
    });
    this.#states.set(event.stream, { def, state, position: BigInt(event.position) });
    this.#folded++;
  }

  /** A "delete old logs" by then: the logs it removed (as GET /logs/{id}?asOf= answers them) are gone. */
  #deleteLogs(event: FeedEvent): void {
    const deletion = deletionOf(
      event.data,
      (filter: FilterItem[]) => toQuery({ filter, sort: [] }, log.columns, log.defaultSort).conditions,
    );
    if (deletion === undefined) return;
    for (const [stream, { def, state, position }] of this.#states) {
      if (def === log && state.status === 'active' && deletedBy(deletion, shown(def, state), position)) this.#states.delete(stream);
    }
  }

  /** The records live at the time, per resource, ordered by code then id. */
  records(): Replayed[] {
    const out = new Map<ResourceDefinition, ResourceRecord[]>([...this.#byCategory.values()].map((r) => [r, []]));
    for (const { def, state } of this.#states.values()) {
      if (state.status === 'active') out.get(def)?.push(shown(def, state));
    }
    return [...out].map(([resource, records]) => ({ resource, records: records.sort(byCodeThenId) }));
  }
}

function byCodeThenId(a: ResourceRecord, b: ResourceRecord): number {
  const ca = typeof a.code === 'string' ? a.code : '';
  const cb = typeof b.code === 'string' ? b.code : '';
  if (ca !== cb) return ca < cb ? -1 : 1;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}
