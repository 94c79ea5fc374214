// Notification triggers (API.md: `POST /notification-rules/{code}/trigger`; DESIGN.md
// "Notifications"): a trigger is appended to the log first, then the trigger reactor makes the
// rule's notifications (workers/triggerReactor.ts). Triggers come from REST (here), from the
// trigger topic (workers/topics.ts, when KAFKA_BROKERS is set) and from SYSTEM rules
// matching domain events; the notifications' state changes go out to the events topic. Triggers
// are readable records (get, search, history), so a client can follow what its trigger became.

import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { notificationTrigger, triggerPayload } from '../domain/trigger.ts';
import { notificationRule } from '../../registries/domain/notificationRule.ts';
import { DomainError } from '../../../domain/shared/errors.ts';
import { withinPeriod } from '../../../domain/shared/fields.ts';
import { assertReadable, writeContext } from '../../../api/access.ts';
import { zodRoutes, type AppDeps } from '../../../api/module.ts';
import { eventPosition, location } from '../../../api/replies.ts';
import { errors } from '../../../api/resourceRoutes.ts';

/** Rules REST may trigger. */
const REST_RULE_TYPES = new Set(['REST', 'DIRECT']);

const notRest = (code: string, type: unknown) =>
  new DomainError('NOTIFICATION_RULE.NOT_TRIGGERABLE', `Notification rule ${JSON.stringify(code)} cannot be triggered over REST`, [
    `eventType: ${typeof type === 'string' ? type : '(none)'} is not REST or DIRECT`,
  ]);
const notValid = (code: string) =>
  new DomainError('NOTIFICATION_RULE.NOT_VALID', `Notification rule ${JSON.stringify(code)} is not valid now`, [
    `validityFrom/validityTo: ${code} is not valid now`,
  ]);

/** POST /api/v1/notification-rules/{code}/trigger. */
export function triggerRoute(app: FastifyInstance, deps: AppDeps): void {
  const rules = deps.runtime.service(notificationRule);
  const triggers = deps.runtime.service(notificationTrigger);
  zodRoutes(app).post(
    '/api/v1/notification-rules/:code/trigger',
    {
      config: { permission: 'write', resource: notificationTrigger },
      schema: {
        tags: [notificationRule.path],
        summary: 'Trigger a notification rule',
        description:
          'For rules of eventType REST or DIRECT that are valid now (422 otherwise; 404 for an unknown code). The trigger is appended to the log ' +
          '(NotificationTriggered) before the answer, so an acknowledged trigger is never lost; then each ACTIVE template of the rule makes a ' +
          "notification for `targets` (the owner when absent), with the data `evalNotificationUrl` gathers under the trigger's own `data`. " +
          'Follow it at `Location` (GET /api/v1/notification-triggers/{triggerId}: RECEIVED, then PROCESSED with `notificationIds` or FAILED ' +
          'with `reason`). `Idempotency-Key` is honoured: the same key and body answer the same trigger.',
        params: z.strictObject({ code: z.string().min(1).max(255) }),
        body: triggerPayload,
        response: { 202: z.strictObject({ triggerId: z.uuid() }), ...errors(400, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const rule = await assertReadable(deps, request, notificationRule, await rules.getByCode(request.params.code));
      const code = String(rule.code);
      if (!REST_RULE_TYPES.has(String(rule.eventType))) throw notRest(code, rule.eventType);
      if (!withinPeriod(rule.validityFrom, rule.validityTo, deps.clock.now())) throw notValid(code);
      const input = { ...request.body, ruleCode: code, source: 'REST', status: 'RECEIVED' };
      const { record, position } = await triggers.create(input, await writeContext(deps, request, notificationTrigger));
      if (record === undefined) throw new Error('a trigger create answered no record');
      return eventPosition(location(reply.code(202), `/api/v1/${notificationTrigger.path}/${record.id}`), position).send({
        triggerId: record.id,
      });
    },
  );
}
