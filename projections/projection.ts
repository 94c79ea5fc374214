// A projection folds events of some stream categories into the documents of one read model.

import type { Document, DocumentWrite, Position, RecordedEvent } from '../domain/ports.ts';

export type StoredDocument = { version: number; doc: Document | null };

export type Projection = {
  /** Read-model name: the checkpoint's key and what GET /api/v1/indexes lists. */
  readonly name: string;
  readonly collection: string;
  readonly categories: readonly string[];
  readonly indexedPaths: readonly string[];
  /** The indexed paths searched as text (LIKE, autocomplete), for ReadStore.ensureCollection's
   * `textPaths`; absent: every indexed path. */
  readonly textPaths?: readonly string[];
  /** The document id an event belongs to, or undefined when the event is not this model's. */
  documentId(event: RecordedEvent): string | undefined;
  /** Folds one event into the stored document; never throws on bad data (the runner records it). */
  evolve(current: StoredDocument | undefined, event: RecordedEvent): DocumentWrite | undefined;
};

export type ReadModelStatus = {
  name: string;
  collection: string;
  /** True when this instance holds the lease and writes the model; false when it stands by. */
  active: boolean;
  position: string;
  /** How far the log's head is ahead of the model (EventStore.distance: events in the embedded
   * log, bytes in KurrentDB); 0 when caught up. */
  lag: number;
  lagMs: number;
  failures: { position: string; stream: string; type: string; error: string; at: string }[];
};

/** What readers need of the projectors: waiting for a position, and their status. */
export type ReadModels = {
  waitFor(collection: string, position: Position, timeoutMs: number): Promise<boolean>;
  statuses(): ReadModelStatus[];
};
