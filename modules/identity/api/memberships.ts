// Which groups users belong to, read for the routes of both users and groups.

import type { FastifyRequest } from 'fastify';
import { user } from '../domain/user.ts';
import { userGroup } from '../domain/userGroup.ts';
import type { Document } from '../../../domain/ports.ts';
import { readable } from '../../../api/access.ts';
import type { AppDeps } from '../../../api/module.ts';
import { isIn, recordsWhere, type QueryOptions } from '../../../api/readModelQuery.ts';

/** The groups of several users, from the groups' read model: { userId: [group] }. */
export async function groupsOfUsers(
  deps: AppDeps,
  request: FastifyRequest,
  userIds: readonly string[],
  options: QueryOptions,
): Promise<Record<string, Document[]>> {
  const users = deps.runtime.service(user);
  const codesByUser = new Map<string, string[]>();
  for (const id of new Set(userIds.map((u) => u.toLowerCase()))) {
    const found = await users.get(id).catch(() => undefined);
    // A user the caller may not read is as unknown as one that does not exist.
    const visible = found !== undefined && (await readable(deps, request, user, found));
    codesByUser.set(id, visible && Array.isArray(found.groups) ? (found.groups as string[]) : []);
  }
  const codes = [...new Set([...codesByUser.values()].flat())];
  const groups = codes.length === 0 ? [] : await recordsWhere(deps, userGroup, [isIn('code', codes)], options);
  const byCode = new Map(groups.map((g) => [String(g.code), g]));
  return Object.fromEntries([...codesByUser].map(([id, cs]) => [id, cs.flatMap((c) => byCode.get(c) ?? [])]));
}
