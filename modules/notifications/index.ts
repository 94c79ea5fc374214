// Notifications: notifications and their delivery (e-mail, SMS, in-app) by the dispatcher,
// triggers (REST and the Kafka trigger topic) that rules turn into notifications, and the
// outbound events topic. Notification rules and templates are registries (modules/registries/).

import type { Module, ModuleContext } from '../../api/module.ts';
import { notificationsRoutes } from './api/notifications.ts';
import { triggerRoute } from './api/triggers.ts';
import { notification } from './domain/notification.ts';
import { notificationTrigger } from './domain/trigger.ts';
import { dispatchSchedule } from './workers/dispatcher.ts';
import { expirySchedule } from './workers/expiry.ts';
import { notificationEventsPublisher, triggerConsumer } from './workers/topics.ts';
import { systemRuleReactor, triggerReactor, type TriggerDeps } from './workers/triggerReactor.ts';

const defaults = {
  triggerTopic: 'notification-triggers',
  deadLetterTopic: 'notification-triggers.dead-letter',
  eventsTopic: 'notification-events',
  groupId: 'notification-triggers',
};

/** The topics of the configuration, or their defaults. */
const notificationTopics = (ctx: Pick<ModuleContext, 'settings'>) => ({ ...defaults, ...ctx.settings.notifications });

const triggerDeps = (ctx: ModuleContext): TriggerDeps => ({ ...ctx, microserviceUrls: ctx.settings.notifications?.microserviceUrls ?? {} });

export const notificationsModule: Module = {
  name: 'notifications',
  resources: [
    { definition: notification, routes: {} },
    { definition: notificationTrigger, routes: {} },
  ],
  schedules: (ctx) => [expirySchedule(ctx), dispatchSchedule(ctx)],
  // The trigger topic's message format is the component NotificationTriggerMessage of the OpenAPI
  // document (its schema carries that id).
  routes(app, deps) {
    notificationsRoutes(app, deps);
    triggerRoute(app, deps);
  },
  reactors: (ctx) => [triggerReactor(triggerDeps(ctx)), systemRuleReactor(triggerDeps(ctx), ctx.resources)],
  handlers: (ctx) =>
    ctx.messaging === undefined
      ? []
      : [notificationEventsPublisher(ctx.messaging.publisher, notificationTopics(ctx).eventsTopic, ctx.readStore)],
  workers: (ctx) => {
    if (ctx.messaging === undefined) return [];
    const topics = notificationTopics(ctx);
    const consumer = ctx.messaging.consumer({
      groupId: topics.groupId,
      topic: topics.triggerTopic,
      deadLetterTopic: topics.deadLetterTopic,
    });
    return [triggerConsumer(consumer, { runtime: ctx.runtime, now: () => ctx.clock.now(), newId: ctx.newId })];
  },
};
