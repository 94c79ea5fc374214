// Which groups users belong to, read for the routes of both users and groups.

import type { FastifyRequest } from 'fastify';
import { user } from '../domain/user.ts';
import { userGroup } from '../domain/userGroup.ts';
import type { Document } from '../../../domain/ports.ts';
import { readable } from '../../../api/access.ts';
import type { AppDeps } from '../../../api/module.ts';
import { decodeCursor, encodeCursor, invalidCursor, type Paging, type Position } from '../../../api/paging.ts';
import { isIn, keysetOf, recordsWhere, type QueryOptions } from '../../../api/readModelQuery.ts';

/** The codes of a user's groups; none for a user the caller may not read, as for one that does not exist. */
async function groupCodesOf(deps: AppDeps, request: FastifyRequest, id: string): Promise<string[]> {
  const found = await deps.runtime
    .service(user)
    .get(id)
    .catch(() => undefined);
  if (found === undefined || !(await readable(deps, request, user, found))) return [];
  return Array.isArray(found.groups) ? (found.groups as string[]) : [];
}

/**
 * One page of the groups of several users, from the groups' read model: { userId: [group] }. The
 * page is the first `limit` (user, group) pairs in the order of the request's users, each user's
 * groups by code; a user's list may go on in the next page (its key then appears in both), and a
 * user with no group it may see is in the page its turn falls in, with []. `next` is the cursor of
 * the pair after the page (the user's id and the last code), for the same body posted again.
 */
export async function groupsOfUsers(
  deps: AppDeps,
  request: FastifyRequest,
  userIds: readonly string[],
  options: QueryOptions & { paging: Paging },
): Promise<{ answer: Record<string, Document[]>; next: string | undefined }> {
  const ids = [...new Set(userIds.map((u) => u.toLowerCase()))];
  const { limit, cursor } = options.paging;
  const start = cursor === undefined ? undefined : decodeCursor(keysetOf(userGroup, 'code'), cursor);
  const from = start === undefined ? 0 : ids.indexOf(start.id);
  if (from < 0) throw invalidCursor('names a user the body does not');
  const pairs: Pair[] = [];
  const visited: string[] = [];
  for (const id of ids.slice(from)) {
    if (pairs.length > limit) break;
    visited.push(id);
    const after = id === start?.id && start.value !== null ? String(start.value) : undefined;
    const codes = (await groupCodesOf(deps, request, id)).filter((c) => after === undefined || c > after);
    if (codes.length === 0) continue;
    const groups = await recordsWhere(deps, userGroup, [isIn('code', codes)], { ...options, limit: limit + 1 - pairs.length });
    pairs.push(...groups.map((group) => ({ userId: id, group })));
  }
  return pageOfPairs(pairs, visited, limit);
}

type Pair = { userId: string; group: Document };

/** The first `limit` pairs as the map, with the cursor of the next when more were read. */
function pageOfPairs(pairs: readonly Pair[], visited: readonly string[], limit: number) {
  const page = pairs.slice(0, limit);
  const last = page.at(-1);
  const cut = pairs.length > limit && last !== undefined;
  // Users past the last pair of a cut page have their turn in the next one.
  const shown = cut ? visited.slice(0, visited.indexOf(last.userId) + 1) : visited;
  const answer: Record<string, Document[]> = Object.fromEntries(shown.map((id) => [id, []]));
  for (const { userId, group } of page) answer[userId]?.push(group);
  const at: Position | undefined = cut ? { value: String(last.group.code), id: last.userId } : undefined;
  return { answer, next: at === undefined ? undefined : encodeCursor(at) };
}
