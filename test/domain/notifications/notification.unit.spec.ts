// The notification decider's delivery moves as given / when / then: several moves as one change
// (a channel that needs no attempt goes from PLAN through SENDING to its outcome in one append),
// each judged from where the previous one left the notification.

import { describe, it } from 'vitest';
import { notification } from '../../../modules/notifications/domain/notification.ts';
import type { DecideContext } from '../../../domain/resource/defineResource.ts';
import {
  decide,
  evolve,
  initialState,
  type DecidedEvent,
  type RecordState,
  type ResourceCommand,
} from '../../../domain/resource/decider.ts';
import { deciderSpec } from '../../support/deciderSpec.ts';

const ID = '3f0c9a2e-5b1d-4c7e-8a9f-1d2e3f4a5b6c';
const NOW = new Date('2026-11-23T12:00:00.000Z');
const ctx: DecideContext = { now: NOW, actor: 'system:notification-dispatcher', refs: new Map() };

const { given } = deciderSpec<RecordState, ResourceCommand, DecidedEvent>({
  initial: initialState,
  evolve: (s, e, i) => evolve(notification, s, { ...e, revision: i, metadata: { actor: 'x', at: '2026-11-23T10:00:00.000Z' } }),
  decide: (s, c) => decide(notification, s, c, ctx),
});

const created = (status = 'PLAN'): DecidedEvent => ({
  type: 'NotificationCreated',
  data: {
    id: ID,
    ownerType: 'TICKET',
    ownerId: 'T-1',
    notificationTo: [{ email: 'a@example.com' }],
    templateCode: 'T',
    deliveryType: 'APPLICATION',
    status,
    created: NOW.toISOString(),
  },
});
const changed = (from: string, to: string, reason: string): DecidedEvent => ({
  type: 'NotificationStateChanged',
  data: { from, to, at: NOW.toISOString(), reason },
});
const deliver = {
  type: 'Own' as const,
  command: {
    type: 'ChangeStates',
    moves: [
      { to: 'SENDING', reason: 'in-app' },
      { to: 'SENT', reason: 'on record' },
    ],
  },
};

describe('notification decider: several moves as one change', () => {
  it('moves PLAN through SENDING to SENT, one event per move', () => {
    given([created()])
      .when(deliver)
      .then([changed('PLAN', 'SENDING', 'in-app'), changed('SENDING', 'SENT', 'on record')]);
  });

  it('skips the moves made already, and makes none when all are', () => {
    given([created(), changed('PLAN', 'SENDING', 'in-app')])
      .when(deliver)
      .then([changed('SENDING', 'SENT', 'on record')]);
    given([created(), changed('PLAN', 'SENDING', 'in-app'), changed('SENDING', 'SENT', 'on record')])
      .when(deliver)
      .thenNothing();
  });

  it('refuses the whole change, with 409, when a move is not allowed from where the previous left it', () => {
    given([created(), { type: 'NotificationStateChanged', data: { from: 'PLAN', to: 'CANCELLED', at: NOW.toISOString() } }])
      .when(deliver)
      .thenThrows({ status: 'CONFLICT', code: 'NOTIFICATION.INVALID_TRANSITION' });
    given([created()])
      .when({ type: 'Own', command: { type: 'ChangeStates', moves: [{ to: 'SENT' }] } })
      .thenThrows({ status: 'CONFLICT', errors: ['status: PLAN -> SENT is not allowed; allowed: SENDING, CANCELLED, EXPIRED'] });
  });
});
