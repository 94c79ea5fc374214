import { z } from 'zod';
import { jsonMap } from '../shared/fields.ts';
import { defineRegistry } from '../registry/defineRegistry.ts';
import { codedValue, validityRule } from './codedValue.ts';

export const NotificationEventTypes = ['SYSTEM', 'PROCESS', 'KAFKA', 'REST', 'DIRECT'] as const;

/** An absolute http(s) URL, or a path relative to the microservice's back-end address. */
const evalUrl = z
  .string()
  .max(2048)
  .refine(
    (s) => {
      if (s.startsWith('/')) return !s.startsWith('//');
      try {
        const u = new URL(s);
        return u.protocol === 'http:' || u.protocol === 'https:';
      } catch {
        return false;
      }
    },
    { error: 'expected an absolute http(s) URL or a path starting with /' },
  );

export const notificationRule = defineRegistry({
  name: 'NotificationRule',
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
