// Applying a diff (API.md "Diff entries"): each entry creates, replaces or deletes one record through
// the resource's service, as an ordinary event of the caller under the request's correlation id.
// Idempotent twice over: an entry whose record is already as the entry leaves it writes nothing,
// and each write carries an idempotency key derived from the entry and the version of the record
// it changes, so a second apply racing with the first names the same events (a no-op in both logs).
// One failing entry is reported at its index and does not stop the others. Applies larger than
// DIFF_APPLY_JOB_THRESHOLD run as a job (jobType DIFF_APPLY) reporting its progress.

import { randomUUID } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { z } from 'zod';
import { ServiceJobTypes, cancelRequestOf, isFinal, job as jobDefinition } from '../modules/jobs/domain/jobs.ts';
import type { ResourceDefinition } from '../domain/resource/defineResource.ts';
import { DiffTypes, entryKey, keyOf, sameRecord, type DiffEntry } from '../domain/resource/exchange.ts';
import type { ResourceService } from '../application/resourceService.ts';
import { Slot } from '../application/runtime.ts';
import type { WriteResult } from '../domain/resource/service.ts';
import type { CommandContext } from '../domain/shared/commandHandler.ts';
import { DomainError, isDomainError, notFound, validationFailed } from '../domain/shared/errors.ts';
import { canonicalJson, type JsonObject } from '../domain/shared/json.ts';
import { uuidV5 } from '../domain/shared/ids.ts';
import { issueLines } from '../domain/shared/validation.ts';
import { accessTo, assertWritable, readable, readScope } from './access.ts';
import { errorBody, toDomainError, type ErrorBody } from './errorHandler.ts';
import type { AppDeps, ModuleContext } from './module.ts';
import { toQuery } from '../domain/shared/filtering.ts';
import { dueInReadModel, type Schedule } from '../workers/scheduler.ts';
import { readModelLookup } from './services.ts';

export const DIFF_APPLY_JOB = ServiceJobTypes.DIFF_APPLY;
/** Failures a job keeps in its result (the counts cover all). */
const FAILURES_KEPT = 100;
const PROGRESS_EVERY_MS = 2000;
const LEASE_MS = 15_000;
/** Who fails a job whose process ended. */
const ORPHANS_ACTOR = 'system:diff-apply-jobs';

/** A diff entry as a client sends it back: its records are checked one entry at a time, so one bad
 * entry fails alone. */
export const diffEntryInput = z
  .object({
    diffType: z.enum(DiffTypes),
    left: z.record(z.string(), z.unknown()).optional().meta({ description: 'the record as stored here (REMOVE and CHANGE)' }),
    right: z.record(z.string(), z.unknown()).optional().meta({ description: 'the record as it is to be (NEW and CHANGE)' }),
  })
  .meta({
    id: 'DiffEntryToApply',
    description: 'A diff entry to apply; members other than these (an `error` of an earlier answer) are ignored.',
  });

export type EntryOutcome = { kind: 'applied' | 'unchanged'; record: JsonObject } | { kind: 'failed'; error: DomainError };

/** What applying needs beyond the entries: the resource, its service, the caller. */
export type ApplyEnv = {
  def: ResourceDefinition;
  deps: AppDeps;
  service: ResourceService;
  compareField: string;
  ctx: CommandContext;
  request: FastifyRequest;
};

const isNotFound = (error: unknown): boolean => isDomainError(error) && error.status === 'NOT_FOUND';

/** The live record here whose compare field has this value, if any (by another field: the one
 * the caller may read, else one it may not). */
async function matchHere(env: ApplyEnv, key: string): Promise<JsonObject | undefined> {
  const { service, compareField, def, deps, request } = env;
  if (compareField === 'id') return liveRecord(env, key);
  if (compareField === 'code') {
    return service.getByCode(key).catch((error: unknown) => {
      if (isNotFound(error)) return undefined;
      throw error;
    });
  }
  const filter = [{ column: compareField, operator: 'EQ', value: key }];
  const scope = await readScope(deps, request, def);
  const found = await readModelLookup(deps)(def, filter, 2, scope);
  if (found.length > 1) throw new DomainError('DIFF.COMPARE_FIELD_NOT_UNIQUE', `More than one ${def.name} here has ${compareField} ${key}`);
  const match = found[0] ?? (scope === undefined ? undefined : (await readModelLookup(deps)(def, filter, 1))[0]);
  return match === undefined ? undefined : service.get(match.id);
}

/** The record an entry names here, and whether the caller may read it: an entry naming one it may
 * not read answers what the plain create, replace or delete of it answers that caller (409 for a
 * taken id or code, else 404), never with the record. */
async function recordHere(env: ApplyEnv, key: string): Promise<{ record: JsonObject; readable: boolean } | undefined> {
  const record = await matchHere(env, key);
  return record === undefined ? undefined : { record, readable: await readable(env.deps, env.request, env.def, record) };
}

/** A record of an entry checked against the resource's schema: a 400 naming the entry's member. */
function checked(env: ApplyEnv, index: number, side: 'left' | 'right', record: JsonObject | undefined): JsonObject {
  if (record === undefined)
    throw validationFailed(`A ${side === 'left' ? 'DIFF_TYPE_REMOVE' : 'DIFF_TYPE_NEW or DIFF_TYPE_CHANGE'} entry needs ${side}`, [
      `[${String(index)}].${side}: required`,
    ]);
  const parsed = env.def.input.safeParse(record);
  if (!parsed.success)
    throw validationFailed(`Entry ${String(index)} is not a ${env.def.name} record`, issueLines(parsed.error.issues, [index, side]));
  return record;
}

const withoutAudit = ({ auditInfo: _audit, ...rest }: JsonObject): JsonObject => rest;
const fieldsOf = ({ id: _id, auditInfo: _audit, ...rest }: JsonObject): JsonObject => rest;

const keyed = (env: ApplyEnv, entry: DiffEntry, target: string, version: number | undefined): CommandContext => ({
  ...env.ctx,
  idempotencyKey: entryKey(env.def, env.compareField, entry, target, version),
});

const version = (record: JsonObject): number | undefined => (record.auditInfo as { version?: number } | undefined)?.version;

async function applyNew(env: ApplyEnv, entry: DiffEntry, right: JsonObject, key: string): Promise<EntryOutcome> {
  const here = await recordHere(env, key);
  if (here?.readable === true) {
    const existing = here.record;
    if (sameRecord(env.def, existing, right, env.compareField)) return { kind: 'unchanged', record: existing };
    throw new DomainError(
      'DIFF.ALREADY_EXISTS',
      `A ${env.def.name} with ${env.compareField} ${key} exists here and differs: compute the diff again`,
    );
  }
  return createNew(env, entry, right, key);
}

/** Creates the entry's record (a deleted one of its id made again). The key of a first create
 * names no version; when it was used before and its record has since been deleted, the create
 * under it answers that earlier result and writes nothing, so the record is made again under a
 * key naming the deleted version. */
async function createNew(env: ApplyEnv, entry: DiffEntry, right: JsonObject, target: string): Promise<EntryOutcome> {
  const create = (input: JsonObject, at: number | undefined) =>
    env.service.create(input, keyed(env, entry, target, at), { keepId: true, restore: true });
  let result = await create(withoutAudit(right), undefined);
  const made = result.record;
  if (made === undefined) throw new Error(`create of ${env.def.name} left no record`);
  if (result.written !== false) return { kind: 'applied', record: made };
  if ((await liveRecord(env, made.id)) !== undefined) return { kind: 'unchanged', record: made };
  const { total } = await env.service.history(made.id, { page: 0, size: 1 });
  result = await create({ ...withoutAudit(right), id: made.id }, total - 1);
  if (result.record === undefined) throw new Error(`create of ${env.def.name} left no record`);
  return { kind: result.written === false ? 'unchanged' : 'applied', record: result.record };
}

const liveRecord = (env: ApplyEnv, id: string): Promise<JsonObject | undefined> =>
  env.service.get(id).catch((error: unknown) => {
    if (isNotFound(error)) return undefined;
    throw error;
  });

/** The caller may change this record (its access rules), else 404/403 as for a replace. */
async function writableHere(env: ApplyEnv, record: JsonObject): Promise<void> {
  if ((await accessTo(env.deps, env.request, env.def)).write !== 'all') await assertWritable(env.deps, env.request, env.def, record);
}

async function applyChange(env: ApplyEnv, entry: DiffEntry, right: JsonObject, key: string): Promise<EntryOutcome> {
  const here = await recordHere(env, key);
  if (here?.readable !== true) throw notFound(env.def.errorPrefix, key);
  const existing = here.record;
  await writableHere(env, existing);
  if (sameRecord(env.def, existing, right, env.compareField)) return { kind: 'unchanged', record: existing };
  const id = String(existing.id);
  const result = await env.service.replace(id, fieldsOf(right), keyed(env, entry, id, version(existing)));
  if (result.record === undefined) throw notFound(env.def.errorPrefix, key);
  return { kind: 'applied', record: result.record };
}

async function applyRemove(env: ApplyEnv, entry: DiffEntry, left: JsonObject, key: string): Promise<EntryOutcome> {
  const here = await recordHere(env, key);
  // Already gone: what the entry asks for holds.
  if (here === undefined) return { kind: 'unchanged', record: left };
  if (!here.readable) throw notFound(env.def.errorPrefix, key);
  const existing = here.record;
  await writableHere(env, existing);
  const id = String(existing.id);
  await env.service.remove(id, keyed(env, entry, id, version(existing)));
  return { kind: 'applied', record: existing };
}

/** One entry applied, or the error that stopped it. */
export async function applyEntry(env: ApplyEnv, entry: DiffEntry, index: number): Promise<EntryOutcome> {
  try {
    const remove = entry.diffType === 'DIFF_TYPE_REMOVE';
    const record = remove ? checked(env, index, 'left', entry.left) : checked(env, index, 'right', entry.right);
    const key = keyOf(record, env.compareField);
    // A new record without an id gets one derived from the entry's content alone, so a second
    // apply, by anyone, finds the record the first made instead of making another.
    if (key === undefined && entry.diffType === 'DIFF_TYPE_NEW' && env.compareField === 'id') {
      const id = uuidV5(`${env.def.category}|diff-new|${canonicalJson(record)}`);
      return await applyNew(env, entry, { ...record, id }, id);
    }
    if (key === undefined)
      throw validationFailed(`Entry ${String(index)} has no ${env.compareField}`, [
        `[${String(index)}].${remove ? 'left' : 'right'}.${env.compareField}: required to match the record`,
      ]);
    if (entry.diffType === 'DIFF_TYPE_NEW') return await applyNew(env, entry, record, key);
    if (entry.diffType === 'DIFF_TYPE_CHANGE') return await applyChange(env, entry, record, key);
    return await applyRemove(env, entry, record, key);
  } catch (error) {
    if (!isDomainError(error)) env.request.log.error({ err: error, index }, 'diff entry failed');
    return { kind: 'failed', error: toDomainError(error) };
  }
}

/** An item of apply's answer for a failed entry. */
export type EntryFailure = { index: number; diffType: string; error: ErrorBody };

export const failureOf = (env: ApplyEnv, entry: DiffEntry, index: number, error: DomainError): EntryFailure => ({
  index,
  diffType: entry.diffType,
  error: errorBody(error, env.request.traceId, env.deps.clock.now()),
});

/** Entries applied at once: different records, so their appends share the log's group commits
 * (one at a time, 100,000 entries took 22 minutes on a loaded 2-core machine). */
const APPLY_CONCURRENCY = 8;

type Numbered = { entry: DiffEntry; index: number };

/** The records an entry may touch: its sides' compare-field values, ids and codes. */
function touched(env: ApplyEnv, entry: DiffEntry): Set<string> {
  const keys = new Set<string>();
  for (const side of [entry.left, entry.right]) {
    if (side === undefined) continue;
    keys.add(`k:${JSON.stringify(side[env.compareField] ?? null)}`);
    if (side.id !== undefined) keys.add(`i:${JSON.stringify(side.id)}`);
    // Two entries claiming one code: the first in order gets it, as one by one.
    if (side.code !== undefined) keys.add(`c:${JSON.stringify(side.code)}`);
  }
  return keys;
}

/** A window of entries, applied at once when no two touch the same record, else one by one in
 * order (a hand-made diff may name a record twice); outcomes in the entries' order. */
async function applyWindow(env: ApplyEnv, window: readonly Numbered[]): Promise<EntryOutcome[]> {
  const seen = new Set<string>();
  let disjoint = true;
  for (const { entry } of window) {
    for (const key of touched(env, entry)) {
      if (seen.has(key)) disjoint = false;
      seen.add(key);
    }
  }
  if (disjoint) return Promise.all(window.map(({ entry, index }) => applyEntry(env, entry, index)));
  const outcomes: EntryOutcome[] = [];
  for (const { entry, index } of window) outcomes.push(await applyEntry(env, entry, index));
  return outcomes;
}

/** Where a run of entries starts (a resumed job: after the entries it had done) and what it checks
 * before each window (a job: whether it was cancelled). */
type WindowOptions = { from?: number; beforeWindow?: () => Promise<void> };

/** Entries in windows of APPLY_CONCURRENCY, each window's outcomes in order. */
async function* appliedInWindows(
  env: ApplyEnv,
  entries: AsyncIterable<DiffEntry> | Iterable<DiffEntry>,
  options: WindowOptions = {},
): AsyncGenerator<Numbered & { outcome: EntryOutcome }> {
  let window: Numbered[] = [];
  let index = 0;
  const from = options.from ?? 0;
  const flush = async function* (): AsyncGenerator<Numbered & { outcome: EntryOutcome }> {
    await options.beforeWindow?.();
    const outcomes = await applyWindow(env, window);
    for (const [i, numbered] of window.entries()) yield { ...numbered, outcome: outcomes[i] as EntryOutcome };
    window = [];
  };
  for await (const entry of entries) {
    if (index < from) {
      index++;
      continue;
    }
    window.push({ entry, index: index++ });
    if (window.length >= APPLY_CONCURRENCY) yield* flush();
  }
  if (window.length > 0) yield* flush();
}

/** Apply's answer, one item per entry in order, made as they are applied. */
export async function* appliedItems(env: ApplyEnv, entries: readonly DiffEntry[]): AsyncGenerator<JsonObject | EntryFailure> {
  for await (const { entry, index, outcome } of appliedInWindows(env, entries))
    yield outcome.kind === 'failed' ? failureOf(env, entry, index, outcome.error) : outcome.record;
}

/** The diff applies of one service: the jobs applying in this process (awaited when it closes),
 * the run of each by job id (a retry waits for the run it follows to end), and the jobs that
 * stopped here, kept for a retry. */
type Applies = { running: Set<Promise<void>>; runs: Map<string, Promise<void>>; stopped: Map<string, StoppedApply> };
const applies = new Slot<Applies>(() => ({ running: new Set(), runs: new Map(), stopped: new Map() }));

export const runningApplies = (deps: Pick<AppDeps, 'runtime'>): Set<Promise<void>> => deps.runtime.own(applies).running;

/** Runs a job in the background of this process, known to close() and to a retry of it. */
function runInBackground(deps: AppDeps, id: string, work: () => Promise<void>): void {
  const set = runningApplies(deps);
  const known = deps.runtime.own(applies).runs;
  const run: Promise<void> = work().finally(() => {
    set.delete(run);
    if (known.get(id) === run) known.delete(id);
  });
  set.add(run);
  known.set(id, run);
}

type Counts = { done: number; applied: number; unchanged: number; failed: number };

/** The entries of a job: an array, or entries read back one at a time (an import's temporary file,
 * closed when the job ends). */
export type EntrySource = { length: number; items: () => AsyncIterable<DiffEntry> | Iterable<DiffEntry>; close?: () => void };

const sourceOf = (entries: readonly DiffEntry[] | EntrySource): EntrySource =>
  'items' in entries ? entries : { length: entries.length, items: () => entries };

/** Starts a DIFF_APPLY job for a large apply and runs it here in the background; answers the job's
 * id. The job's lease (`job:<id>`) is taken before the job exists and renewed while it runs, so
 * the schedule below can tell a job whose process ended (its lease free) from a running one. */
export async function startApplyJob(env: ApplyEnv, given: readonly DiffEntry[] | EntrySource): Promise<string> {
  const entries = sourceOf(given);
  try {
    return await startJob(env, entries);
  } catch (error) {
    entries.close?.();
    throw error;
  }
}

async function startJob(env: ApplyEnv, entries: EntrySource): Promise<string> {
  const jobs = env.deps.runtime.service(jobDefinition);
  // The job's own writes are the service's (no `privileged`: a client may not write such a job).
  const {
    idempotencyKey: _key,
    requestHash: _hash,
    admit: _admit,
    visible: _visible,
    readScope: _scope,
    privileged: _privileged,
    ...plain
  } = env.ctx;
  const id = randomUUID();
  const lease = { name: `job:${id}`, owner: `${String(process.pid)}-${randomUUID()}` };
  if (!(await env.deps.readStore.tryLease(lease.name, lease.owner, LEASE_MS))) throw new Error(`the lease of new job ${id} is taken`);
  try {
    await jobs.create(
      {
        id,
        startDate: env.ctx.now.toISOString(),
        status: 'IN_PROGRESS',
        jobType: DIFF_APPLY_JOB,
        data: { resource: env.def.path, compareField: env.compareField, entries: entries.length, requestedBy: env.ctx.actor },
      },
      plain,
    );
  } catch (error) {
    await env.deps.readStore.releaseLease(lease.name, lease.owner).catch(() => undefined);
    throw error;
  }
  runInBackground(env.deps, id, () => runApplyJob(env, { jobs, id, lease, plain }, entries));
  return id;
}

type JobRun = { jobs: ResourceService; id: string; lease: { name: string; owner: string }; plain: CommandContext };

/** Where a run of a job starts: after the entries an earlier run of it did. */
type Done = { counts: Counts; failures: EntryFailure[] };

/** A run stops at a window boundary: a cancel was asked, or the job has ended elsewhere. */
class Stopped extends Error {
  readonly cancelled: boolean;
  constructor(cancelled: boolean) {
    super(cancelled ? 'cancelled' : 'the job ended elsewhere');
    this.cancelled = cancelled;
  }
}

/** A job that stopped in this process (cancelled or failed) with what a retry resumes it from:
 * its entries, the caller's environment and what it had done. Only this process has them. */
type StoppedApply = { env: ApplyEnv; entries: EntrySource; plain: CommandContext; done: Done; timer: NodeJS.Timeout };

/** Stopped jobs kept per process for a retry, and for how long: their entries hold memory (a
 * body) or a temporary file (an import). */
const STOPPED_KEPT = 4;
const STOPPED_KEEP_MS = 60 * 60_000;

const stoppedApplies = (deps: Pick<AppDeps, 'runtime'>): Map<string, StoppedApply> => deps.runtime.own(applies).stopped;

function forget(deps: AppDeps, id: string): StoppedApply | undefined {
  const map = stoppedApplies(deps);
  const kept = map.get(id);
  map.delete(id);
  if (kept !== undefined) clearTimeout(kept.timer);
  return kept;
}

/** Keeps a stopped job for a retry: the oldest beyond STOPPED_KEPT, and any after STOPPED_KEEP_MS,
 * are let go (their entries closed; a retry of them is then 409, as after a restart). */
function keepStopped(deps: AppDeps, id: string, kept: Omit<StoppedApply, 'timer'>): void {
  const map = stoppedApplies(deps);
  const timer = setTimeout(() => forget(deps, id)?.entries.close?.(), STOPPED_KEEP_MS);
  timer.unref();
  map.set(id, { ...kept, timer });
  for (const oldest of [...map.keys()].slice(0, Math.max(0, map.size - STOPPED_KEPT))) forget(deps, oldest)?.entries.close?.();
}

/** The stopped jobs' entries closed (the app closes). */
export function closeStoppedApplies(deps: AppDeps): void {
  for (const id of [...stoppedApplies(deps).keys()]) forget(deps, id)?.entries.close?.();
}

/** Before each window: goes on only while the lease is held, the job IN_PROGRESS and no cancel was asked. */
const boundaryOf = (jobs: ResourceService, id: string, held: { lost: boolean }) => async (): Promise<void> => {
  // The lease lapsed (a stalled process): the job was failed as orphaned; apply no further window.
  if (held.lost) throw new Error('the job lease lapsed while it ran');
  const live = await jobs.live(id);
  if (live === undefined || isFinal(live.fields.status)) throw new Stopped(false);
  if (cancelRequestOf(live.fields) !== undefined) throw new Stopped(true);
};

async function runApplyJob(
  env: ApplyEnv,
  { jobs, id, lease, plain }: JobRun,
  entries: EntrySource,
  done: Done = { counts: { done: 0, applied: 0, unchanged: 0, failed: 0 }, failures: [] },
): Promise<void> {
  const started = Date.now();
  const jobCtx = (): CommandContext => ({ ...plain, now: env.deps.clock.now() });
  const { counts, failures } = done;
  const progress = () => jobs.execute(id, { type: 'Progress', progress: { ...counts, of: entries.length } }, jobCtx());
  const held = { lost: false };
  const renew = setInterval(() => {
    void env.deps.readStore.tryLease(lease.name, lease.owner, LEASE_MS).then(
      (ok) => {
        if (!ok) held.lost = true;
      },
      () => undefined,
    );
  }, LEASE_MS / 3);
  let ended = false;
  try {
    let reported = Date.now();
    const windows = appliedInWindows(env, entries.items(), { from: counts.done, beforeWindow: boundaryOf(jobs, id, held) });
    for await (const { entry, index, outcome } of windows) {
      counts.done++;
      counts[outcome.kind]++;
      if (outcome.kind === 'failed' && failures.length < FAILURES_KEPT) failures.push(failureOf(env, entry, index, outcome.error));
      if (Date.now() - reported >= PROGRESS_EVERY_MS) {
        reported = Date.now();
        await progress();
      }
    }
    await jobs.execute(
      id,
      { type: 'Complete', result: { ...counts, of: entries.length, failures, took: `${String(Date.now() - started)} ms` } },
      jobCtx(),
    );
    ended = true;
  } catch (error) {
    // Where it stopped, for its state and for a retry (which resumes after the entries done).
    await progress().catch(() => undefined);
    if (error instanceof Stopped) {
      if (error.cancelled) await jobs.execute(id, { type: 'ConfirmCancel' }, jobCtx()).catch(() => undefined);
    } else {
      env.request.log.error({ err: error, job: id }, 'diff apply job failed');
      const reason = `${error instanceof Error ? error.message : String(error)} (after ${String(counts.done)} of ${String(entries.length)} entries; retry the job, or apply the same diff again: applying is idempotent)`;
      await jobs.execute(id, { type: 'Fail', reason }, jobCtx()).catch(() => undefined);
    }
    keepStopped(env.deps, id, { env, entries, plain, done });
  } finally {
    if (ended) entries.close?.();
    clearInterval(renew);
    await env.deps.readStore.releaseLease(lease.name, lease.owner).catch(() => undefined);
  }
}

/** A caller's retry of a FAILED DIFF_APPLY job (409 otherwise): resumed here after the entries it
 * had done, as the caller that asked for the apply, when this process still holds its entries;
 * else 409 JOB.NOT_RESUMABLE (its process ended, or the retry reached another instance). The
 * job's lease is taken before it is IN_PROGRESS again, so the schedule of orphans leaves it. */
export async function retryApply(deps: AppDeps, jobId: string, ctx: CommandContext): Promise<WriteResult> {
  const jobs = deps.runtime.service(jobDefinition);
  const id = jobId.toLowerCase();
  // A run here that recorded the job FAILED (which others may read before the run is told) keeps
  // its entries and releases its lease just after: waited for. A job still running is not.
  const run = deps.runtime.own(applies).runs.get(id);
  if (run !== undefined && (await jobs.live(id))?.fields.status === 'FAILED') await run.catch(() => undefined);
  const kept = stoppedApplies(deps).get(id);
  const lease = { name: `job:${id}`, owner: `${String(process.pid)}-${randomUUID()}` };
  const leased = kept !== undefined && (await deps.readStore.tryLease(lease.name, lease.owner, LEASE_MS));
  const unavailable =
    kept === undefined
      ? 'its entries were held only by the process that accepted the apply, which no longer has them (it ended, or this is another instance); apply the same diff again (applying is idempotent)'
      : leased
        ? undefined
        : 'another runner holds its lease';
  let result: WriteResult;
  try {
    result = await jobs.execute(id, { type: 'Retry', ...(unavailable === undefined ? {} : { unavailable }) }, ctx);
  } catch (error) {
    if (leased) await deps.readStore.releaseLease(lease.name, lease.owner).catch(() => undefined);
    throw error;
  }
  if (!leased || result.written === false) {
    if (leased) await deps.readStore.releaseLease(lease.name, lease.owner).catch(() => undefined);
    return result;
  }
  const { env, entries, plain, done } = forget(deps, id) ?? kept;
  const resumed: ApplyEnv = { ...env, ctx: { ...env.ctx, now: deps.clock.now() } };
  runInBackground(deps, id, () => runApplyJob(resumed, { jobs, id, lease, plain }, entries, done));
  return result;
}

/** DIFF_APPLY jobs whose process ended (their lease is free): FAILED saying so. A job applies
 * entries the request gave it, with the caller's access; nothing else holds them, so it is not
 * resumed: applying the same diff again is idempotent. */
export function orphanedApplies(ctx: ModuleContext): Schedule {
  const jobs = ctx.runtime.service(jobDefinition);
  const owner = `orphaned-applies-${String(process.pid)}-${randomUUID()}`;
  const query = toQuery(
    {
      filter: [
        { column: 'status', operator: 'EQ', value: 'IN_PROGRESS' },
        { column: 'jobType', operator: 'EQ', value: DIFF_APPLY_JOB },
      ],
      sort: [],
    },
    jobDefinition.columns,
    jobDefinition.defaultSort,
  );
  return {
    name: 'orphaned-diff-applies',
    due: () => dueInReadModel(ctx.readStore, ctx.readModels, jobDefinition.collection, query),
    run: async (item) => {
      const lease = `job:${item.id}`;
      // Held: its runner is alive; offered again at the next tick.
      if (!(await ctx.readStore.tryLease(lease, owner, LEASE_MS))) return false;
      try {
        const reason = 'the process applying this diff ended before it finished; apply the same diff again (applying is idempotent)';
        // A cancel asked of it meanwhile is what ends it.
        const command = cancelRequestOf(item) === undefined ? { type: 'Fail', reason } : { type: 'ConfirmCancel' };
        await jobs.execute(item.id, command, { actor: ORPHANS_ACTOR, now: ctx.clock.now(), newId: randomUUID });
      } finally {
        await ctx.readStore.releaseLease(lease, owner).catch(() => undefined);
      }
      return true;
    },
  };
}
