// Field schemas shared by every resource. Date-times are normalised to UTC `toISOString()` form on
// the way in, so stored values sort and compare chronologically as strings in every read store.

import { z } from 'zod';

/** Stored in lower case (UUIDs do not distinguish case), so an EQ filter finds one however it was sent. */
export const uuid = () =>
  z
    .uuid({ error: 'wrong UUID format, expected type uuid' })
    .overwrite((s) => s.toLowerCase())
    .meta({ description: 'A UUID; stored and returned in lower case.' });

/** A JSON Schema pattern of what zod's ISO format accepts, with at most `digits` fractional
 * digits of a second beyond which only zeros may follow (what dateTime keeps). */
const isoPattern = (schema: z.ZodType, digits?: number): string => {
  const { pattern } = z.toJSONSchema(schema) as { pattern?: string };
  if (pattern === undefined) throw new Error('zod gave no pattern for an ISO format');
  return digits === undefined ? pattern : pattern.replace('(?:\\.\\d+)?', `(?:\\.\\d{1,${String(digits)}}0*)?`);
};
const DATE_TIME_PATTERN = isoPattern(z.iso.datetime({ offset: true, local: false }), 3);
const DAY_OR_DATE_TIME_PATTERN = `^(?:${isoPattern(z.iso.date()).slice(1, -1)}|${DATE_TIME_PATTERN.slice(1, -1)})$`;

export const dateTime = (error = 'expected an ISO 8601 date-time with a time zone') =>
  z.iso
    .datetime({ offset: true, local: false, error })
    // Milliseconds are what is kept: finer digits would be dropped, so they are refused instead
    // (zeros after the third are no loss).
    .refine((s) => !/\.\d{3}\d*[1-9]/.test(s), { error: 'at most millisecond precision (3 fractional digits)' })
    // Runs even when the format check failed; leave such values alone for the 400 to name them.
    .overwrite((s) => {
      const t = Date.parse(s);
      return Number.isNaN(t) ? s : new Date(t).toISOString();
    })
    .meta({
      pattern: DATE_TIME_PATTERN,
      description: 'ISO 8601 date-time with a time zone, at most millisecond precision; stored and returned in UTC (…Z).',
    });

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

/** Any JSON value. One instance, named in the schema registry: every map of JSON values refers to
 * one OpenAPI component (a fresh recursive schema per field made an unresolvable `__shared` ref). */
// Registered as it is (`.meta()` would name a copy, while the recursion refers to the original).
export const jsonValue = z.json();
z.globalRegistry.add(jsonValue, { id: 'JsonValue', description: 'Any JSON value.' });

/** A map of string to any JSON value: `Map<String, Object>` in the source specification. */
export const jsonMap = () => z.record(z.string().max(255), jsonValue);

export const stringList = (maxItems = 1000) => z.array(z.string().max(255)).max(maxItems);

export const localizationData = () =>
  z.record(
    z.string().regex(/^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$/, { error: 'expected a language code such as cs or en' }),
    z.strictObject({ name: z.string().max(255).optional(), description: z.string().max(4000).optional() }),
  );

export const auditInfoSchema = z
  .strictObject({ version: z.int(), whoInserted: z.string(), whenInserted: z.string(), whoEdited: z.string(), whenEdited: z.string() })
  .meta({ id: 'AuditInfo', description: "Derived from the record's event stream; read-only." });
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

/** An e-mail address as mail systems take it (one @, a dotted domain, no spaces). */
export const email = () =>
  z
    .email({ error: 'expected an e-mail address such as name@example.com' })
    .max(254)
    .meta({ description: 'An e-mail address (RFC 5321 length, at most 254 characters).' });

/** An absolute http(s) URL. */
export const webUrl = () =>
  z
    .url({ protocol: /^https?$/, hostname: z.regexes.domain, error: 'expected an absolute http or https URL with a host name' })
    .max(2048)
    .meta({ description: 'An absolute http or https URL.' });

/** A phone number: digits with an optional leading +, spaces, dashes, dots and parentheses. */
export const phoneNumber = () =>
  z
    .string()
    .max(50)
    .regex(/^\+?[0-9][0-9 ().-]{2,48}$/, {
      error: 'expected a phone number: digits, an optional leading +, spaces, dashes, dots, parentheses',
    });

/** A day (`yyyy-MM-dd`) or a date-time. A day is taken in UTC, as its first millisecond for the
 * start of a period and its last for the end, so a period `validFrom`..`validTo` given in days
 * includes both days; stored and returned as a date-time. */
export const dayOrDateTime = (edge: 'start' | 'end') =>
  z
    .string()
    .max(64)
    .overwrite((s) => (/^\d{4}-\d{2}-\d{2}$/.test(s) ? `${s}T${edge === 'start' ? '00:00:00.000' : '23:59:59.999'}Z` : s))
    .pipe(dateTime('expected a day (yyyy-MM-dd) or an ISO 8601 date-time with a time zone'))
    .meta({
      'x-column-type': 'date-time',
      pattern: DAY_OR_DATE_TIME_PATTERN,
      description: `A day (yyyy-MM-dd, taken in UTC as its ${edge === 'start' ? 'first' : 'last'} millisecond) or an ISO 8601 date-time with a time zone; stored and returned as a date-time in UTC.`,
    });

/** Whether now lies in a period whose ends are optional date-times. */
export const withinPeriod = (from: unknown, to: unknown, now: Date): boolean =>
  (typeof from !== 'string' || Date.parse(from) <= now.getTime()) && (typeof to !== 'string' || now.getTime() <= Date.parse(to));

/** A list whose items must differ (400 naming the first repeated one). */
export const distinct = <T extends z.ZodArray<z.ZodString>>(list: T) =>
  list.superRefine((items, ctx) => {
    const seen = new Set<string>();
    for (const [i, item] of items.entries()) {
      if (seen.has(item)) {
        ctx.addIssue({ code: 'custom', path: [i], message: `${JSON.stringify(item.slice(0, 100))} is listed twice` });
        return;
      }
      seen.add(item);
    }
  });

/** Whether a text is base64 (whitespace ignored): checked in time and stack linear in its length
 * (a grouped, repeated pattern recurses per group in V8 and overflows on megabytes). */
export function isBase64(text: string): boolean {
  const compact = text.replace(/\s+/g, '');
  return compact.length % 4 === 0 && /^[A-Za-z0-9+/]*={0,2}$/.test(compact);
}
