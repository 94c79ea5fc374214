// Users: the shared operation set (its get with expand=REGIONS,ROLES, declared here), and the rows of API.md's
// Users table: password, thumbnail, effective roles, users by type and by groups, the groups of a
// user. A user and its groups named by id or code are read from the log; lists from read models.

import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { decodeBase64, IMAGE_TYPES, imageTypeOf } from '../domain/images.ts';
import {
  hashPassword,
  passwordPolicyOf,
  passwordProblems,
  PasswordRefusals,
  PASSWORD_LENGTH_CEILING,
  policyText,
  verifyPassword,
} from '../domain/password.ts';
import { isValidGroup } from '../domain/roles.ts';
import { user, type ThumbnailRef, type UserCommand } from '../domain/user.ts';
import { UserKinds } from '../../registries/domain/userType.ts';
import { userGroup } from '../domain/userGroup.ts';
import { userGroupRegion } from '../domain/userGroupRegion.ts';
import { DomainError, forbidden, isDomainError, notFound, validationFailed } from '../../../domain/shared/errors.ts';
import { allows } from '../../../api/auth.ts';
import { uuid } from '../../../domain/shared/fields.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { zodRoutes, type AppDeps, type ResourceRouteOptions, type ZodRoutes } from '../../../api/module.ts';
import { eq, isIn, recordsWhere, sendPageWhere } from '../../../api/readModelQuery.ts';
import { pagedNote, pagingQuery, repostNote } from '../../../api/paging.ts';
import { position } from '../../../api/readModelWait.ts';
import { eventPosition, notModified, versionTag } from '../../../api/replies.ts';
import { errors } from '../../../api/resourceRoutes.ts';
import { expandQuery, idOrCode, parseExpand } from '../../../api/schemas.ts';
import { ifMatchVersion } from '../../../api/requestContext.ts';
import { assertReadable, assertWritable, readable, readScope, writeContext } from '../../../api/access.ts';
import { groupsOf, rolesOf } from './userRoles.ts';
import { startAttempt } from './credentials.ts';

const tags = [user.path];
const base = `/api/v1/${user.path}`;
const read = { permission: 'read', resource: user } as const;
const write = { permission: 'write', resource: user } as const;
/** The largest thumbnail, decoded. */
export const MAX_THUMBNAIL_BYTES = 1024 * 1024;

const expandedRegion = z
  .object({
    regionId: z.string(),
    coefficient: z.number().optional(),
    validFrom: z.string().optional(),
    validTo: z.string().optional(),
    source: z
      .enum(['USER', 'USER_GROUP'])
      .optional()
      .meta({
        description: "with expand=REGIONS: USER for the user's own regions, USER_GROUP for one assigned to one of its valid groups",
      }),
    userGroupId: z.string().optional(),
    userGroupCode: z.string().optional(),
    assignmentId: z.string().optional().meta({ description: 'the user group region record' }),
  })
  .meta({ id: 'UserRegionExpanded' });

const expandedUser = user.record.extend({ regions: z.array(expandedRegion).optional() }).meta({ id: 'UserExpanded' });

/** The user's regions: its own, then those assigned to its valid groups (from the read model). */
async function regionsOf(
  deps: AppDeps,
  request: FastifyRequest,
  fields: JsonObject,
  ofUser: readonly JsonObject[],
  minPosition: string | undefined,
): Promise<JsonObject[]> {
  const own = (Array.isArray(fields.regions) ? (fields.regions as JsonObject[]) : []).map((r) => ({ ...r, source: 'USER' }));
  const now = deps.clock.now();
  const groups = ofUser.filter((g) => isValidGroup(g, now));
  if (groups.length === 0) return own;
  const byId = new Map(groups.map((g) => [String(g.id), g]));
  // Only the assignments (and group codes) the caller may read of their own resources.
  const within = await readScope(deps, request, userGroupRegion);
  const assignments = await recordsWhere(deps, userGroupRegion, [isIn('userGroupId', [...byId.keys()])], { minPosition, within });
  const shown: JsonObject[] = [];
  for (const a of assignments) {
    const group = byId.get(String(a.userGroupId));
    const code = group !== undefined && (await readable(deps, request, userGroup, group)) ? group.code : undefined;
    shown.push({
      regionId: a.regionId,
      source: 'USER_GROUP',
      userGroupId: a.userGroupId,
      ...(code === undefined ? {} : { userGroupCode: code }),
      assignmentId: a.id,
    });
  }
  return [...own, ...shown];
}

const photoBody = z.strictObject({
  userId: uuid(),
  photoData: z
    .string()
    .min(1)
    .max(Math.ceil((MAX_THUMBNAIL_BYTES * 4) / 3) + 200),
});

function thumbnailOf(photoData: string): { bytes: Buffer; contentType: string } {
  const bytes = decodeBase64(photoData);
  if (bytes === undefined) throw validationFailed('photoData is not base64', ['photoData: expected base64 (standard alphabet)']);
  if (bytes.length > MAX_THUMBNAIL_BYTES) {
    throw new DomainError(
      'USER.THUMBNAIL_TOO_LARGE',
      `The image is ${String(bytes.length)} bytes; at most ${String(MAX_THUMBNAIL_BYTES)} are accepted`,
      ['photoData: larger than 1 MiB decoded'],
    );
  }
  const contentType = imageTypeOf(bytes);
  if (contentType === undefined)
    throw validationFailed('photoData is not an image this service accepts', [
      `photoData: expected ${IMAGE_TYPES.join(', ')} (recognised by its first bytes)`,
    ]);
  return { bytes, contentType };
}

/** Users by type and by groups. */
function listRoutes(r: ZodRoutes, deps: AppDeps): void {
  r.get(
    `${base}/by-type/:type`,
    {
      config: read,
      schema: {
        tags,
        summary: 'Users of a type',
        description: `From the read model (\`minPosition\` waits for a write). ${pagedNote('by code')}`,
        params: z.strictObject({ type: z.enum(UserKinds) }),
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        response: { 200: z.array(user.record), ...errors(400, 503) },
      },
    },
    async (request, reply) =>
      sendPageWhere(request, reply, deps, user, [eq('type', request.params.type)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, user),
        paging: request.query,
      }),
  );

  r.post(
    `${base}/by-groups`,
    {
      config: read,
      schema: {
        tags,
        summary: 'Users in any of several groups (by group ids), each once',
        description: `The groups are read from the log (unknown ids are left out); their users from the read model. ${pagedNote('by code')} ${repostNote}`,
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        body: z.strictObject({ ids: z.array(uuid()).min(1).max(1000) }),
        response: { 200: z.array(user.record), ...errors(400, 503) },
      },
    },
    async (request, reply) => {
      const groups = deps.runtime.service(userGroup);
      const codes: string[] = [];
      for (const id of new Set(request.body.ids)) {
        const g = await groups.get(id).catch(() => undefined);
        if (g !== undefined) codes.push(String(g.code));
      }
      if (codes.length === 0) return [];
      return sendPageWhere(request, reply, deps, user, [isIn('groups', codes)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, user),
        paging: request.query,
      });
    },
  );
}

/** How users are served by the shared operation set: a get with expand=REGIONS,ROLES. */
export const userOperations: ResourceRouteOptions = {
  get: {
    query: { expand: expandQuery(['REGIONS', 'ROLES']), minPosition: position.optional() },
    response: expandedUser,
    expand: (query) => {
      const expand = parseExpand(query.expand as string | string[] | undefined, ['REGIONS', 'ROLES'] as const);
      if (expand.length === 0) return undefined;
      return async (deps, request, found) => {
        const answer: JsonObject = { ...found };
        // Both expansions start from the user's groups: read once.
        const groups = await groupsOf(deps, found);
        if (expand.includes('ROLES')) answer.roles = await rolesOf(deps, found, groups);
        if (expand.includes('REGIONS'))
          answer.regions = await regionsOf(deps, request, found, groups, query.minPosition as string | undefined);
        return answer;
      };
    },
  },
  docs: {
    get: {
      summary: 'Get a User by id or code, optionally as it was at a time, with expand=REGIONS,ROLES',
      description:
        'The user reflects every acknowledged write. `expand` may be repeated or comma-separated: ROLES puts the effective roles in `roles` ' +
        '(its own, then the code of the access rule each of its groups valid now names by associatedUserRoleId); REGIONS adds to `regions` those assigned to its valid groups ' +
        '(from the user group regions read model: `minPosition` waits for a write), each entry saying where it comes from.',
      errors: [503],
    },
  },
};

/** A user's effective roles and its groups. */
function userRoutes(r: ZodRoutes, deps: AppDeps): void {
  const users = deps.runtime.service(user);
  r.get(
    `${base}/:userId/roles`,
    {
      config: read,
      schema: {
        tags,
        summary: 'The effective roles of a user',
        description:
          'Its own roles, then the code of the access rule that each group it belongs to and that is valid now names by associatedUserRoleId (read as the rule is now: ' +
          'renamed, its new code; deleted, nothing), each once. Read from the log.',
        params: z.strictObject({ userId: idOrCode() }),
        response: { 200: z.array(z.string()), ...errors(400, 404) },
      },
    },
    async (request) => rolesOf(deps, await assertReadable(deps, request, user, await users.get(request.params.userId))),
  );

  r.get(
    `${base}/:userId/groups`,
    {
      config: { permission: 'read', resource: userGroup },
      schema: {
        tags,
        summary: 'The groups of a user',
        description: `The user is read from the log; its groups from the read model (\`minPosition\` waits for a write). ${pagedNote('by code')}`,
        params: z.strictObject({ userId: idOrCode() }),
        querystring: z.strictObject({ minPosition: position.optional(), ...pagingQuery }),
        response: { 200: z.array(userGroup.record), ...errors(400, 404, 503) },
      },
    },
    async (request, reply) => {
      const found = await assertReadable(deps, request, user, await users.get(request.params.userId));
      const codes = Array.isArray(found.groups) ? (found.groups as string[]) : [];
      if (codes.length === 0) return [];
      return sendPageWhere(request, reply, deps, userGroup, [isIn('code', codes)], {
        minPosition: request.query.minPosition,
        within: await readScope(deps, request, userGroup),
        paging: request.query,
      });
    },
  );
}

/** The password: a user's own change (proving the current one) or an admin's reset; the policy;
 * then only its hash is kept. */
function passwordRoute(r: ZodRoutes, deps: AppDeps): void {
  const users = deps.runtime.service(user);
  const policy = passwordPolicyOf(deps.settings?.identity?.passwordPolicy);
  const secret = z.string().max(4 * PASSWORD_LENGTH_CEILING);
  r.put(
    `${base}/:idOrCode/password`,
    {
      // Any caller may try (a user's own change needs no role); the handler decides who may.
      config: { signedIn: true, openDuringPasswordChange: true },
      schema: {
        tags,
        summary: "Set a user's password: a user's own change, or an admin's reset",
        description:
          'A user logged in through POST /auth/token changes its own, giving the current one as `currentPassword` (required: 400 without it; a wrong one is ' +
          '403 AUTH.CURRENT_PASSWORD_WRONG and counts as a failed login, so the lockout applies: 429 past it; a new password equal to it is 400). The change clears `mustChangePassword`, and the ' +
          "session's token stops working (it names the old password): log in again. An admin sets any other user's password without `currentPassword` (a reset; " +
          'sending one is 400): the user gets `mustChangePassword: true`, and its login token may then only make this change or log out ' +
          "(403 AUTH.PASSWORD_CHANGE_REQUIRED). An admin's own password through its own login session is an own change. Anyone else gets 403. " +
          'A user whose `authentication` is not PASSWORD keeps no password: 422 USER.PASSWORD_NOT_USED, nothing stored. ' +
          `Policy: ${policyText(policy)}; 400 naming the rule. Configurable: PASSWORD_MIN_LENGTH and PASSWORD_MAX_LENGTH ` +
          `(at most ${String(PASSWORD_LENGTH_CEILING)}), PASSWORD_REFUSE (comma-separated, of ${PasswordRefusals.join(', ')}; default all). ` +
          'Stored only as an argon2id hash (m = 19 MiB, t = 2, p = 1) in a UserPasswordChanged event, which says whether it was a reset; ' +
          'the plain text is never stored, echoed or logged.',
        params: z.strictObject({ idOrCode: idOrCode() }),
        body: z.strictObject({
          password: secret,
          currentPassword: secret
            .optional()
            .meta({ description: "the user's current password: required for one's own change, refused in an admin's reset" }),
        }),
        response: { 204: z.undefined(), ...errors(400, 401, 403, 404, 412, 422, 429) },
      },
    },
    async (request, reply) => {
      const admin = request.caller !== undefined && allows(request.caller, 'admin');
      // Only an admin learns whether a user it does not name as itself exists: anyone else gets
      // the same 403 for a user that does not exist as for one that does.
      const target = await users.get(request.params.idOrCode).catch((error: unknown) => {
        throw admin || !isDomainError(error) || error.status !== 'NOT_FOUND' ? error : notYours();
      });
      const own = await passwordChangeOf(deps, request, target);
      const { password, currentPassword } = request.body;
      // A change that keeps the password changes nothing an admin who set it knows.
      if (own && password === currentPassword)
        throw validationFailed('The new password is the current one', ['password: must differ from currentPassword']);
      const problems = passwordProblems(password, target, policy);
      if (problems.length > 0) throw validationFailed('The password does not meet the policy', problems);
      if (own) await proveCurrentPassword(deps, request, reply, target.id, currentPassword ?? '');
      const ctx = await writeContext(deps, request, user);
      // One's own password is one's own to change, whatever one may write of other users.
      const { admit: _ownRecord, ...ownContext } = ctx;
      const command: UserCommand = { type: 'SetPassword', passwordHash: await hashPassword(password), reset: !own };
      const result = await users.execute(target.id, command, own ? ownContext : ctx, ifMatchVersion(request));
      return eventPosition(versionTag(reply, result.version), result.position).code(204).send();
    },
  );
}

const notYours = (): DomainError =>
  forbidden("Only an admin may set another user's password (a user sets its own through a login session)");

/** Whether a password change is the user's own (true) or an admin's reset (false), refusing
 * anyone else, a user that keeps no password, and a body that does not fit the kind. */
async function passwordChangeOf(
  deps: AppDeps,
  request: FastifyRequest<{ Body: { currentPassword?: string | undefined } }>,
  target: JsonObject & { id: string },
): Promise<boolean> {
  const caller = request.caller;
  // Setting another user's password is taking over the account: an admin's act. A user's own
  // is the one its login session names (checked against the user at the start of the request);
  // a token minted without a session names no user, whatever its `sub`.
  const own = caller?.session !== undefined && caller.sub === target.code;
  if (!own && !(caller !== undefined && allows(caller, 'admin'))) throw notYours();
  if (!own) await assertWritable(deps, request, user, target);
  if (target.authentication !== 'PASSWORD') {
    throw new DomainError('USER.PASSWORD_NOT_USED', `The user's authentication is ${String(target.authentication)}: it keeps no password`, [
      'authentication: must be PASSWORD for a password to be set',
    ]);
  }
  const given = request.body.currentPassword !== undefined;
  if (own && !given)
    throw validationFailed('Changing your own password takes the current one', ['currentPassword: required for your own password']);
  if (!own && given)
    throw validationFailed("An admin's reset takes no current password", ["currentPassword: only for a user's own change"]);
  return own;
}

/** A user's own change proves the current password, as a login does, and under the same lockout. */
async function proveCurrentPassword(
  deps: AppDeps,
  request: FastifyRequest,
  reply: FastifyReply,
  id: string,
  current: string,
): Promise<void> {
  const found = await deps.runtime.service(user).live(id);
  const attempt = await startAttempt(deps, request, reply, found, id);
  if (!(await verifyPassword(current, found?.hidden.passwordHash as string | undefined))) {
    // A failure that cannot be written is still a wrong password to this caller (the log says so).
    await attempt.failed().catch((error: unknown) => {
      request.log.error({ err: error }, 'a wrong currentPassword could not be written to the log');
    });
    throw new DomainError('AUTH.CURRENT_PASSWORD_WRONG', 'currentPassword is not your current password', [
      'currentPassword: does not match',
    ]);
  }
  attempt.succeeded();
}

/** The thumbnail: checked by its bytes, kept in the blob store. */
function thumbnailRoutes(r: ZodRoutes, deps: AppDeps): void {
  const users = deps.runtime.service(user);
  r.put(
    `${base}/:id/thumbnail`,
    {
      config: write,
      schema: {
        tags,
        summary: "Upload a user's thumbnail",
        description:
          '`photoData`: base64 of a PNG, JPEG, GIF or WebP image (recognised by its first bytes, 400 otherwise; a `data:` URL prefix is accepted), ' +
          'at most 1 MiB decoded (413). The user is named by its uuid (as the contract says), which `userId` repeats. The bytes go to the blob store; the event records their SHA-256, type and size.',
        params: z.strictObject({ id: uuid() }),
        body: photoBody,
        response: { 204: z.undefined(), ...errors(400, 404, 412, 413) },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      if (request.body.userId !== id.toLowerCase())
        throw validationFailed('The body names another user', [`userId: must be ${id.toLowerCase()}`]);
      const { bytes, contentType } = thumbnailOf(request.body.photoData);
      await assertWritable(deps, request, user, await users.get(id));
      const ref = await deps.blobStore.put(bytes, contentType);
      const thumbnail: ThumbnailRef = { sha256: ref.sha256, contentType, size: bytes.length };
      const result = await users.execute(
        id,
        { type: 'SetThumbnail', thumbnail },
        await writeContext(deps, request, user),
        ifMatchVersion(request),
      );
      return eventPosition(reply, result.position).code(204).send();
    },
  );

  r.get(
    `${base}/:id/thumbnail`,
    {
      config: read,
      schema: {
        tags,
        summary: "A user's thumbnail: the image with its content type",
        description:
          "The user by uuid or code. `ETag` is the image's SHA-256; `If-None-Match` with it answers 304. 404 when the user has none.",
        params: z.strictObject({ id: idOrCode() }),
        response: { 200: z.any().meta({ description: 'the image bytes' }), 304: z.undefined(), ...errors(400, 404) },
      },
    },
    async (request, reply) => {
      const { id } = request.params;
      const live = await users.live(id);
      if (live === undefined) throw notFound('USER', id);
      await assertReadable(deps, request, user, { id: live.id });
      const ref = live.hidden.thumbnail as ThumbnailRef | undefined;
      if (ref === undefined) throw notFound('USER.THUMBNAIL', id);
      const etag = `"${ref.sha256}"`;
      void reply.header('etag', etag).header('cache-control', 'private, no-cache');
      if (notModified(reply)) return reply.code(304).send();
      const blob = await deps.blobStore.get(ref.sha256);
      if (blob === undefined) throw notFound('USER.THUMBNAIL', id);
      // Served as the image it was checked to be, never sniffed into something else.
      void reply
        .header('x-content-type-options', 'nosniff')
        .header('content-disposition', 'inline')
        .header('content-security-policy', "default-src 'none'; sandbox");
      return reply.type(ref.contentType).send(Buffer.from(blob.content));
    },
  );
}

/** The users' routes beside the shared operation set. */
export function usersRoutes(app: FastifyInstance, deps: AppDeps): void {
  const r = zodRoutes(app);
  listRoutes(r, deps);
  userRoutes(r, deps);
  passwordRoute(r, deps);
  thumbnailRoutes(r, deps);
}
