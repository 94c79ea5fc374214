// Notification triggers become notifications. Two reactors over the log:
//
// - `notification-triggers` takes each NotificationTriggered event: the rule must exist and be valid
//   now; when it names an evalNotificationUrl, data is gathered by a GET through the guarded
//   outbound client (the trigger's own data merged over it); then each ACTIVE template of the rule
//   (its `notificationRuleCode`) makes one notification for the trigger's targets (the owner when
//   it names none), and the trigger records the outcome: PROCESSED with the notifications made and
//   the templates that could not be rendered, or FAILED with the reason. Each notification is
//   created under a key derived from the trigger's event and the template, so a replayed batch
//   makes nothing twice.
// - `notification-system-rules` follows every other resource's events: a SYSTEM rule whose
//   `config.eventTypes` lists an event's type appends a trigger for it, once per event and rule
//   (the key is the event's id and the rule's), with the record as it stood after the event as
//   data (hidden parts, like password hashes, are never in a record). The notifications' own
//   streams are not followed, so a rule cannot trigger itself.

import type { Runtime } from '../../../application/runtime.ts';
import { withinPeriod } from '../../../domain/shared/fields.ts';
import { notification } from '../domain/notification.ts';
import { renderNotification, type RenderEnv } from '../domain/render.ts';
import { notificationTrigger, type TriggerOutcome } from '../domain/trigger.ts';
import {
  OutboundFailed,
  type BlobStore,
  type Document,
  type DocumentRenderers,
  type EventStore,
  type OutboundClient,
  type ReadStore,
  type RecordedEvent,
} from '../../../domain/ports.ts';
import type { ResourceDefinition } from '../../../domain/resource/defineResource.ts';
import { keyedRecordId } from '../../../domain/resource/service.ts';
import { notificationRule } from '../../registries/domain/notificationRule.ts';
import { notificationTemplate } from '../../registries/domain/notificationTemplate.ts';
import { isDomainError } from '../../../domain/shared/errors.ts';
import { toQuery } from '../../../domain/shared/filtering.ts';
import { isPlainObject, type JsonObject } from '../../../domain/shared/json.ts';
import { categoryOf, idIn } from '../../../domain/shared/streams.ts';
import type { ReadModels } from '../../../projections/projection.ts';
import type { CommandFor, Reactor } from '../../../workers/reactor.ts';
import { dueInReadModel } from '../../../workers/scheduler.ts';

export type TriggerDeps = {
  runtime: Runtime;
  /** Every resource, for the record a SYSTEM trigger names. */
  resources?: readonly ResourceDefinition[];
  eventStore: EventStore;
  readStore: ReadStore;
  readModels: ReadModels;
  blobStore: BlobStore;
  documents?: DocumentRenderers | undefined;
  /** The guarded client evalNotificationUrl goes through; absent: such rules fail their triggers. */
  outbound?: OutboundClient | undefined;
  /** Base URLs of microservices by code: where a relative evalNotificationUrl of a rule naming
   * that `microserviceCode` goes. */
  microserviceUrls?: Readonly<Record<string, string>>;
};

const TRIGGERS = 'notification-triggers';
/** The most templates one rule fires. */
const MAX_TEMPLATES = 100;

const reasonOf = (error: unknown): string => {
  if (!isDomainError(error)) throw error;
  if (error.httpStatus >= 500) throw error;
  const details = error.errors.length === 0 ? '' : `: ${error.errors.slice(0, 5).join('; ')}`;
  return `${error.message}${details}`;
};

/** The absolute URL of a rule's evalNotificationUrl, or why there is none. A relative one is
 * resolved under the base of its microservice and must stay there (same origin, under its path:
 * no `..`, no scheme smuggled in after the slash). */
function evalUrlOf(rule: JsonObject, urls: Readonly<Record<string, string>>): string | { reason: string } {
  const url = String(rule.evalNotificationUrl);
  if (!url.startsWith('/')) return url;
  const code = typeof rule.microserviceCode === 'string' ? rule.microserviceCode : undefined;
  const base = code === undefined ? undefined : urls[code];
  if (base === undefined)
    return {
      reason: `evalNotificationUrl ${url} is relative and MICROSERVICE_URLS has no base for microservice ${code ?? '(none named)'}`,
    };
  const root = new URL(base.endsWith('/') ? base : `${base}/`);
  const resolved = new URL(url.slice(1), root);
  if (resolved.origin !== root.origin || !resolved.pathname.startsWith(root.pathname) || /(^|\/)(\.|%2e){1,2}(\/|$)/i.test(url)) {
    return { reason: `evalNotificationUrl ${url} leaves the base of microservice ${String(code)}` };
  }
  return resolved.toString();
}

/**
 * Reads of a read model kept for the events up to the position it had folded when read, so that a
 * batch of events (a burst of triggers) costs one query, not one each: `read(key, position)` answers
 * as a query made once the read model has folded at least `position` (it waits for that), which a
 * read kept from then still is. Nothing is kept while the read model is being rebuilt (none is
 * served, and nothing is found).
 */
function readsAtLeast<T>(
  readModels: ReadModels,
  readModel: string,
  query: (key: string) => Promise<T>,
): (key: string, position: bigint) => Promise<T> {
  const kept = new Map<string, { upTo: bigint; value: T }>();
  const serves = (): boolean => {
    try {
      readModels.collectionOf(readModel);
      return true;
    } catch {
      return false;
    }
  };
  return async (key, position) => {
    const hit = kept.get(key);
    if (hit !== undefined && position <= hit.upTo) return hit.value;
    await readModels.waitFor(readModel, position, 10_000);
    const folded = readModels.statuses().find((s) => s.name === readModel)?.position;
    const upTo = folded === undefined || !/^\d+$/.test(folded) ? position : BigInt(folded) > position ? BigInt(folded) : position;
    const value = await query(key);
    if (serves()) {
      // Bounded: keys are rule codes, a few hundred at most in practice.
      if (kept.size >= 1000) kept.clear();
      kept.set(key, { upTo, value });
    }
    return value;
  };
}

class TriggerProcessor {
  readonly #deps: TriggerDeps;
  readonly #triggers;
  readonly #rules;
  readonly #notifications;
  /** A rule's ACTIVE templates, from their read model as it stood at least at a position. */
  readonly #templatesAt;

  constructor(deps: TriggerDeps) {
    this.#deps = deps;
    this.#triggers = deps.runtime.service(notificationTrigger);
    this.#rules = deps.runtime.service(notificationRule);
    this.#notifications = deps.runtime.service(notification);
    this.#templatesAt = readsAtLeast(deps.readModels, notificationTemplate.collection, (code) => this.#templates(code));
  }

  async react(event: RecordedEvent, commandFor: CommandFor): Promise<void> {
    const id = idIn(notificationTrigger.category, event.stream);
    if (id === undefined) return;
    const trigger = await this.#triggers.live(id);
    if (trigger?.fields.status !== 'RECEIVED') return;
    const ctx = commandFor('outcome');
    const outcome = await this.#outcome(trigger.fields, event.position, commandFor, ctx.now, triggerActorOf(event));
    await this.#triggers.execute(id, outcome, ctx);
  }

  async #outcome(trigger: JsonObject, position: bigint, commandFor: CommandFor, now: Date, actor: string): Promise<TriggerOutcome> {
    const code = String(trigger.ruleCode);
    const rule = await this.#rules.live(code, true);
    if (rule === undefined) return { type: 'Fail', reason: `no notification rule ${code}` };
    if (!withinPeriod(rule.fields.validityFrom, rule.fields.validityTo, now))
      return { type: 'Fail', reason: `notification rule ${code} is not valid now` };
    const data = await this.#data(rule.fields, trigger);
    if (typeof data === 'string') return { type: 'Fail', reason: data };
    // From their read model caught up with the trigger, so a template made ACTIVE just before it is seen.
    const templates = await this.#templatesAt(code, position);
    if (templates.length === 0) return { type: 'Fail', reason: `notification rule ${code} has no ACTIVE template` };
    const record = await this.#recordOf(trigger);
    // The service's own work: rendered in the lane no caller's template can delay, within the
    // share of whoever raised the trigger.
    const env: RenderEnv = {
      records: this.#deps.runtime,
      blobStore: this.#deps.blobStore,
      documents: this.#deps.documents,
      caller: { serviceFor: actor },
    };
    const notificationIds: string[] = [];
    const problems: string[] = [];
    for (const template of templates) {
      const made = await this.#notify(env, trigger, data, String(template.code), commandFor(`template:${String(template.code)}`), record);
      if (made.startsWith('!')) problems.push(made.slice(1));
      else notificationIds.push(made);
    }
    if (notificationIds.length === 0) return { type: 'Fail', reason: `no notification could be made: ${problems.join('; ')}` };
    return { type: 'Complete', notificationIds, problems };
  }

  /** One template's notification: its id, or `!` and why it could not be made. */
  async #notify(
    env: RenderEnv,
    trigger: JsonObject,
    data: JsonObject,
    templateCode: string,
    ctx: ReturnType<CommandFor>,
    record: JsonObject | undefined,
  ): Promise<string> {
    // Made before (a replayed batch): the same key names the same record.
    const id = keyedRecordId(notification, ctx.actor, ctx.idempotencyKey ?? '');
    if ((await this.#notifications.live(id)) !== undefined) return id;
    const optional = (key: string) => (trigger[key] === undefined ? {} : { [key]: trigger[key] });
    const payload = {
      ownerType: String(trigger.ownerType),
      ownerId: String(trigger.ownerId),
      notificationTo: (trigger.targets as JsonObject[] | undefined) ?? [{ ownerType: trigger.ownerType, ownerId: trigger.ownerId }],
      data,
      templateCode,
      ...optional('relatedEntities'),
      ...optional('from'),
    };
    try {
      const input = await renderNotification(
        env,
        payload as Parameters<typeof renderNotification>[1],
        '',
        record === undefined ? {} : { record },
      );
      const made = await this.#notifications.create(input, ctx);
      return made.record?.id ?? id;
    } catch (error) {
      return `!template ${templateCode}: ${reasonOf(error)}`;
    }
  }

  /** The record a SYSTEM trigger names, as it stood after its event (rendered as `record`, never
   * stored on the trigger or the notification). */
  async #recordOf(trigger: JsonObject): Promise<JsonObject | undefined> {
    const data = isPlainObject(trigger.data) ? trigger.data : {};
    if (trigger.source !== 'SYSTEM' || typeof data.stream !== 'string' || typeof data.version !== 'number') return undefined;
    const stream = data.stream;
    const def = this.#deps.resources?.find((r) => r.category === categoryOf(stream));
    const id = def === undefined ? undefined : idIn(def.category, stream);
    if (def === undefined || id === undefined) return undefined;
    return this.#deps.runtime
      .service(def)
      .get(id, { version: data.version })
      .catch((error: unknown) => {
        // Gone at that version (deleted since): rendered without the record.
        if (isDomainError(error) && error.status === 'NOT_FOUND') return undefined;
        throw error;
      });
  }

  /** The data to render: what evalNotificationUrl answers, the trigger's data over it; or why not. */
  async #data(rule: JsonObject, trigger: JsonObject): Promise<JsonObject | string> {
    const own = isPlainObject(trigger.data) ? trigger.data : {};
    if (typeof rule.evalNotificationUrl !== 'string') return own;
    const url = evalUrlOf(rule, this.#deps.microserviceUrls ?? {});
    if (typeof url !== 'string') return url.reason;
    if (this.#deps.outbound === undefined) return 'evalNotificationUrl cannot be fetched: no outbound client is configured';
    try {
      const gathered = await this.#deps.outbound.getJson(url);
      return { ...(isPlainObject(gathered) ? gathered : { evaluated: gathered as JsonObject }), ...own };
    } catch (error) {
      if (error instanceof OutboundFailed) return `evalNotificationUrl ${url}: ${error.message}`;
      throw error;
    }
  }

  /** The rule's ACTIVE templates, from the templates' read model. */
  async #templates(ruleCode: string): Promise<JsonObject[]> {
    const filter = [
      { column: 'notificationRuleCode', operator: 'EQ' as const, value: ruleCode },
      { column: 'status', operator: 'EQ' as const, value: 'ACTIVE' },
    ];
    const query = toQuery({ filter, sort: [] }, notificationTemplate.columns, notificationTemplate.defaultSort);
    return dueInReadModel(this.#deps.readStore, this.#deps.readModels, notificationTemplate.collection, query, MAX_TEMPLATES);
  }
}

/** Who raised a trigger (its NotificationTriggered event), whose share of the trigger reactor and
 * of the service's template threads it counts to: the REST caller; the Kafka topic (not the message
 * key, which the producer chooses freely and could vary to take every share); the actor of the
 * event a SYSTEM rule matched (the reactor's, for a trigger recorded before the origin named it). */
export function triggerActorOf(event: RecordedEvent): string {
  const origin = isPlainObject(event.data.origin) ? event.data.origin : {};
  if (event.data.source === 'KAFKA') return `kafka:${String(origin.topic)}`;
  if (event.data.source === 'SYSTEM' && typeof origin.actor === 'string') return origin.actor;
  return event.metadata.actor;
}

export function triggerReactor(deps: TriggerDeps): Reactor {
  const processor = new TriggerProcessor(deps);
  return {
    name: TRIGGERS,
    categories: [notificationTrigger.category],
    eventTypes: [notificationTrigger.createdEvent],
    // Each trigger is its own stream: a batch's all at once (up to 256), so that their appends share
    // group commits; one actor's on all places but one at most, so that its triggers, however slow
    // their templates, leave a place to the others' (and the template threads share per actor too:
    // infra/templates/).
    concurrency: 256,
    shareOf: triggerActorOf,
    react: (event, commandFor) => processor.react(event, commandFor),
  };
}

/** The actor of triggers a SYSTEM rule appends. */
export const SYSTEM_RULES = 'notification-system-rules';

/** SYSTEM rules fire on the events of every resource but the notifications' own. */
export function systemRuleReactor(deps: TriggerDeps, resources: readonly ResourceDefinition[]): Reactor {
  const followed = resources.filter((r) => r !== notification && r !== notificationTrigger);
  const byCategory = new Map(followed.map((r) => [r.category, r]));
  const triggers = deps.runtime.service(notificationTrigger);
  const rulesQuery = toQuery(
    { filter: [{ column: 'eventType', operator: 'EQ', value: 'SYSTEM' }], sort: [] },
    notificationRule.columns,
    notificationRule.defaultSort,
  );
  // The SYSTEM rules, read once for a batch of events (a burst of log creates).
  const rulesAt = readsAtLeast<readonly Document[]>(deps.readModels, notificationRule.collection, () =>
    dueInReadModel(deps.readStore, deps.readModels, notificationRule.collection, rulesQuery, 1000),
  );
  const systemRulesAt = (position: bigint) => rulesAt('SYSTEM', position);
  return {
    name: SYSTEM_RULES,
    categories: [...byCategory.keys()],
    concurrency: 4,
    async react(event, commandFor) {
      const def = byCategory.get(categoryOf(event.stream));
      const recordId = def === undefined ? undefined : idIn(def.category, event.stream);
      if (def === undefined || recordId === undefined) return;
      // The rules as they stood at the event: the rules' read model caught up with it, and only
      // rules made before it and valid then (a rule made later, or a replay, fires for nothing older).
      const at = event.metadata.at;
      const rules = (await systemRulesAt(event.position)).filter((rule) => {
        const types = isPlainObject(rule.config) ? rule.config.eventTypes : undefined;
        const made = (rule.auditInfo as { whenInserted?: string } | undefined)?.whenInserted;
        return (
          Array.isArray(types) &&
          types.includes(event.type) &&
          made !== undefined &&
          made <= at &&
          withinPeriod(rule.validityFrom, rule.validityTo, new Date(at))
        );
      });
      // The trigger names the record at its version; the trigger reactor reads it when rendering,
      // so no trigger or notification keeps a copy readers of those could see.
      const data = { eventType: event.type, eventId: event.id, stream: event.stream, recordId, version: event.revision };
      let failure: Error | undefined;
      for (const rule of rules) {
        const origin = { eventId: event.id, eventType: event.type, stream: event.stream, actor: event.metadata.actor };
        const input = {
          ruleCode: String(rule.code),
          source: 'SYSTEM',
          data,
          ownerType: def.errorPrefix,
          ownerId: recordId,
          origin,
          status: 'RECEIVED',
        };
        // One rule refused does not keep the others from firing.
        await triggers.create(input, commandFor(`rule:${rule.id}`)).catch((error: unknown) => {
          if (!isDomainError(error) || error.httpStatus >= 500) throw error;
          failure ??= error;
        });
      }
      if (failure !== undefined) throw failure;
    },
  };
}
