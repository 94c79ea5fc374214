// Delivers notifications, as a schedule of due work read from the notifications read model (so a
// restart loses nothing pending): a PLAN notification is taken by its channel (in-app ones are
// SENT on record, letters FAILED as unsupported, e-mail and SMS move to SENDING); a SENDING one
// whose next attempt is due is attempted through its channel's port (MailSender, SmsSender).
// Outbox order: the attempt is an event before the send, its outcome (SENT, FAILED, or deferred
// with backoff) an event after it; a notification recorded SENT is never sent again. Transient
// failures (SMTP 4xx, gateway 5xx, timeouts) are tried again with exponential backoff and jitter up
// to MAX_ATTEMPTS; permanent ones (SMTP 5xx, gateway 4xx) fail at once.

import type { Runtime } from '../../../application/runtime.ts';
import { isActiveUser, user } from '../../identity/domain/user.ts';
import { userGroup } from '../../identity/domain/userGroup.ts';
import {
  backoffMs,
  boundedReason as bounded,
  MAX_ATTEMPTS,
  notification,
  type DeliveryCommand,
  type NotificationEvent,
  type NotificationStatus,
} from '../domain/notification.ts';
import {
  DeliveryFailed,
  type BlobStore,
  type Clock,
  type Document,
  type EventStore,
  type IdGenerator,
  type MailSender,
  type ReadStore,
  type RecordedEvent,
  type SmsSender,
} from '../../../domain/ports.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import { MAX_UNPAGED_SIZE, toQuery, type FilterItem } from '../../../domain/shared/filtering.ts';
import type { JsonObject } from '../../../domain/shared/json.ts';
import { idIn } from '../../../domain/shared/streams.ts';
import type { ReadModels } from '../../../projections/projection.ts';
import { dueInReadModel, type Schedule } from '../../../workers/scheduler.ts';

export const DISPATCHER_ACTOR = 'system:notification-dispatcher';
const IN_APP = new Set(['APPLICATION', 'USER_COMMENT']);
const STATE_CHANGED: NotificationEvent['type'] = 'NotificationStateChanged';

export type DispatcherDeps = {
  eventStore: EventStore;
  runtime: Runtime;
  readStore: ReadStore;
  readModels: ReadModels;
  blobStore: BlobStore;
  clock: Clock;
  newId: IdGenerator;
  mail?: MailSender | undefined;
  sms?: SmsSender | undefined;
  /** For the backoff's jitter (tests fix it). */
  random?: () => number;
};

type Target = { email?: string; phone?: string; ownerType?: string; ownerId?: string };

/** A channel the dispatcher attempts: where a target's address is and what it is called. */
type Channel = { type: 'EMAIL' | 'SMS'; address: 'email' | 'phone'; userField: 'email' | 'phoneNumber'; noun: string };
const CHANNELS: Readonly<Record<'EMAIL' | 'SMS', Channel>> = {
  EMAIL: { type: 'EMAIL', address: 'email', userField: 'email', noun: 'e-mail address' },
  SMS: { type: 'SMS', address: 'phone', userField: 'phoneNumber', noun: 'phone number' },
};
const ATTEMPTED = new Set(Object.keys(CHANNELS));

type Attachment = { filename: string; contentType: string; content: Uint8Array };

/** `; label: a; b; c` for a list, the first 20 and how many more. */
const summary = (label: string, items: readonly string[]): string =>
  items.length === 0
    ? ''
    : `; ${label}: ${items.slice(0, 20).join('; ')}${items.length > 20 ? `; and ${String(items.length - 20)} more` : ''}`;
/** A lookup that found nothing is undefined; a store that failed is an error (tried again). */
const unlessMissing = (error: unknown): undefined => {
  if (error instanceof DomainError && error.status === 'NOT_FOUND') return undefined;
  throw error;
};

class Dispatcher {
  readonly #deps: DispatcherDeps;
  readonly #notifications;
  readonly #users;
  readonly #groups;

  constructor(deps: DispatcherDeps) {
    this.#deps = deps;
    this.#notifications = deps.runtime.service(notification);
    this.#users = deps.runtime.service(user);
    this.#groups = deps.runtime.service(userGroup);
  }

  #command(id: string, c: DeliveryCommand, now: Date) {
    const { newId } = this.#deps;
    return this.#notifications.execute(id, c, { actor: DISPATCHER_ACTOR, now, newId, requestId: newId() });
  }

  async #move(id: string, to: NotificationStatus, reason: string, now: Date): Promise<void> {
    await this.#command(id, { type: 'ChangeState', to, reason }, now);
  }

  /** The addresses of the targets: given ones as they are; a USER target the user's e-mail, a
   * USER_GROUP target its members' (the group's code in their `groups`). A user who is disabled or
   * not valid now, has no e-mail, ignores the notification's template, or ignores the group the
   * target came through is skipped, each with its reason. */
  async #recipients(item: Document, channel: Channel, now: Date): Promise<{ to: string[]; skipped: string[] }> {
    const to: string[] = [];
    const skipped: string[] = [];
    const template = String(item.templateCode);
    const consider = (fields: JsonObject, label: string, via?: string) => {
      const config = (fields.notificationConfig ?? {}) as { ignoredTemplateCodes?: string[]; ignoredUserGroups?: string[] };
      if (!isActiveUser(fields, now)) skipped.push(`${label}: disabled or not valid now`);
      else if (config.ignoredTemplateCodes?.includes(template) === true) skipped.push(`${label}: ignores template ${template}`);
      else if (via !== undefined && config.ignoredUserGroups?.includes(via) === true) skipped.push(`${label}: ignores group ${via}`);
      else if (typeof fields[channel.userField] !== 'string') skipped.push(`${label}: no ${channel.noun}`);
      else to.push(String(fields[channel.userField]));
    };
    // The same target named twice is one target.
    const targets = [
      ...new Map(
        ((item.notificationTo ?? []) as Target[]).map((t) => [JSON.stringify([t[channel.address], t.ownerType, t.ownerId]), t]),
      ).values(),
    ];
    for (const target of targets) {
      const given = target[channel.address];
      if (typeof given === 'string') to.push(given);
      else if (target.ownerType === 'USER' && typeof target.ownerId === 'string') {
        const found = await this.#users.live(target.ownerId).catch(unlessMissing);
        if (found === undefined) skipped.push(`user ${target.ownerId}: not found`);
        else consider(found.fields, `user ${target.ownerId}`);
      } else if (target.ownerType === 'USER_GROUP' && typeof target.ownerId === 'string') {
        const group = await this.#groups.live(target.ownerId).catch(unlessMissing);
        if (group === undefined) skipped.push(`group ${target.ownerId}: not found`);
        else
          for (const member of await this.#members(String(group.fields.code)))
            consider(member, `user ${String(member.code)} of group ${String(group.fields.code)}`, String(group.fields.code));
      } else skipped.push(`${`${target.ownerType ?? 'target'} ${target.ownerId ?? ''}`.trim()}: no ${channel.noun}`);
    }
    return { to: [...new Set(to)], skipped: [...new Set(skipped)] };
  }

  /** The users whose groups hold a group's code, from the users read model. */
  async #members(code: string): Promise<Document[]> {
    const { readStore, readModels } = this.#deps;
    const query = toQuery({ filter: [{ column: 'groups', operator: 'EQ', value: code }], sort: [] }, user.columns, user.defaultSort);
    return readStore.find(readModels.collectionOf(user.collection), query, { offset: 0, limit: MAX_UNPAGED_SIZE });
  }

  /** The attachments' bytes from the blob store, or the name of one that is missing. */
  async #attachments(item: Document): Promise<Attachment[] | string> {
    const found: Attachment[] = [];
    for (const a of (item.attachments ?? []) as { name: string; mimeType: string; sha256: string }[]) {
      const blob = await this.#deps.blobStore.get(a.sha256);
      if (blob === undefined) return a.name;
      found.push({ filename: a.name, contentType: a.mimeType, content: blob.content });
    }
    return found;
  }

  /** A SENDING notification's next attempt through its channel. */
  async attempt(due: Document, now: Date): Promise<void> {
    // The read model may lag: act on the notification as the log has it.
    const live = await this.#notifications.live(due.id);
    if (live?.fields.status !== 'SENDING') return undefined;
    const item: Document = { ...live.fields, id: due.id };
    // Not due as the log has it: an attempt under way holds it (the read model had not folded it).
    if (typeof item.nextAttemptAt === 'string' && item.nextAttemptAt > now.toISOString()) return undefined;
    const channel = CHANNELS[item.deliveryType as 'EMAIL' | 'SMS'];
    const made = typeof item.attempts === 'number' ? item.attempts : 0;
    const refusal = this.#refusal(item, channel, made, now);
    if (refusal !== undefined) return this.#move(item.id, 'FAILED', refusal, now);
    const { to, skipped } = await this.#recipients(item, channel, now);
    const skips = summary('skipped', skipped);
    if (to.length === 0) return this.#move(item.id, 'FAILED', bounded(`no recipient with a ${channel.noun}${skips}`), now);
    const attachments = channel.type === 'EMAIL' ? await this.#attachments(item) : [];
    if (typeof attachments === 'string')
      return this.#move(item.id, 'FAILED', `attachment ${attachments} is missing from the blob store`, now);
    const attempt = made + 1;
    // Outbox: the attempt is in the log before it is made. It names its number, so only one
    // dispatcher makes it (another is refused with a conflict and sends nothing), and it holds the
    // notification until its outcome (ATTEMPT_HOLD_MS).
    await this.#command(item.id, { type: 'Attempt', attempt }, now);
    let rejected: string[];
    try {
      rejected = channel.type === 'EMAIL' ? await this.#email(item, to, attachments) : await this.#sms(item, to);
    } catch (error) {
      if (!(error instanceof DeliveryFailed)) throw error;
      return this.#failed(item.id, error, attempt, now);
    }
    const delivered = to.filter((address) => !rejected.includes(address));
    const noun = channel.type === 'EMAIL' ? 'e-mail' : 'SMS';
    return this.#move(
      item.id,
      'SENT',
      bounded(`${noun} to ${delivered.join(', ')} (attempt ${String(attempt)})${summary('refused by the server', rejected)}${skips}`),
      now,
    );
  }

  /** Why a notification cannot be attempted at all: no port for its channel, out of attempts, expired. */
  #refusal(item: Document, channel: Channel, made: number, now: Date): string | undefined {
    const unset =
      channel.type === 'EMAIL' ? this.#deps.mail === undefined && 'SMTP_URL' : this.#deps.sms === undefined && 'SMS_GATEWAY_URL';
    if (unset !== false) return `${unset} is not set: ${channel.type === 'EMAIL' ? 'e-mail' : 'SMS'} cannot be delivered`;
    if (made >= MAX_ATTEMPTS) return `no outcome recorded after ${String(made)} attempts`;
    if (typeof item.expirationDate === 'string' && item.expirationDate <= now.toISOString()) return 'expired before it could be delivered';
    return undefined;
  }

  /** Sends the e-mail: the recipients the server refused. */
  #email(item: Document, to: string[], attachments: Attachment[]): Promise<string[]> {
    return (this.#deps.mail as MailSender).send({
      messageId: `<${item.id}@notifications.admin>`,
      ...(typeof item.from === 'string' ? { from: item.from } : {}),
      to,
      subject: typeof item.subject === 'string' ? item.subject : '',
      html: typeof item.contents === 'string' ? item.contents : '',
      attachments,
    });
  }

  /** Sends the SMS: its text is the contents (rendered as text for SMS templates), else the subject. */
  async #sms(item: Document, to: string[]): Promise<string[]> {
    const text = typeof item.contents === 'string' ? item.contents : typeof item.subject === 'string' ? item.subject : '';
    await (this.#deps.sms as SmsSender).send({ messageId: item.id, to, text });
    return [];
  }

  /** A failed attempt: deferred with backoff while transient and attempts remain, FAILED otherwise. */
  async #failed(id: string, error: DeliveryFailed, attempt: number, now: Date): Promise<void> {
    if (!error.transient) return this.#move(id, 'FAILED', `${error.message} (permanent, attempt ${String(attempt)})`, now);
    if (attempt >= MAX_ATTEMPTS) return this.#move(id, 'FAILED', `${error.message} (after ${String(attempt)} attempts)`, now);
    const nextAttemptAt = new Date(now.getTime() + backoffMs(attempt, (this.#deps.random ?? Math.random)())).toISOString();
    await this.#command(id, { type: 'Defer', reason: error.message, nextAttemptAt }, now);
  }

  /** A PLAN notification taken by its channel: to SENDING, and for the channels that need no
   * attempt straight on to their outcome, in the same change (one append). */
  async take(due: Document, now: Date): Promise<void> {
    const live = await this.#notifications.live(due.id);
    if (live?.fields.status !== 'PLAN') return;
    const channel = String(live.fields.deliveryType);
    if (ATTEMPTED.has(channel)) return this.#move(due.id, 'SENDING', channel === 'SMS' ? 'queued for SMS' : 'queued for e-mail', now);
    const outcome = outcomeOf(channel);
    const moves = [
      { to: 'SENDING' as const, reason: IN_APP.has(channel) ? 'in-app' : channel === 'LETTER' ? 'letter' : 'queued' },
      ...(outcome === undefined ? [] : [outcome]),
    ];
    await this.#command(due.id, { type: 'ChangeStates', moves }, now);
  }

  /** A SENDING in-app notification is SENT on record, a letter FAILED: for one moved to SENDING
   * alone (before both moves were one change, or by a client). */
  async finish(due: Document, now: Date): Promise<void> {
    const live = await this.#notifications.live(due.id);
    if (live?.fields.status !== 'SENDING') return;
    const outcome = outcomeOf(String(live.fields.deliveryType));
    if (outcome !== undefined) await this.#move(due.id, outcome.to, outcome.reason, now);
  }
}

/** Where a channel that needs no attempt leaves a SENDING notification: in-app SENT on record, a
 * letter FAILED. */
function outcomeOf(channel: string): { to: NotificationStatus; reason: string } | undefined {
  if (IN_APP.has(channel)) return { to: 'SENT', reason: 'in-app: on record, listed by owner' };
  if (channel === 'LETTER') return { to: 'FAILED', reason: 'unsupported: letters are not delivered by this service' };
  return undefined;
}

/** Whether some notification of the events was left SENDING by them, awaiting an attempt. */
const leftSending = (events: readonly RecordedEvent[]): boolean => {
  const last = new Map<string, unknown>();
  for (const e of events) if (e.type === STATE_CHANGED) last.set(e.stream, e.data.to);
  return [...last.values()].includes('SENDING');
};

/** Moved on meanwhile (CANCELLED, EXPIRED, taken by another dispatcher): nothing to deliver. */
const movedOn = (error: unknown): void => {
  if (!(error instanceof DomainError && error.status === 'CONFLICT')) throw error;
};

export function dispatchSchedule(deps: DispatcherDeps): Schedule {
  const dispatcher = new Dispatcher(deps);
  const query = (filter: FilterItem[]) => toQuery({ filter, sort: [] }, notification.columns, notification.defaultSort);
  const dueWhere = (filter: FilterItem[]) => dueInReadModel(deps.readStore, deps.readModels, notification.collection, query(filter));
  return {
    name: 'notification-dispatch',
    // Notifications are independent: eight delivered at once.
    concurrency: 8,
    // A notification made is taken as the log brings it (an in-app one is SENT then); one moved
    // to SENDING is due for its attempt at once: the log wakes the tick that makes it.
    wakeOn: {
      readModel: notification.collection,
      categories: [notification.category],
      eventTypes: [notification.createdEvent, STATE_CHANGED],
      async react(events, now) {
        // As the due query: one made without a channel is not the dispatcher's.
        const made = events.filter(
          (e) => e.type === notification.createdEvent && e.data.status === 'PLAN' && typeof e.data.deliveryType === 'string',
        );
        // All at once, so that their appends share group commits.
        const taken = await Promise.allSettled(
          made.map((e) => dispatcher.take({ id: idIn(notification.category, e.stream) ?? '' }, now).catch(movedOn)),
        );
        const failed = taken.find((t) => t.status === 'rejected');
        if (failed !== undefined) throw failed.reason;
        return leftSending(events);
      },
    },
    async due(now) {
      const planned = await dueWhere([
        { column: 'status', operator: 'EQ', value: 'PLAN' },
        { column: 'deliveryType', operator: 'IS_NOT_NULL' },
      ]);
      // E-mail and SMS wait in SENDING for an attempt; in-app ones and letters only when a crash
      // came between their two moves. A notification a client moved to SENDING without a channel
      // is not the dispatcher's.
      const sending = await dueWhere([
        { column: 'status', operator: 'EQ', value: 'SENDING' },
        { column: 'deliveryType', operator: 'IS_NOT_NULL' },
        { column: 'nextAttemptAt', operator: 'LTE', value: now.toISOString() },
      ]);
      // Interleaved, so a backlog of new notifications does not hold up due attempts, nor these it.
      return Array.from({ length: Math.max(planned.length, sending.length) }, (_, i) => [sending[i], planned[i]])
        .flat()
        .filter((d) => d !== undefined);
    },
    async run(item, now) {
      if (item.status === 'PLAN') await dispatcher.take(item, now).catch(movedOn);
      else if (item.status === 'SENDING' && ATTEMPTED.has(String(item.deliveryType))) await dispatcher.attempt(item, now).catch(movedOn);
      else if (item.status === 'SENDING') await dispatcher.finish(item, now).catch(movedOn);
      return true;
    },
  };
}
