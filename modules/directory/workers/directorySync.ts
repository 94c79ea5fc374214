// The directory sync as a job (jobType DIRECTORY_SYNC, with a step per phase and its progress in
// `data.progress`): reads the people of the directory, decides the writes (domain/sync.ts) and
// makes them as the actor `directory-sync`. One sync runs at a time across instances (a lease in
// the read store, renewed while it runs): a second one is 409. It runs in the background of the
// process that started it, which waits for it when it closes; the periodic schedule
// (LDAP_SYNC_INTERVAL_MS) starts one each interval unless one is running.

import { randomUUID } from 'node:crypto';
import type { Directory, Document, EventStore, IdGenerator, ReadStore, Clock } from '../../../domain/ports.ts';
import type { ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import type { Runtime } from '../../../application/runtime.ts';
import type { ResourceService } from '../../../application/resourceService.ts';
import { directorySyncRunning } from '../../../domain/shared/errors.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import type { CommandContext } from '../../../domain/shared/commandHandler.ts';
import type { ReadModelSet } from '../../../workers/readModels.ts';
import { waitForReadModelAt } from '../../../api/readModelWait.ts';
import type { Schedule } from '../../../workers/scheduler.ts';
import { CANCELLED, cancelRequestOf, job, jobStep } from '../../jobs/domain/jobs.ts';
import { toQuery } from '../../../domain/shared/filtering.ts';
import type { WriteResult } from '../../../domain/resource/service.ts';
import { user } from '../../identity/domain/user.ts';
import { userGroup } from '../../identity/domain/userGroup.ts';
import {
  decideSync,
  isDirectoryUser,
  SYNC_ACTOR,
  type DirectoryAuthentication,
  type SyncCommand,
  type SyncGroup,
  type SyncUser,
} from '../domain/sync.ts';

export const DIRECTORY_SYNC_JOB = 'DIRECTORY_SYNC';
const LEASE = 'directory-sync';
const LEASE_MS = 30_000;
/** Failures and skipped people a job's result lists (its counts cover all). */
const LISTED = 100;
/** Writes between two progress records of a step. */
const PROGRESS_EVERY = 100;
const PAGE = 500;

const STEPS = { read: 'read the directory', Create: 'create users', Update: 'update users', Disable: 'disable users' } as const;

export type SyncEnv = {
  eventStore: EventStore;
  readStore: ReadStore;
  readModels: ReadModelSet;
  /** Where the resource services come from (application/runtime.ts). */
  runtime: Runtime;
  clock: Clock;
  newId: IdGenerator;
  resources: readonly ResourceDefinition[];
  directory: Directory;
  userType: string;
  authentication: DirectoryAuthentication;
  logger: { error: (obj: object, msg: string) => void };
};

type Services = { users: ResourceService; jobs: ResourceService; steps: ResourceService };

function servicesOf(env: SyncEnv): Services {
  const of = (def: ResourceDefinition) => env.runtime.service(def);
  return { users: of(user), jobs: of(job), steps: of(jobStep) };
}

/** Every document of a read model caught up with the log's head. */
async function documentsOf(env: SyncEnv, def: ResourceDefinition): Promise<Document[]> {
  await waitForReadModelAt(env, def.collection, await env.eventStore.headPosition());
  const collection = env.readModels.collectionOf(def.collection);
  const docs: Document[] = [];
  for (let after: string | undefined; ;) {
    const page = await env.readStore.scan(collection, { ...(after === undefined ? {} : { after }), limit: PAGE });
    docs.push(...page);
    if (page.length < PAGE) return docs;
    after = page.at(-1)?.id;
  }
}

/** How a sync's job ends. */
type SyncEnd = { type: 'Complete'; result: JsonObject } | { type: 'Fail'; reason: string } | { type: 'ConfirmCancel' };

/** A cancel asked of the job, seen by the run. */
class Cancelled extends Error {}

type Tally = { created: number; updated: number; disabled: number; failed: number };
const TALLY_OF = { Create: 'created', Update: 'updated', Disable: 'disabled' } as const;

export class DirectorySync {
  readonly #env: SyncEnv;
  readonly #services: Services;
  readonly #running = new Set<Promise<void>>();

  constructor(env: SyncEnv) {
    this.#env = env;
    this.#services = servicesOf(env);
  }

  #ctx(actor = SYNC_ACTOR): CommandContext {
    return { actor, now: this.#env.clock.now(), newId: this.#env.newId };
  }

  /** Starts a sync in the background: its job's id. 409 DIRECTORY.SYNC_RUNNING while one runs. */
  async start(requestedBy: string): Promise<string> {
    const lease = await this.#lease();
    let id: string;
    try {
      const created = await this.#services.jobs.create(
        { startDate: this.#env.clock.now().toISOString(), status: 'IN_PROGRESS', jobType: DIRECTORY_SYNC_JOB, data: { requestedBy } },
        this.#ctx(requestedBy),
      );
      id = String(created.record?.id);
    } catch (error) {
      await lease.release();
      throw error;
    }
    this.#background(id, lease, 1);
    return id;
  }

  /** Runs a FAILED sync's job again (POST /api/v1/jobs/{id}/retry): a sync starts from the
   * directory as it is now, so its new attempt is a whole sync, with steps of its own. 409
   * DIRECTORY.SYNC_RUNNING while another runs. */
  async retry(jobId: string, ctx: CommandContext): Promise<WriteResult> {
    const lease = await this.#lease();
    let result: WriteResult;
    let attempt: number;
    try {
      result = await this.#services.jobs.execute(jobId, { type: 'Retry' }, ctx);
      const retries = ((await this.#services.jobs.live(jobId))?.fields.data as JsonObject | undefined)?.retries;
      attempt = (Array.isArray(retries) ? retries.length : 0) + 1;
    } catch (error) {
      await lease.release();
      throw error;
    }
    this.#background(jobId, lease, attempt);
    return result;
  }

  /** The one sync's lease (409 while another holds it), renewed until released. A DIRECTORY_SYNC
   * job still IN_PROGRESS when it is taken lost the process running it: it ends FAILED saying so
   * (or cancelled, when a cancel was asked of it). */
  async #lease(): Promise<{ release: () => Promise<void> }> {
    const { readStore } = this.#env;
    const owner = `${String(process.pid)}-${randomUUID()}`;
    if (!(await readStore.tryLease(LEASE, owner, LEASE_MS))) throw directorySyncRunning();
    const renewal = setInterval(() => void readStore.tryLease(LEASE, owner, LEASE_MS).catch(() => false), LEASE_MS / 3);
    const release = async (): Promise<void> => {
      clearInterval(renewal);
      await readStore.releaseLease(LEASE, owner).catch(() => undefined);
    };
    try {
      await this.#endOrphans();
    } catch (error) {
      await release();
      throw error;
    }
    return { release };
  }

  async #endOrphans(): Promise<void> {
    const { readStore, readModels } = this.#env;
    await waitForReadModelAt(this.#env, job.collection, await this.#env.eventStore.headPosition());
    const query = toQuery(
      {
        filter: [
          { column: 'jobType', operator: 'EQ', value: DIRECTORY_SYNC_JOB },
          { column: 'status', operator: 'EQ', value: 'IN_PROGRESS' },
        ],
        sort: [],
      },
      job.columns,
      job.defaultSort,
    );
    for (const doc of await readStore.find(readModels.collectionOf(job.collection), query, { offset: 0, limit: LISTED })) {
      const reason = 'the process running this sync ended before it finished; a sync converges, so retry it or start another';
      const end = cancelRequestOf(doc) === undefined ? ({ type: 'Fail', reason } as const) : ({ type: 'ConfirmCancel' } as const);
      await this.#services.jobs.execute(doc.id, end, this.#ctx()).catch(() => undefined);
    }
  }

  /** Runs the sync of a job in the background, under the lease, then ends the job. */
  #background(id: string, lease: { release: () => Promise<void> }, attempt: number): void {
    const run: Promise<void> = (async () => {
      const end = await this.#run(id, attempt);
      // Free before the job ends: a client that starts the next sync once it sees this one ended
      // is never told one is running.
      await lease.release();
      await this.#services.jobs.execute(id, end, this.#ctx());
    })()
      .catch((error: unknown) => {
        this.#env.logger.error({ err: error, job: id }, 'directory sync failed');
      })
      .finally(async () => {
        this.#running.delete(run);
        await lease.release();
      });
    this.#running.add(run);
  }

  /** Waits for the syncs running here (the process closes). */
  async stop(): Promise<void> {
    await Promise.all([...this.#running]);
  }

  /** Runs the sync: how its job ends (completed with its result, or failed with the reason). */
  async #run(jobId: string, attempt: number): Promise<SyncEnd> {
    const { jobs } = this.#services;
    const stepIds = new Map<string, string>();
    // A retry's attempt has steps of its own: those of the attempt that failed stay as they ended.
    const named = (name: string): string => (attempt === 1 ? name : `${name} (attempt ${String(attempt)})`);
    for (const name of Object.values(STEPS)) {
      const created = await this.#services.steps.create({ name: named(name), status: 'NEW', jobId }, this.#ctx());
      stepIds.set(name, String(created.record?.id));
    }
    let current: string | undefined;
    const step = async <T>(name: string, work: () => Promise<{ result: T; data: JsonObject }>): Promise<T> => {
      // A cancel asked of the job stops it at the next step boundary.
      if (cancelRequestOf((await jobs.live(jobId))?.fields ?? {}) !== undefined) throw new Cancelled();
      current = name;
      const id = stepIds.get(name) ?? '';
      await this.#services.steps.patch(id, { status: 'IN_PROGRESS' }, this.#ctx());
      const { result, data } = await work();
      await this.#services.steps.patch(id, { status: 'COMPLETED', stepData: data }, this.#ctx());
      current = undefined;
      return result;
    };
    try {
      const read = await step(STEPS.read, async () => {
        const found = await this.#read();
        return { result: found, data: { people: found.people.length, users: found.users.length, groups: found.groups.length } };
      });
      const decision = decideSync(read.people, read.users, read.groups, {
        userType: this.#env.userType,
        authentication: this.#env.authentication,
      });
      const tally: Tally = { created: 0, updated: 0, disabled: 0, failed: 0 };
      const failures: JsonObject[] = [];
      const progress = () =>
        jobs.execute(
          jobId,
          {
            type: 'Progress',
            progress: { people: read.people.length, ...tally, unchanged: decision.unchanged, skipped: decision.skipped.length },
          },
          this.#ctx(),
        );
      await progress();
      for (const type of ['Create', 'Update', 'Disable'] as const) {
        const commands = decision.commands.filter((c) => c.type === type);
        await step(STEPS[type], async () => {
          let done = 0;
          for (const command of commands) {
            try {
              await this.#apply(command);
              tally[TALLY_OF[type]]++;
            } catch (error) {
              tally.failed++;
              if (failures.length < LISTED)
                failures.push({ code: command.code, type, error: error instanceof Error ? error.message : String(error) });
            }
            if (++done % PROGRESS_EVERY === 0) {
              await progress();
              if (cancelRequestOf((await jobs.live(jobId))?.fields ?? {}) !== undefined) throw new Cancelled();
            }
          }
          return { result: undefined, data: { commands: commands.length } };
        });
        await progress();
      }
      const result = {
        people: read.people.length,
        ...tally,
        unchanged: decision.unchanged,
        skipped: decision.skipped.length,
        failures,
        skippedPeople: decision.skipped.slice(0, LISTED),
      };
      return { type: 'Complete', result };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      const detail =
        typeof error === 'object' && error !== null && 'errors' in error && Array.isArray(error.errors)
          ? `: ${error.errors.join('; ')}`
          : '';
      const cancelled = error instanceof Cancelled;
      if (current !== undefined)
        await this.#services.steps
          .patch(stepIds.get(current) ?? '', { status: 'FAILED', log: cancelled ? CANCELLED : `${reason}${detail}` }, this.#ctx())
          .catch(() => undefined);
      if (cancelled) return { type: 'ConfirmCancel' };
      return { type: 'Fail', reason: `${reason}${detail}` };
    }
  }

  /** The people, the users they or the directory concern (as the log has them), the directory-backed groups. */
  async #read(): Promise<{ people: Awaited<ReturnType<Directory['people']>>; users: SyncUser[]; groups: SyncGroup[] }> {
    const people = await this.#env.directory.people();
    const codes = new Set(people.flatMap((p) => (p.code === undefined ? [] : [p.code])));
    const concerned = (await documentsOf(this.#env, user)).filter((d) => isDirectoryUser(d) || codes.has(String(d.code)));
    const users: SyncUser[] = [];
    for (const doc of concerned) {
      const live = await this.#services.users.live(doc.id);
      if (live !== undefined) users.push({ id: live.id, version: live.version, fields: live.fields });
    }
    if (people.length === 0 && users.some((u) => isDirectoryUser(u.fields) && u.fields.status === 'ENABLE')) {
      throw new Error(
        'the directory answered no person under LDAP_USER_BASE with the sync filter: nothing was changed (a sync never disables every directory user at once; check LDAP_USER_BASE and LDAP_SYNC_FILTER)',
      );
    }
    const groups = (await documentsOf(this.#env, userGroup)).flatMap((g) =>
      typeof g.ldapMemberOf === 'string' ? [{ code: String(g.code), ldapMemberOf: g.ldapMemberOf }] : [],
    );
    return { people, users, groups };
  }

  async #apply(command: SyncCommand): Promise<void> {
    const { users } = this.#services;
    switch (command.type) {
      case 'Create':
        await users.create(command.input, this.#ctx());
        return;
      case 'Update':
      case 'Disable':
        await users.replace(command.id, command.input, this.#ctx(), command.version);
        return;
      default: {
        const never: never = command;
        throw new Error(`unknown sync command ${JSON.stringify(never)}`);
      }
    }
  }
}

/** The periodic sync: due once per interval after the start, skipped while one runs. */
export function syncSchedule(sync: DirectorySync, intervalMs: number, startedAt: Date): Schedule {
  return {
    name: 'directory-sync',
    due: (now) => {
      const slot = Math.floor((now.getTime() - startedAt.getTime()) / intervalMs);
      return Promise.resolve(slot < 1 ? [] : [{ id: 'directory-sync', auditInfo: { version: slot } }]);
    },
    run: async () => {
      await sync.start(SYNC_ACTOR).catch((error: unknown) => {
        // One running (a client's, or another instance's): this interval's sync is that one.
        if (!(typeof error === 'object' && error !== null && 'code' in error && error.code === 'DIRECTORY.SYNC_RUNNING')) throw error;
      });
      return true;
    },
  };
}
