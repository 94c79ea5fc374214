// The logs' read model: one document per live log, as resourceProjection folds it, plus the
// deletions ("delete old logs"): a LogDeletionCreated event selects the logs matching its filter
// (selectDocuments) and deletes those last written at or before the position it was decided at.
// Each write stores the log position of its event, which is what that check reads. Folded live or
// rebuilt from the log, the same logs are deleted; after the retention pass removed the deleted
// logs' events, a rebuild never makes them, and the deletion selects nothing: the same documents.

import type { Position } from '../../../domain/ports.ts';
import { deletionOf, log, logDeletion } from '../domain/log.ts';
import { toQuery } from '../../../domain/shared/filtering.ts';
import type { Projection } from '../../../projections/projection.ts';
import { resourceProjection } from '../../../projections/resourceProjection.ts';

const DELETION_EVENT = logDeletion.createdEvent;

const conditionsOf = (filter: Parameters<typeof toQuery>[0]['filter']) =>
  toQuery({ filter, sort: [] }, log.columns, log.defaultSort).conditions;

export function logsProjection(): Projection {
  const base = resourceProjection(log);
  return {
    ...base,
    categories: [log.category, logDeletion.category],
    selectDocuments(event) {
      if (event.type !== DELETION_EVENT) return undefined;
      const deletion = deletionOf(event.data, conditionsOf);
      if (deletion === undefined) throw new Error(`${DELETION_EVENT} without its filter`);
      return { conditions: deletion.conditions, sort: [] };
    },
    evolve(current, event, id) {
      if (event.type === DELETION_EVENT) {
        const upTo = BigInt(String(event.data.upTo));
        // A document written without a position (none here) counts as written before any deletion.
        const last: Position = current?.position ?? 0n;
        if (current?.doc == null || last > upTo) return undefined;
        // Above the log's own revision, so that no later event of its stream brings it back.
        return { kind: 'delete', id, version: current.version + 1, position: event.position };
      }
      // A deleted log stays deleted.
      if (current?.doc === null) return undefined;
      const write = base.evolve(current, event, id);
      return write === undefined ? undefined : { ...write, position: event.position };
    },
  };
}
