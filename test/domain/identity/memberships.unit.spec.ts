// The user's membership commands, given events, when command, then events: JoinGroup and
// LeaveGroup decided on the record as it is (nothing when already so), the group's role an
// admin's to give, and the event folding into `groups`.

import { describe, expect, it } from 'vitest';
import { user } from '../../../modules/identity/domain/user.ts';
import type { DecideContext, ResourceRecordLike } from '../../../domain/resource/defineResource.ts';
import {
  decide,
  evolve,
  initialState,
  type DecidedEvent,
  type RecordState,
  type ResourceCommand,
} from '../../../domain/resource/decider.ts';
import { deciderSpec } from '../../support/deciderSpec.ts';

const ID = '5b7e1c2a-9d3f-4e8a-b1c6-2f4a6d8e0c1b';
const at = '2026-11-27T06:00:00.000Z';
const plain: DecideContext = { now: new Date(at), actor: 'editor-1', refs: new Map(), privileged: false };
const granting = (group: string): DecideContext => ({
  ...plain,
  refs: new Map<string, ResourceRecordLike[]>([['groups', [{ id: ID, code: group, associatedUserRoleId: ID }]]]),
});

const spec = (ctx: DecideContext) =>
  deciderSpec<RecordState, ResourceCommand, DecidedEvent>({
    initial: initialState,
    evolve: (s, e, i) => evolve(user, s, { ...e, revision: i, metadata: { actor: 'x', at } }),
    decide: (s, c) => decide(user, s, c, ctx),
  });

const created = (groups?: string[]): DecidedEvent => ({
  type: 'UserCreated',
  data: {
    id: ID,
    code: 'u1',
    type: 'INDIVIDUAL',
    name: 'U',
    status: 'ENABLE',
    authentication: 'PASSWORD',
    chars: {},
    ...(groups ? { groups } : {}),
  },
});
const own = (type: 'JoinGroup' | 'LeaveGroup', group: string): ResourceCommand => ({ type: 'Own', command: { type, group } });

describe('user memberships', () => {
  it('joins a group once and leaves it once; a repeat decides nothing', () => {
    const { given } = spec(plain);
    given([created()])
      .when(own('JoinGroup', 'A'))
      .then([{ type: 'UserAddedToGroup', data: { group: 'A' } }]);
    given([created(['A'])])
      .when(own('JoinGroup', 'A'))
      .thenNothing();
    given([created(['A', 'B'])])
      .when(own('LeaveGroup', 'A'))
      .then([{ type: 'UserRemovedFromGroup', data: { group: 'A' } }]);
    given([created(['B'])])
      .when(own('LeaveGroup', 'A'))
      .thenNothing();
  });

  it('keeps joining a group that carries a role an admin’s', () => {
    spec(granting('R')).given([created()]).when(own('JoinGroup', 'R')).thenThrows({ status: 'FORBIDDEN' });
    spec({ ...granting('R'), privileged: true })
      .given([created()])
      .when(own('JoinGroup', 'R'))
      .then([{ type: 'UserAddedToGroup' }]);
  });

  it('refuses a group beyond the most a user may name', () => {
    const full = Array.from({ length: 1000 }, (_, i) => `G${String(i)}`);
    spec(plain)
      .given([created(full)])
      .when(own('JoinGroup', 'ONE_MORE'))
      .thenThrows({ code: 'REQUEST.VALIDATION_FAILED' });
  });

  it('folds the events into groups, in the order joined', () => {
    const events: DecidedEvent[] = [
      created(['A']),
      { type: 'UserAddedToGroup', data: { group: 'B' } },
      { type: 'UserAddedToGroup', data: { group: 'C' } },
      { type: 'UserRemovedFromGroup', data: { group: 'A' } },
    ];
    const state = events.reduce<RecordState>(
      (s, e, i) => evolve(user, s, { ...e, revision: i, metadata: { actor: 'x', at } }),
      initialState(),
    );
    expect(state.status === 'active' ? state.fields.groups : undefined).toEqual(['B', 'C']);
  });
});
