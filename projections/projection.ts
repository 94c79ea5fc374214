// A projection folds events of some stream categories into the documents of one read model. A
// document may be folded from one stream (a record: its stream revision guards replays) or from
// several (a job with its steps: the global log position guards them, multiStreamProjection).

import type { Document, DocumentWrite, Position, RecordedEvent } from '../domain/ports.ts';
import type { Query } from '../domain/shared/filtering.ts';

export type StoredDocument = { version: number; doc: Document | null; position?: Position };

/** What a document is after a write lands: folds of several events apply each onto this. */
export function storedOf(write: DocumentWrite): StoredDocument {
  const stored: StoredDocument = { version: write.version, doc: write.kind === 'upsert' ? write.doc : null };
  if (write.position !== undefined) stored.position = write.position;
  return stored;
}

export type Projection = {
  /** Read-model name: the checkpoint's key and what GET /api/v1/indexes lists. */
  readonly name: string;
  readonly collection: string;
  readonly categories: readonly string[];
  readonly indexedPaths: readonly string[];
  /** The indexed paths searched as text (LIKE, autocomplete), for ReadStore.ensureCollection's
   * `textPaths`; absent: every indexed path. */
  readonly textPaths?: readonly string[];
  /** The documents an event changes (none when the event is not this model's). */
  documentIds(event: RecordedEvent): readonly string[];
  /** Documents an event changes that no id names: those a query selects in the read model as it
   * stands just before the event (a deletion by filter). Each is then folded with `evolve`; the
   * live projector asks the read store, a rebuild evaluates the query in memory (matchQuery.ts),
   * so both select the same documents. */
  selectDocuments?(event: RecordedEvent): Query | undefined;
  /** Folds one event into one of its documents; may throw on bad data (the runner records the
   * event as skipped and goes on). */
  evolve(current: StoredDocument | undefined, event: RecordedEvent, id: string): DocumentWrite | undefined;
  /** The streams a document is folded from, for re-folding chosen documents (index refresh);
   * absent when they cannot be told from the document. */
  sourcesOf?(doc: Document): readonly string[];
};

/** A read model whose documents each fold events of several streams. Each write stores the log
 * position of its event, and an event at or below a document's stored position changes nothing:
 * a replayed batch (a crash before the checkpoint) is harmless though no single stream revision
 * describes the document. The stored version counts the document's writes. */
export function multiStreamProjection(spec: {
  name: string;
  collection?: string;
  categories: readonly string[];
  indexedPaths: readonly string[];
  textPaths?: readonly string[];
  documentIds(event: RecordedEvent): readonly string[];
  /** The document after the event (null: deleted; undefined: unchanged). */
  evolve(doc: Document | undefined, event: RecordedEvent, id: string): Document | null | undefined;
  sourcesOf?(doc: Document): readonly string[];
}): Projection {
  return {
    name: spec.name,
    collection: spec.collection ?? spec.name,
    categories: spec.categories,
    indexedPaths: spec.indexedPaths,
    ...(spec.textPaths === undefined ? {} : { textPaths: spec.textPaths }),
    documentIds: (event) => spec.documentIds(event),
    evolve(current, event, id) {
      if (current?.position !== undefined && event.position <= current.position) return undefined;
      const next = spec.evolve(current?.doc ?? undefined, event, id);
      if (next === undefined) return undefined;
      const version = (current?.version ?? -1) + 1;
      return next === null
        ? { kind: 'delete', id, version, position: event.position }
        : { kind: 'upsert', id, version, doc: next, position: event.position };
    },
    ...(spec.sourcesOf === undefined ? {} : { sourcesOf: (doc: Document) => spec.sourcesOf?.(doc) ?? [] }),
  };
}

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
  /** The physical collection serving a read model now (it moves with each rebuild); a 503
   * DomainError while the model has none (dropped and rebuilding). */
  collectionOf(name: string): string;
  waitFor(name: string, position: Position, timeoutMs: number): Promise<boolean>;
  statuses(): ReadModelStatus[];
};
