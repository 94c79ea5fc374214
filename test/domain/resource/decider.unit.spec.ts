import { describe, expect, it } from 'vitest';
import { accessRule } from '../../../domain/access/accessRule.ts';
import { userGroupType } from '../../../modules/registries/domain/userGroupType.ts';
import {
  decide,
  evolve,
  initialState,
  toRecord,
  type DecidedEvent,
  type ResourceCommand,
  type RecordState,
} from '../../../domain/resource/decider.ts';
import type { ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import { deciderSpec } from '../../support/deciderSpec.ts';

const ID = '0b9c3e1e-8f5e-4d55-9e0a-6c1f0a7b2d11';
const at = (n: number) => ({ actor: `user${String(n)}`, at: `2026-01-0${String(n + 1)}T00:00:00.000Z` });

const spec = (def: ResourceDefinition) =>
  deciderSpec<RecordState, ResourceCommand, DecidedEvent>({
    initial: initialState,
    evolve: (s, e, i) => evolve(def, s, { ...e, revision: i, metadata: at(i) }),
    decide: (s, c) => decide(def, s, c),
  });

const created = (fields: Record<string, unknown> = {}): DecidedEvent => ({
  type: 'UserGroupTypeCreated',
  data: { id: ID, code: 'ADMINS', name: 'Admins', registry: {}, ...fields },
});

describe('registry decider (user group type)', () => {
  const { given } = spec(userGroupType);

  it('creates, claiming the code and normalising date-times to UTC', () => {
    given([])
      .when({ type: 'Create', id: ID, input: { code: 'ADMINS', name: 'Admins', registry: {}, validityFrom: '2026-01-01T01:00:00+01:00' } })
      .then(
        [
          {
            type: 'UserGroupTypeCreated',
            data: { id: ID, code: 'ADMINS', name: 'Admins', registry: {}, validityFrom: '2026-01-01T00:00:00.000Z' },
          },
        ],
        { claim: [{ scope: 'userGroupType', code: 'ADMINS' }], release: [] },
      );
  });

  it('ignores a read-only auditInfo and a matching id on create', () => {
    given([])
      .when({ type: 'Create', id: ID, input: { id: ID, code: 'ADMINS', name: 'Admins', registry: {}, auditInfo: { version: 9 } } })
      .then([created()]);
  });

  it('refuses a second create, and any change of a missing record', () => {
    given([created()])
      .when({ type: 'Create', id: ID, input: {} })
      .thenThrows({ status: 'CONFLICT', code: 'USER_GROUP_TYPE.ALREADY_EXISTS' });
    given([])
      .when({ type: 'Patch', patch: { name: 'x' } })
      .thenThrows({ status: 'NOT_FOUND' });
    given([created(), { type: 'UserGroupTypeDeleted', data: {} }])
      .when({ type: 'Delete' })
      .thenThrows({ status: 'NOT_FOUND' });
  });

  it('refuses a validity that ends before it starts, naming the field', () => {
    given([])
      .when({
        type: 'Create',
        id: ID,
        input: { code: 'A', name: 'A', registry: {}, validityFrom: '2026-02-01T00:00:00Z', validityTo: '2026-01-01T00:00:00Z' },
      })
      .thenThrows({ status: 'BAD_REQUEST', errors: ['validityTo: must not be before validityFrom'] });
  });

  it('patches with the effective merge patch, and moves the code', () => {
    given([created({ description: 'old' })])
      .when({ type: 'Patch', patch: { code: 'ROOTS', description: null } })
      .then([{ type: 'UserGroupTypePatched', data: { patch: { code: 'ROOTS', description: null } } }], {
        claim: [{ scope: 'userGroupType', code: 'ROOTS' }],
        release: [{ scope: 'userGroupType', code: 'ADMINS' }],
      });
  });

  it('records nothing for a patch or replace that changes nothing', () => {
    given([created()])
      .when({ type: 'Patch', patch: { name: 'Admins' } })
      .thenNothing();
    given([created()])
      .when({ type: 'Replace', input: { code: 'ADMINS', name: 'Admins', registry: {} } })
      .thenNothing();
  });

  it('records a patch a merge patch cannot say (a JSON null inside a map) as a replace', () => {
    given([created({ registry: { a: 1 } })])
      .when({ type: 'Replace', input: { code: 'ADMINS', name: 'Admins', registry: { a: null } } })
      .then([{ type: 'UserGroupTypeReplaced', data: { code: 'ADMINS', name: 'Admins', registry: { a: null } } }]);
  });

  it('refuses read-only fields in a patch', () => {
    given([created()])
      .when({ type: 'Patch', patch: { id: ID, auditInfo: {} } })
      .thenThrows({ errors: ['id: read-only', 'auditInfo: read-only'] });
  });

  it('deletes, releasing the code', () => {
    given([created()])
      .when({ type: 'Delete' })
      .then([{ type: 'UserGroupTypeDeleted', data: {} }], { release: [{ scope: 'userGroupType', code: 'ADMINS' }] });
  });

  it('derives auditInfo from the stream: version, first and last writer', () => {
    const events = [created(), { type: 'UserGroupTypePatched', data: { patch: { name: 'Roots' } } }];
    const state = events.reduce<RecordState>((s, e, i) => evolve(userGroupType, s, { ...e, revision: i, metadata: at(i) }), initialState());
    if (state.status === 'absent') throw new Error('absent');
    expect(toRecord(state)).toEqual({
      id: ID,
      code: 'ADMINS',
      name: 'Roots',
      registry: {},
      auditInfo: { version: 1, whoInserted: 'user0', whenInserted: at(0).at, whoEdited: 'user1', whenEdited: at(1).at },
    });
  });
});

describe('registry decider (access rule)', () => {
  const { given } = spec(accessRule);
  it('checks the nested validity period', () => {
    given([])
      .when({
        type: 'Create',
        id: ID,
        input: { code: 'R', name: 'R', fullAccess: true, validFor: { validFrom: '2026-02-01T00:00:00Z', validTo: '2026-01-01T00:00:00Z' } },
      })
      .thenThrows({ errors: ['validFor.validTo: must not be before validFrom'] });
  });
});
