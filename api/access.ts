// Who may reach which records: the built-in roles of the token (admin, editor, viewer) grant
// their permission on every record; any other role is looked up as an access rule's code (in the
// log, so a rule saved a moment ago applies) and grants what the rule covers (domain/access).
// Routes declare the resource they serve (`config.resource`); the auth hook refuses a caller with
// no access to it (403), and routes narrow reads to the covered records (searches and lists by
// the query, single reads by matching the record: 404 when uncovered) and writes through the
// command context (403 for a record outside the write coverage, before or after the change).

import type { FastifyRequest } from 'fastify';
import { accessFrom, covers, FULL_ACCESS, NO_ACCESS, type Access, type Coverage } from '../domain/access/coverage.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { accessRule } from '../domain/access/accessRule.ts';
import { forbidden, notFound } from '../domain/shared/errors.ts';
import { narrowed, toQuery, type Alternatives } from '../domain/shared/filtering.ts';
import { waitForReadModelAt } from './readModelWait.ts';
import type { JsonObject } from '../domain/shared/json.ts';
import { allows, BUILT_IN_ROLES, type Caller, type Permission } from './auth.ts';
import type { AppDeps } from './module.ts';
import { commandContext } from './requestContext.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';

/** Roles looked up as access rules per request, at most (a token with more is refused). */
const MAX_RULE_ROLES = 100;

const accessByRequest = new WeakMap<FastifyRequest, Map<ResourceDefinition, Access>>();

async function rulesOf(deps: AppDeps, caller: Caller): Promise<JsonObject[]> {
  const codes = [...new Set(caller.roles.filter((r) => !BUILT_IN_ROLES.includes(r)))];
  if (codes.length > MAX_RULE_ROLES) throw forbidden(`A token may carry at most ${String(MAX_RULE_ROLES)} roles that name access rules`);
  const rules = deps.runtime.service(accessRule);
  const found: JsonObject[] = [];
  for (const code of codes) {
    const rule = await rules.getByCode(code).catch(() => undefined);
    if (rule !== undefined) found.push(rule);
  }
  return found;
}

/** What the request's caller may read and write of a resource. */
export async function accessTo(deps: AppDeps, request: FastifyRequest, def: ResourceDefinition): Promise<Access> {
  const caller = request.caller;
  if (caller === undefined) return NO_ACCESS;
  const builtIn: Access = { read: allows(caller, 'read') ? 'all' : [], write: allows(caller, 'write') ? 'all' : [] };
  if (builtIn.read === 'all' && builtIn.write === 'all') return FULL_ACCESS;
  let cache = accessByRequest.get(request);
  if (cache === undefined) {
    cache = new Map();
    accessByRequest.set(request, cache);
  }
  const known = cache.get(def);
  if (known !== undefined) return known;
  const fromRules = accessFrom(await rulesOf(deps, caller), def, deps.clock.now());
  const access: Access = {
    read: builtIn.read === 'all' ? 'all' : fromRules.read,
    write: builtIn.write === 'all' ? 'all' : fromRules.write,
  };
  cache.set(def, access);
  return access;
}

const coverageFor = (access: Access, permission: Permission): Coverage => (permission === 'read' ? access.read : access.write);

/** The auth hook's check of a route serving a resource: 403 unless the caller reaches some of it. */
export async function authorizeResource(
  deps: AppDeps,
  request: FastifyRequest,
  def: ResourceDefinition,
  permission: Permission,
): Promise<void> {
  const caller = request.caller;
  if (caller === undefined || permission === 'admin')
    throw forbidden(`Roles [${caller?.roles.join(', ') ?? ''}] do not allow ${permission} access`);
  const coverage = coverageFor(await accessTo(deps, request, def), permission);
  if (coverage !== 'all' && coverage.length === 0) {
    throw forbidden(`Roles [${caller.roles.join(', ')}] do not allow ${permission} access to ${def.path}`);
  }
}

/** The alternatives reads of a resource are narrowed to; undefined: every record. */
export async function readScope(deps: AppDeps, request: FastifyRequest, def: ResourceDefinition): Promise<Alternatives | undefined> {
  const read = (await accessTo(deps, request, def)).read;
  return read === 'all' ? undefined : read;
}

const caughtUpIn = new WeakMap<FastifyRequest, Set<string>>();

/** The read model caught up with the log's head, once per request (a list of N records checks
 * them against one wait, not N). */
async function caughtUp(deps: AppDeps, request: FastifyRequest, def: ResourceDefinition): Promise<void> {
  let done = caughtUpIn.get(request);
  if (done === undefined) {
    done = new Set();
    caughtUpIn.set(request, done);
  }
  if (done.has(def.collection)) return;
  await waitForReadModelAt(deps, def.collection, await deps.eventStore.headPosition());
  done.add(def.collection);
}

/** Whether a coverage holds a record, as the read store evaluates the rules' filters (the one
 * evaluation searches use too, so a single read and a search never disagree): the record as the
 * read model holds it once caught up with the log's head, which is the record as it is now. */
async function covered(
  deps: AppDeps,
  request: FastifyRequest,
  def: ResourceDefinition,
  record: JsonObject,
  coverage: Coverage,
): Promise<boolean> {
  if (coverage === 'all') return true;
  if (coverage.length === 0 || typeof record.id !== 'string') return false;
  await caughtUp(deps, request, def);
  const query = narrowed(
    toQuery({ filter: [{ column: 'id', operator: 'EQ', value: record.id }], sort: [] }, def.columns, def.defaultSort),
    coverage,
  );
  return (await deps.readStore.count(deps.readModels.collectionOf(def.collection), query)) > 0;
}

/** The 404 of a record the caller may not see: naming what the request named, as for a record
 * that does not exist (never the record's own id). */
const hidden = (def: ResourceDefinition, request: FastifyRequest) => {
  const params = (request.params ?? {}) as Record<string, unknown>;
  const asked = Object.values(params).find((v): v is string => typeof v === 'string') ?? '';
  return notFound(def.errorPrefix, asked);
};

/** A record the caller may read, or 404 as if it did not exist. Reads of a record's past
 * (versions, asOf, history) are judged by the record as it is now. */
export async function assertReadable<T extends JsonObject>(
  deps: AppDeps,
  request: FastifyRequest,
  def: ResourceDefinition,
  record: T,
): Promise<T> {
  if (!(await readable(deps, request, def, record))) throw hidden(def, request);
  return record;
}

/** Whether the caller may read a record (for lists assembled from the log). */
export async function readable(deps: AppDeps, request: FastifyRequest, def: ResourceDefinition, record: JsonObject): Promise<boolean> {
  return covered(deps, request, def, record, (await accessTo(deps, request, def)).read);
}

/** Whether the caller may change a record (`readonlyAccess` is its negation). */
export async function writable(deps: AppDeps, request: FastifyRequest, def: ResourceDefinition, record: JsonObject): Promise<boolean> {
  return covered(deps, request, def, record, (await accessTo(deps, request, def)).write);
}

/** Before a change of a record: 404 when the caller may not read it (as if it did not exist),
 * 403 when it may read but not write it, before anything else about the change is judged. */
export async function assertWritable(deps: AppDeps, request: FastifyRequest, def: ResourceDefinition, record: JsonObject): Promise<void> {
  const access = await accessTo(deps, request, def);
  if (access.write === 'all') return;
  if (!(await covered(deps, request, def, record, access.read))) throw hidden(def, request);
  if (!(await covered(deps, request, def, record, access.write)))
    throw forbidden(`Your access rules do not allow writing this ${def.name}`);
}

/** The check a write's decision applies to the record it would leave (CommandContext.admit), in
 * memory (that record is in no store yet); undefined when the caller may write every record. */
export async function writeAdmission(
  deps: AppDeps,
  request: FastifyRequest,
  def: ResourceDefinition,
): Promise<((record: JsonObject) => void) | undefined> {
  const write = (await accessTo(deps, request, def)).write;
  if (write === 'all') return undefined;
  return (record) => {
    if (!covers(write, record)) throw forbidden(`Your access rules do not allow writing this ${def.name}`);
  };
}

/** The guard a module declares for a resource it serves (ServedResource.guard), if any. */
const guardOf = (deps: AppDeps, def: ResourceDefinition) =>
  deps.modules.flatMap((m) => m.resources ?? []).find((r) => r.definition === def)?.guard;

/** The command context of a write by the request's caller, with its write coverage and the
 * resource's guard. */
export async function writeContext(deps: AppDeps, request: FastifyRequest, def: ResourceDefinition): Promise<CommandContext> {
  const admit = await writeAdmission(deps, request, def);
  const base = commandContext(request, deps.clock, deps.newId);
  // A caller reading through access rules names only records it may read.
  const narrowedReads = request.caller !== undefined && !allows(request.caller, 'read');
  const visible = (path: string, record: JsonObject): Promise<boolean> => {
    const target = deps.runtime.resourceAt(path);
    return target === undefined ? Promise.resolve(true) : readable(deps, request, target, record);
  };
  const scope = (path: string): Promise<Alternatives | undefined> => {
    const target = deps.runtime.resourceAt(path);
    return target === undefined ? Promise.resolve(undefined) : readScope(deps, request, target);
  };
  const guard = guardOf(deps, def);
  return {
    ...base,
    ...(admit === undefined ? {} : { admit }),
    ...(narrowedReads ? { visible, readScope: scope } : {}),
    ...(guard === undefined ? {} : { guard: { resource: def.path, check: guard(deps, request) } }),
  };
}
