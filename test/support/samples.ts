// Valid bodies derived from a registry's schema, so the contract suite needs nothing written per
// resource: required fields get a value of their type, the code is the one asked for.

import { randomUUID } from 'node:crypto';
import type { z } from 'zod';
import type { ResourceDefinition } from '../../domain/resource/defineResource.ts';

type Def = {
  type: string;
  format?: string;
  innerType?: z.core.$ZodType;
  entries?: Record<string, string>;
  shape?: Record<string, z.core.$ZodType>;
  element?: z.core.$ZodType;
};

function sample(schema: z.core.$ZodType, key: string): unknown {
  const def = schema._zod.def as unknown as Def;
  switch (def.type) {
    case 'string':
      if (def.format === 'uuid') return randomUUID();
      if (def.format === 'datetime') return '2026-03-01T10:00:00.000Z';
      return `${key}-value`;
    case 'enum':
      return Object.values(def.entries ?? {})[0];
    case 'number':
      return 1;
    case 'boolean':
      return true;
    case 'record':
      return {};
    case 'array':
      return [];
    case 'object':
      return Object.fromEntries(
        Object.entries(def.shape ?? {})
          .filter(([, s]) => s._zod.def.type !== 'optional')
          .map(([k, s]) => [k, sample(s, k)]),
      );
    default:
      return def.innerType ? sample(def.innerType, key) : null;
  }
}

/** Records a sample of another resource must name (made by `makeSampleReferences`). */
export type SampleReferences = { userGroupType: string; userGroupId: string; jobId: string; notificationTemplate: string; logType: string };

/** What a sample of each resource with references names, so that the sample is a valid record. */
const referenced = (def: ResourceDefinition, refs: SampleReferences | undefined): Record<string, unknown> => {
  if (refs === undefined) return {};
  switch (def.path) {
    case 'user-groups':
      return { type: refs.userGroupType };
    case 'user-group-regions':
      return { userGroupId: refs.userGroupId };
    case 'job-steps':
      return { jobId: refs.jobId };
    case 'logs':
      return { logTypeCode: refs.logType };
    default:
      return {};
  }
};

export function sampleBody(def: ResourceDefinition, code: string, refs?: SampleReferences): Record<string, unknown> {
  // Notifications are made from a template: their create payload is not their stored form.
  if (def.path === 'notifications' && refs !== undefined) {
    return {
      ownerType: 'SAMPLE',
      ownerId: code,
      templateCode: refs.notificationTemplate,
      notificationTo: [{ email: 'sample@example.com' }],
      data: { code },
    };
  }
  const body = sample(def.fields, def.name) as Record<string, unknown>;
  const shape = def.fields.shape;
  return {
    ...body,
    ...('code' in shape ? { code } : {}),
    ...('name' in shape ? { name: `Name of ${code}` } : {}),
    ...referenced(def, refs),
    ...(SETTLED[def.path] ?? {}),
  };
}

/** Fields whose first value would make other sample values invalid: a FILE template's content must
 * be an office file, so samples are HTML templates (whose text any string is). */
const SETTLED: Readonly<Record<string, Record<string, unknown>>> = { 'formatter-templates': { inputType: 'HTML' } };

/** The records samples of every resource name: a user type for each kind of user, a group type,
 * a group and a job. */
export async function makeSampleReferences(
  call: (o: { method: 'POST'; url: string; payload: unknown }) => Promise<{ statusCode: number; body: string; json: () => unknown }>,
): Promise<SampleReferences> {
  const made = async (url: string, payload: unknown): Promise<{ id: string }> => {
    const res = await call({ method: 'POST', url, payload });
    if (res.statusCode !== 201) throw new Error(`${url}: ${String(res.statusCode)} ${res.body}`);
    return res.json() as { id: string };
  };
  const suffix = uniqueCode('S');
  for (const type of ['INDIVIDUAL', 'WORK_GROUP', 'ORGANIZATION', 'EXTERNAL'])
    await made('/api/v1/user-types', { code: `${suffix}_${type}`, name: type, type });
  await made('/api/v1/user-group-types', { code: `${suffix}_TEAM`, name: 'Team', registry: {} });
  const group = await made('/api/v1/user-groups', { code: `${suffix}_GROUP`, name: 'Group', type: `${suffix}_TEAM`, chars: {} });
  const job = await made('/api/v1/jobs', { startDate: '2026-03-01T10:00:00.000Z', status: 'NEW', jobType: 'SAMPLE' });
  const notificationTemplate = `${suffix}_NOTE`;
  await made('/api/v1/notification-templates', {
    code: notificationTemplate,
    name: 'Note',
    configTypeId: '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5',
    status: 'ACTIVE',
    subject: 'About {{code}}',
    content: 'Hello',
  });
  await made('/api/v1/log-types', { code: `${suffix}_LOG`, name: 'Log' });
  return { userGroupType: `${suffix}_TEAM`, userGroupId: group.id, jobId: job.id, notificationTemplate, logType: `${suffix}_LOG` };
}

/** An enumerated field of the resource with one valid and one invalid value, if it has one. */
export function enumField(def: ResourceDefinition): { key: string; valid: string } | undefined {
  for (const [key, s] of Object.entries(def.fields.shape)) {
    let inner = s as z.core.$ZodType;
    while ((inner._zod.def as unknown as Def).innerType) inner = (inner._zod.def as unknown as Def).innerType as z.core.$ZodType;
    const d = inner._zod.def as unknown as Def;
    if (d.type === 'enum') return { key, valid: String(Object.values(d.entries ?? {})[0]) };
  }
  return undefined;
}

export const uniqueCode = (prefix = 'C'): string => `${prefix}_${randomUUID().replaceAll('-', '').slice(0, 16).toUpperCase()}`;

/** An optional free-text field of the resource, for patch tests. */
export function optionalTextField(def: ResourceDefinition): string {
  for (const [key, s] of Object.entries(def.fields.shape)) {
    const d = (s as z.core.$ZodType)._zod.def as unknown as Def;
    if (d.type !== 'optional' || key === 'name') continue;
    const inner = (d.innerType as z.core.$ZodType)._zod.def as unknown as Def;
    if (inner.type === 'string' && inner.format === undefined) return key;
  }
  throw new Error(`${def.name} has no optional text field`);
}
