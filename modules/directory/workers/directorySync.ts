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
import { job, jobStep } from '../../jobs/domain/jobs.ts';
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
    const owner = `${String(process.pid)}-${randomUUID()}`;
    if (!(await this.#env.readStore.tryLease(LEASE, owner, LEASE_MS))) throw directorySyncRunning();
    let id: string;
    try {
      const created = await this.#services.jobs.create(
        { startDate: this.#env.clock.now().toISOString(), status: 'IN_PROGRESS', jobType: DIRECTORY_SYNC_JOB, data: { requestedBy } },
        this.#ctx(requestedBy),
      );
      id = String(created.record?.id);
    } catch (error) {
      await this.#env.readStore.releaseLease(LEASE, owner).catch(() => undefined);
      throw error;
    }
    const renewal = setInterval(() => void this.#env.readStore.tryLease(LEASE, owner, LEASE_MS).catch(() => false), LEASE_MS / 3);
    const run: Promise<void> = (async () => {
      const end = await this.#run(id);
      // Free before the job ends: a client that starts the next sync once it sees this one ended
      // is never told one is running.
      clearInterval(renewal);
      await this.#env.readStore.releaseLease(LEASE, owner).catch(() => undefined);
      await this.#services.jobs.execute(id, end, this.#ctx());
    })()
      .catch((error: unknown) => {
        this.#env.logger.error({ err: error, job: id }, 'directory sync failed');
      })
      .finally(async () => {
        clearInterval(renewal);
        this.#running.delete(run);
        await this.#env.readStore.releaseLease(LEASE, owner).catch(() => undefined);
      });
    this.#running.add(run);
    return id;
  }

  /** Waits for the syncs running here (the process closes). */
  async stop(): Promise<void> {
    await Promise.all([...this.#running]);
  }

  /** Runs the sync: how its job ends (completed with its result, or failed with the reason). */
  async #run(jobId: string): Promise<{ type: 'Complete'; result: JsonObject } | { type: 'Fail'; reason: string }> {
    const { jobs } = this.#services;
    const stepIds = new Map<string, string>();
    for (const name of Object.values(STEPS)) {
      const created = await this.#services.steps.create({ name, status: 'NEW', jobId }, this.#ctx());
      stepIds.set(name, String(created.record?.id));
    }
    let current: string | undefined;
    const step = async <T>(name: string, work: () => Promise<{ result: T; data: JsonObject }>): Promise<T> => {
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
            if (++done % PROGRESS_EVERY === 0) await progress();
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
      if (current !== undefined)
        await this.#services.steps
          .patch(stepIds.get(current) ?? '', { status: 'FAILED', log: `${reason}${detail}` }, this.#ctx())
          .catch(() => undefined);
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
