import { z } from 'zod';
import { jsonMap, stringList, uuid } from '../../../domain/shared/fields.ts';
import { created, defineRegistry, deleted, patched, replaced } from '../../../domain/resource/defineResource.ts';
import { codedValue, validityRule } from './codedValue.ts';
import { handlebarsProblems } from '../../documents/domain/templates.ts';

export const DeliveryTypes = ['SMS', 'EMAIL', 'LETTER', 'APPLICATION', 'USER_COMMENT'] as const;
export const TemplateStatuses = ['ACTIVE', 'INACTIVE'] as const;

export const notificationTemplate = defineRegistry({
  name: 'NotificationTemplate',
  events: {
    NotificationTemplateCreated: created(),
    NotificationTemplateReplaced: replaced(),
    NotificationTemplatePatched: patched(),
    NotificationTemplateDeleted: deleted(),
  },
  path: 'notification-templates',
  description:
    'Text, channel and addressing of a notification; content is used when no formatter template is named. `subject` and `content` are handlebars ' +
    "templates (the formatter's engine), checked when saved: one that does not compile is a 400 naming its line and column.",
  fields: codedValue({
    configTypeId: uuid(),
    content: z
      .string()
      .max(500_000)
      .optional()
      .meta({ description: 'At most 500,000 characters, and the whole record at most 512 KiB of JSON (UTF-8).' }),
    formatterDocumentTemplateId: uuid().optional(),
    deliveryTimeCode: z.string().max(255).optional(),
    deliveryType: z.enum(DeliveryTypes).optional(),
    from: z.string().max(255).optional(),
    to: z.string().max(255).optional(),
    icon: z.string().max(255).optional(),
    subject: z.string().max(255).optional(),
    status: z.enum(TemplateStatuses).optional(),
    expiration: z.int32().min(0).optional().meta({ description: 'Days during which a response is possible.' }),
    dataTags: stringList().optional(),
    config: jsonMap().optional(),
    notificationRuleCode: z.string().max(255).optional(),
  }),
  rules: [
    validityRule,
    (f) => [
      ...(typeof f.subject === 'string' ? handlebarsProblems(f.subject, 'subject') : []),
      ...(typeof f.content === 'string' ? handlebarsProblems(f.content, 'content') : []),
    ],
  ],
  indexed: ['notificationRuleCode', 'status'],
});
