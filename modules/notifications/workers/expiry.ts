// The expiry of notifications: PLAN or SENT notifications whose expirationDate has passed become
// EXPIRED.

import { notification, type ChangeState } from '../domain/notification.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import { toQuery, type FilterItem } from '../../../domain/shared/filtering.ts';
import type { ModuleContext } from '../../../api/module.ts';
import { dueInReadModel, type Schedule } from '../../../workers/scheduler.ts';

/** The actor of the service's own moves of notifications (expiry). */
export const NOTIFICATION_EXPIRY_ACTOR = 'system:notification-expiry';

/** PLAN or SENT notifications whose expirationDate has passed become EXPIRED: due work read from
 * the read model at every tick, so it survives restarts and runs once across instances. */
export function expirySchedule(ctx: ModuleContext): Schedule {
  const service = ctx.runtime.service(notification);
  return {
    name: 'notification-expiry',
    due: (now) => {
      const filter: FilterItem[] = [
        { column: 'status', operator: 'IN', values: ['PLAN', 'SENT'] },
        { column: 'expirationDate', operator: 'LTE', value: now.toISOString() },
      ];
      return dueInReadModel(
        ctx.readStore,
        ctx.readModels,
        notification.collection,
        toQuery({ filter, sort: [] }, notification.columns, notification.defaultSort),
      );
    },
    run: async (item, now) => {
      const command: ChangeState = { type: 'ChangeState', to: 'EXPIRED', reason: `expirationDate ${String(item.expirationDate)} passed` };
      try {
        await service.execute(item.id, command, {
          actor: NOTIFICATION_EXPIRY_ACTOR,
          now,
          newId: ctx.newId,
          requestId: ctx.newId(),
          idempotencyKey: `expire:${item.id}`,
        });
      } catch (error) {
        // Moved on meanwhile (READ, CANCELLED): nothing to expire.
        if (!(error instanceof DomainError && error.status === 'CONFLICT')) throw error;
      }
      return true;
    },
  };
}
