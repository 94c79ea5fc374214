// Pure rules of "delete old logs" beside the declarations in log.ts: how a deletion's filter reads
// as conditions on the logs' columns, and when a retry under one Idempotency-Key names the same
// deletion.

import { toQuery, type Condition, type FilterItem } from '../../../domain/shared/filtering.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { log, type DeletionFilter } from './log.ts';

/** A deletion's filter as conditions on the logs' columns (as the read store evaluates them). */
export const conditionsOf = (filter: FilterItem[]): readonly Condition[] =>
  toQuery({ filter, sort: [] }, log.columns, log.defaultSort).conditions;

/** Whether a recorded deletion was made with this filter (a retry of it, not another request). */
export const sameFilter = (a: JsonObject, f: DeletionFilter): boolean =>
  a.logTypeCode === f.logTypeCode && a.olderThan === f.olderThan && a.ownerType === f.ownerType && a.ownerId === f.ownerId;
