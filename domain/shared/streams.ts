// Stream names: `<category>-<id>` (`userGroupType-6f1c…`). The category is the part before the
// first dash, so a category never holds one; the id is the rest. The one place that spells or
// reads the format.

import type { z } from 'zod';

export const streamName = (category: string, id: string): string => `${category}-${id}`;

/** The category of a stream (the whole name when it has no dash). */
export function categoryOf(stream: string): string {
  const dash = stream.indexOf('-');
  return dash < 0 ? stream : stream.slice(0, dash);
}

/** The id within its category of a stream of that category, else undefined. */
export function idIn(category: string, stream: string): string | undefined {
  return stream.startsWith(`${category}-`) ? stream.slice(category.length + 1) : undefined;
}

/** A stream a module writes beside its records' streams (a user's failed logins, an ended login
 * session): its category, what it holds and its event types, for the event catalogue. Its events
 * change no record, so a record's version (its ETag) does not move with them. */
export type StreamDeclaration = {
  readonly category: string;
  /** How its streams are named and what one holds. */
  readonly description: string;
  readonly events: Readonly<Record<string, { readonly meaning: string; readonly data: z.ZodType }>>;
};
