// Membership operations: one user joins or leaves one group (PUT and DELETE
// /users/{userId}/groups/{groupIdOrCode}), and many users join or leave one group at once (POST
// /user-groups/{idOrCode}/members). Each change is one event on the user's stream (UserAddedToGroup,
// UserRemovedFromGroup), decided on the user as it is when written, so concurrent changes of one
// user's groups never lose one another and no client rewrites a whole `groups` array. The rules
// that hold for `groups` in a replace or patch hold here too, through the same checks: the caller's
// access to the user (404 hidden, 403 not writable) and the group (404 hidden), the user's guard
// (userStanding: roles held, an admin to leave a group carrying a role), the admin to join one
// (user.ts), and the access rules on the record the change leaves.

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { user, withMembership, type UserCommand } from '../domain/user.ts';
import { userGroup } from '../domain/userGroup.ts';
import type { ResourceRecord } from '../../../domain/resource/decider.ts';
import type { Position } from '../../../domain/ports.ts';
import type { CommandContext } from '../../../domain/shared/commandHandler.ts';
import { notFound, referenceMissing, validationFailed } from '../../../domain/shared/errors.ts';
import { uuid } from '../../../domain/shared/fields.ts';
import { assertWritable, readable, writeContext } from '../../../api/access.ts';
import { zodRoutes, type AppDeps, type ZodRoutes } from '../../../api/module.ts';
import { eventPosition, versionTag } from '../../../api/replies.ts';
import { ifMatchVersion } from '../../../api/requestContext.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { idOrCode } from '../../../api/schemas.ts';

/** Users one request of POST /user-groups/{idOrCode}/members adds, and removes, at most. */
export const MAX_MEMBER_CHANGES = 1000;

const write = { permission: 'write', resource: user } as const;

/** A group the caller may read, named by id or code: 404 otherwise, naming what was asked. */
async function readableGroup(deps: AppDeps, request: FastifyRequest, idOrCodeOfGroup: string): Promise<ResourceRecord> {
  const found = await deps.runtime
    .service(userGroup)
    .get(idOrCodeOfGroup)
    .catch(() => undefined);
  if (found === undefined || !(await readable(deps, request, userGroup, found))) throw notFound(userGroup.errorPrefix, idOrCodeOfGroup);
  return found;
}

/** The command that makes a user a member of a group, or not. */
const membership = (join: boolean, group: ResourceRecord): UserCommand => ({
  type: join ? 'JoinGroup' : 'LeaveGroup',
  group: String(group.code),
});

/** One user joins or leaves one group. */
function memberRoutes(r: ZodRoutes, deps: AppDeps): void {
  const users = deps.runtime.service(user);
  for (const join of [true, false]) {
    const handler = join ? r.put.bind(r) : r.delete.bind(r);
    handler(
      `/api/v1/${user.path}/:userId/groups/:groupIdOrCode`,
      {
        config: write,
        schema: {
          tags: [user.path],
          summary: join ? 'Add a user to a group' : 'Remove a user from a group',
          description:
            `One ${join ? 'UserAddedToGroup' : 'UserRemovedFromGroup'} event on the user's stream, decided on the user as it is then: concurrent changes of one user's groups all apply. ` +
            `204 also when the user ${join ? 'is a member already' : 'is not a member'} (nothing is written; \`X-Event-Position\` is then the user's last event, at which its groups already read so). ` +
            "`ETag` is the user's version; `If-Match` (optional) pins it (412 otherwise). The user and the group are named by id or code; 404 for either unknown or hidden from the caller. " +
            `${join ? 'Joining' : 'Leaving'} a group whose associatedUserRoleId is set takes an admin (403), as a change of \`groups\` does; so does changing a user holding a role the caller does not hold.`,
          params: z.strictObject({ userId: idOrCode(), groupIdOrCode: idOrCode() }),
          response: { 204: z.undefined(), ...errors(400, 403, 404, 409, 412, 422) },
        },
      },
      async (request, reply) => {
        const target = await users.get(request.params.userId);
        await assertWritable(deps, request, user, target);
        const group = await readableGroup(deps, request, request.params.groupIdOrCode);
        const ctx = await writeContext(deps, request, user);
        const result = await users.execute(target.id, membership(join, group), ctx, ifMatchVersion(request));
        return eventPosition(versionTag(reply, result.version), result.position).code(204).send();
      },
    );
  }
}

const memberList = z.array(idOrCode()).max(MAX_MEMBER_CHANGES).default([]);

const MemberChanges = z
  .strictObject({
    added: z.array(uuid()).meta({ description: 'ids of the users that joined the group (not those that were members already)' }),
    removed: z.array(uuid()).meta({ description: 'ids of the users that left it (not those that were not members)' }),
  })
  .meta({ id: 'UserGroupMemberChanges' });

/** The users a list names, by id: each one the caller may read, else a line saying it is missing. */
async function namedUsers(
  deps: AppDeps,
  request: FastifyRequest,
  list: 'add' | 'remove',
  keys: readonly string[],
  missing: string[],
): Promise<Map<string, ResourceRecord>> {
  const users = deps.runtime.service(user);
  const found = new Map<string, ResourceRecord>();
  for (const [i, key] of keys.entries()) {
    const record = await users.get(key).catch(() => undefined);
    // A user the caller may not read is as unknown as one that does not exist.
    if (record === undefined || !(await readable(deps, request, user, record)))
      missing.push(`${list}[${String(i)}]: no User ${JSON.stringify(key)}`);
    else found.set(record.id, record);
  }
  return found;
}

/** Every change judged before any is written, by the checks the write applies: the caller may
 * write the user (403), the record left passes its access rules, and the user's guard admits it. */
async function judgeAll(
  deps: AppDeps,
  request: FastifyRequest,
  ctx: CommandContext,
  group: string,
  changes: { join: boolean; users: Map<string, ResourceRecord> }[],
): Promise<void> {
  for (const { join, users } of changes) {
    for (const before of users.values()) {
      await assertWritable(deps, request, user, before);
      const after = withMembership(before, group, join);
      ctx.admit?.(after);
      (await ctx.guard?.check({ before, after }))?.();
    }
  }
}

/** Many users join or leave one group. */
function membersRoute(r: ZodRoutes, deps: AppDeps): void {
  const users = deps.runtime.service(user);
  r.post(
    `/api/v1/${userGroup.path}/:idOrCode/members`,
    {
      config: write,
      schema: {
        tags: [userGroup.path],
        summary: 'Add users to a group and remove others, in one request',
        description:
          `\`add\` and \`remove\` name users by id or code, at most ${String(MAX_MEMBER_CHANGES)} each. The whole request is judged first: ` +
          'a user named in both is a 400; a user unknown or hidden from the caller a 422 (USER_GROUP.REFERENCE_NOT_FOUND, one line per name); ' +
          'a user the caller may not change a 403 (as PUT /users/{userId}/groups/{groupIdOrCode} would answer); the group unknown or hidden a 404. ' +
          "Then each change is one event on its user's stream (additions first, in the order given); users already as asked are left alone. " +
          "200 lists the users that changed; `X-Event-Position` is the last append's (or, when nothing changed, the latest of those users' events). " +
          'There is no transaction across streams: should a write fail midway (a user deleted meanwhile, the store failing), the changes written before it stay ' +
          'and the answer is the error; sending the same request again completes it (what is done already changes nothing). ' +
          'For that reason an Idempotency-Key is not needed, and not used.',
        params: z.strictObject({ idOrCode: idOrCode() }),
        body: z.strictObject({ add: memberList, remove: memberList }),
        response: { 200: MemberChanges, ...errors(400, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const { add, remove } = request.body;
      const both = add.filter((k) => remove.includes(k));
      if (both.length > 0)
        throw validationFailed(
          'A user cannot be both added and removed',
          both.map((k) => `remove: ${JSON.stringify(k)} is also in add`),
        );
      const group = await readableGroup(deps, request, request.params.idOrCode);
      const missing: string[] = [];
      const adding = await namedUsers(deps, request, 'add', add, missing);
      const removing = await namedUsers(deps, request, 'remove', remove, missing);
      const same = [...adding.keys()].filter((id) => removing.has(id));
      if (same.length > 0)
        throw validationFailed(
          'A user cannot be both added and removed',
          same.map((id) => `remove: user ${id} is also in add`),
        );
      if (missing.length > 0) throw referenceMissing(userGroup.errorPrefix, missing);
      // The key would name one stream; this request writes to many (and needs none: see above).
      const { idempotencyKey: _key, requestHash: _hash, ...ctx } = await writeContext(deps, request, user);
      const changes = [
        { join: true, users: adding },
        { join: false, users: removing },
      ];
      await judgeAll(deps, request, ctx, String(group.code), changes);
      const answer = { added: [] as string[], removed: [] as string[] };
      // The log's positions grow: the latest of the answers is the last append's, if any.
      let latest: Position | undefined;
      for (const { join, users: named } of changes) {
        for (const id of named.keys()) {
          const result = await users.execute(id, membership(join, group), ctx);
          if (result.written === true) (join ? answer.added : answer.removed).push(id);
          if (result.position !== undefined && (latest === undefined || result.position > latest)) latest = result.position;
        }
      }
      return eventPosition(reply, latest).send(answer);
    },
  );
}

/** The membership routes. */
export function membershipRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = zodRoutes(app);
  memberRoutes(r, deps);
  membersRoute(r, deps);
}
