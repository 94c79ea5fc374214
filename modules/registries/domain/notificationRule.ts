import { z } from 'zod';
import { jsonMap } from '../../../domain/shared/fields.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { codedValue, validityRule } from './codedValue.ts';

export const NotificationEventTypes = ['SYSTEM', 'PROCESS', 'KAFKA', 'REST', 'DIRECT'] as const;

/** An absolute http(s) URL, or a path relative to the microservice's back-end address. */
const evalUrl = z
  .string()
  .max(2048)
  .refine(
    (s) => {
      // No control characters or spaces anywhere (URL parsing would drop some silently), and a
      // path may not begin like a host (`//evil`, `/\\evil`, which browsers read as one).
      // eslint-disable-next-line no-control-regex -- control characters are exactly what it looks for
      if (/[\u0000-\u0020\u007f]/.test(s)) return false;
      if (s.startsWith('/')) return !/^\/[/\\]/.test(s);
      try {
        const u = new URL(s);
        return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
      } catch {
        return false;
      }
    },
    { error: 'expected an absolute http(s) URL or a path starting with a single /, without spaces or control characters' },
  );

export const notificationRule = defineRegistry({
  name: 'NotificationRule',
  events: {
    NotificationRuleCreated: created(),
    NotificationRuleReplaced: replaced(),
    NotificationRulePatched: patched(),
    NotificationRuleDeleted: deleted(),
  },
  path: 'notification-rules',
  description: 'When and how notifications are raised: the event type, the sender and its configuration.',
  fields: codedValue({
    apiSenderBeanName: z.string().max(255).optional(),
    config: jsonMap().optional(),
    configFormCode: z.string().max(255).optional(),
    evalNotificationUrl: evalUrl.optional(),
    eventType: z.enum(NotificationEventTypes).optional(),
    microserviceCode: z.string().max(255).optional(),
    configTypeCode: z.string().max(255).optional(),
  }),
  rules: [validityRule],
  indexed: ['eventType'],
});
