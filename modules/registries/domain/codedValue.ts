// The coded value base of SPEC.md, shared by user group type, user type, worklog type,
// notification rule, notification template and log type.

import { z } from 'zod';
import { code, dateTime, localizationData, longText, periodRule, text } from '../../../domain/shared/fields.ts';

export const codedValueFields = {
  code: code(),
  name: text(),
  validityFrom: dateTime().optional(),
  validityTo: dateTime().optional(),
  description: longText(4000).optional(),
  localizationData: localizationData().optional(),
};

export const validityRule = periodRule('validityFrom', 'validityTo');

export const codedValue = <T extends z.core.$ZodLooseShape>(extra: T) => z.strictObject({ ...codedValueFields, ...extra });
