// Field schemas shared by every resource. Date-times are normalised to UTC `toISOString()` form on
// the way in, so stored values sort and compare chronologically as strings in every read store.

import { z } from 'zod';

/** Stored in lower case (UUIDs do not distinguish case), so an EQ filter finds one however it was sent. */
export const uuid = () =>
  z
    .uuid({ error: 'wrong UUID format, expected type uuid' })
    .overwrite((s) => s.toLowerCase())
    .meta({ description: 'A UUID; stored and returned in lower case.' });

export const dateTime = () =>
  z.iso
    .datetime({ offset: true, local: false, error: 'expected an ISO 8601 date-time with a time zone' })
    // Milliseconds are what is kept: finer digits would be dropped, so they are refused instead
    // (zeros after the third are no loss).
    .refine((s) => !/\.\d{3}\d*[1-9]/.test(s), { error: 'at most millisecond precision (3 fractional digits)' })
    // Runs even when the format check failed; leave such values alone for the 400 to name them.
    .overwrite((s) => {
      const t = Date.parse(s);
      return Number.isNaN(t) ? s : new Date(t).toISOString();
    })
    .meta({ description: 'ISO 8601 date-time with a time zone, at most millisecond precision; stored and returned in UTC (…Z).' });

/** ASCII without spaces: meant for programmatic reference. */
export const code = () =>
  z
    .string()
    .min(1)
    .max(255)
    .regex(/^[\x21-\x7e]+$/, { error: 'must be printable ASCII without spaces' });

export const text = (max = 255) => z.string().min(1).max(max);

/** Free text such as a description or a template body. */
export const longText = (max = 100_000) => z.string().max(max);

/** A map of string to any JSON value: `Map<String, Object>` in the source specification. */
export const jsonMap = () => z.record(z.string().max(255), z.json());

export const stringList = (maxItems = 1000) => z.array(z.string().max(255)).max(maxItems);

export const localizationData = () =>
  z.record(
    z.string().regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, { error: 'expected a language code such as cs or en' }),
    z.strictObject({ name: z.string().max(255).optional(), description: z.string().max(4000).optional() }),
  );

export const auditInfoSchema = z
  .strictObject({
    version: z.int(),
    whoInserted: z.string(),
    whenInserted: z.string(),
    whoEdited: z.string(),
    whenEdited: z.string(),
  })
  .meta({ id: 'AuditInfo', description: 'Derived from the record\'s event stream; read-only.' });
export type AuditInfo = z.infer<typeof auditInfoSchema>;

/** `from` must not be after `to` when both are given. */
export function periodRule(fromKey: string, toKey: string) {
  return (fields: Record<string, unknown>, at: readonly string[] = []): string[] => {
    const from = fields[fromKey];
    const to = fields[toKey];
    if (typeof from === 'string' && typeof to === 'string' && Date.parse(from) > Date.parse(to)) {
      return [`${[...at, toKey].join('.')}: must not be before ${fromKey}`];
    }
    return [];
  };
}
