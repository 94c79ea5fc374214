// Sharing records (SPEC.md "Sharing"): an owning entity shared with another entity (refType,
// refId), or with everyone (isPublic). Entity types are not checked against a registry: none
// exists in the specification's material.

import { z } from 'zod';
import { longText, text } from '../../../domain/shared/fields.ts';
import { created, defineResource, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';

const entityId = () => z.string().min(1).max(255);

export const sharing = defineResource({
  name: 'Sharing',
  events: { SharingCreated: created(), SharingReplaced: replaced(), SharingPatched: patched(), SharingDeleted: deleted() },
  path: 'sharings',
  description:
    'An owning entity (ownerType, ownerId) shared with another entity (refType, refId: both or neither) or with every user (isPublic). ' +
    'sharingTypeCode distinguishes sharings of one referenced entity (the subType of by-refs).',
  fields: z.strictObject({
    ownerType: text().meta({ description: 'entity type of the owner (e.g. USER_GROUP); not checked against a registry' }),
    ownerId: entityId(),
    refType: text().optional().meta({ description: 'entity type of the entity it is shared with' }),
    refId: entityId().optional(),
    sharingTypeCode: text().optional(),
    description: longText(4000).optional(),
    isPublic: z.boolean().optional().meta({ description: 'true: visible to every user' }),
  }),
  rules: [
    (f) =>
      (f.refType === undefined) === (f.refId === undefined)
        ? []
        : [`${f.refType === undefined ? 'refType' : 'refId'}: required with ${f.refType === undefined ? 'refId' : 'refType'}`],
  ],
  indexed: ['ownerType', 'ownerId', 'refType', 'refId', 'sharingTypeCode'],
});
