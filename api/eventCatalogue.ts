// The event catalogue (docs/events.md), written from the declarations: every event type of every
// resource the modules serve, with its schema version, its data and what it means, and every own
// command. Auditors read the log and the audit feed through it, and Kafka consumers the topics.
// `npm run docs` writes it; a test fails while the committed file differs.

import { z } from 'zod';
import type { CommandDeclaration, EventSpec, ResourceDefinition, SharedEventKind } from '../domain/resource/defineResource.ts';
import { SCHEMA_VERSION } from '../domain/resource/decider.ts';
import type { StreamDeclaration } from '../domain/shared/streams.ts';
import type { Module } from './module.ts';

type JsonSchema = {
  type?: string;
  format?: string;
  enum?: unknown[];
  const?: unknown;
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  required?: string[];
  description?: string;
  $ref?: string;
  anyOf?: JsonSchema[];
};

/** A member's type in a line: `string (date-time)`, `"PLAN" | "SENT"`, `array of string (uuid)`. */
function typeText(s: JsonSchema): string {
  if (s.$ref !== undefined) return s.$ref.replace('#/$defs/', '');
  if (s.enum !== undefined) return s.enum.map((v) => JSON.stringify(v)).join(' \\| ');
  if (s.anyOf !== undefined) return s.anyOf.map(typeText).join(' \\| ');
  if (s.type === 'array') return `array of ${s.items === undefined ? 'any' : typeText(s.items)}`;
  if (s.type === 'object' && s.properties === undefined && typeof s.additionalProperties === 'object')
    return `map of ${typeText(s.additionalProperties)}`;
  if (s.type === 'object') return `object {${Object.keys(s.properties ?? {}).join(', ')}}`;
  return s.format === undefined ? (s.type ?? 'any') : `${s.type ?? 'string'} (${s.format})`;
}

const cell = (text: string): string => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The members of an object schema as a table, or a line saying it carries none. */
function membersTable(schema: z.ZodType): string[] {
  const json = z.toJSONSchema(schema, { io: 'output', unrepresentable: 'any' }) as JsonSchema;
  const members = Object.entries(json.properties ?? {});
  if (members.length === 0) return ['Data: none.', ''];
  const required = new Set(json.required ?? []);
  return [
    '| Member | Type | Required | Description |',
    '| --- | --- | --- | --- |',
    ...members.map(([name, s]) => `| \`${name}\` | ${typeText(s)} | ${required.has(name) ? 'yes' : 'no'} | ${cell(s.description ?? '')} |`),
    '',
  ];
}

/** What each shared kind holds and means, whatever the resource. */
const SHARED: Readonly<Record<SharedEventKind, { data: string; meaning: string }>> = {
  Created: { data: 'the new record: `id` and its fields', meaning: 'was made' },
  Replaced: {
    data: "the record's fields after the change",
    meaning: 'was replaced (PUT, an import or a diff apply), or changed by a patch a merge patch cannot say',
  },
  Patched: { data: '`patch`: the RFC 7396 merge patch from the record before to after', meaning: 'was changed by a merge patch (PATCH)' },
  Deleted: { data: 'the carried fields only', meaning: 'was deleted' },
};

function sharedLine(def: ResourceDefinition, type: string, spec: EventSpec & { kind: SharedEventKind }): string {
  const carried = def.carried.length === 0 ? '' : `, and ${def.carried.map((f) => `\`${f}\``).join(', ')}`;
  const data = spec.kind === 'Deleted' && carried === '' ? 'nothing' : `${SHARED[spec.kind].data}${carried}`;
  const meaning = spec.meaning ?? `A ${def.name} ${SHARED[spec.kind].meaning}.`;
  const hidden = def.hidden.length === 0 ? '' : ` Never holds ${def.hidden.map((f) => `\`${f}\``).join(', ')} (set by own events only).`;
  return `| \`${type}\` | ${String(spec.schemaVersion ?? SCHEMA_VERSION)} | ${cell(meaning)} | ${data}.${hidden} |`;
}

function resourceSection(def: ResourceDefinition): string[] {
  const events = Object.entries(def.events);
  const own = events.filter(([, e]) => e.kind === 'Own');
  const lines = [
    `### ${def.name}`,
    '',
    `Stream \`${def.category}-<id>\`; record schema \`${def.name}\` in openapi.json (\`/api/v1/${def.path}\`).`,
    '',
    '| Event | Version | Meaning | Data |',
    '| --- | --- | --- | --- |',
    ...events.map(([type, e]) =>
      e.kind === 'Own'
        ? `| \`${type}\` | ${String(e.schemaVersion ?? SCHEMA_VERSION)} | ${cell(e.meaning ?? '')} | below |`
        : sharedLine(def, type, { ...e, kind: e.kind }),
    ),
    '',
  ];
  for (const [type, e] of own) {
    const carried = def.carried.length === 0 ? '' : ` It also carries ${def.carried.map((f) => `\`${f}\``).join(', ')}.`;
    lines.push(`#### ${type}`, '', `${e.meaning ?? ''}${carried}`, '', ...(e.data === undefined ? [] : membersTable(e.data)));
  }
  const commands: [string, CommandDeclaration][] = Object.entries(def.commands);
  if (commands.length > 0) {
    lines.push(
      `#### Commands of ${def.name}`,
      '',
      'Not events: what the service asks of the record (its routes and workers); each is decided on the live record and writes the events above, or nothing.',
      '',
    );
    for (const [type, c] of commands) lines.push(`**${type}**: ${c.meaning}`, '', ...membersTable(c.data));
  }
  return lines;
}

/** A stream a module writes beside its records' (StreamDeclaration): its events, which change no record. */
function streamSection(stream: StreamDeclaration): string[] {
  const lines = [
    `### Stream ${stream.category}`,
    '',
    stream.description,
    '',
    '| Event | Version | Meaning | Data |',
    '| --- | --- | --- | --- |',
  ];
  const events = Object.entries(stream.events);
  lines.push(...events.map(([type, e]) => `| \`${type}\` | ${String(SCHEMA_VERSION)} | ${cell(e.meaning)} | below |`), '');
  for (const [type, e] of events) lines.push(`#### ${type}`, '', ...membersTable(e.data));
  return lines;
}

export type EventCatalogue = { text: string; events: number; commands: number };

export function eventCatalogue(modules: readonly Module[]): EventCatalogue {
  const sections: string[] = [];
  let events = 0;
  let commands = 0;
  for (const module of modules) {
    const defs = (module.resources ?? []).map((r) => r.definition);
    const streams = module.streams ?? [];
    if (defs.length === 0 && streams.length === 0) continue;
    sections.push(`## Module ${module.name}`, '');
    for (const def of defs) {
      events += Object.keys(def.events).length;
      commands += Object.keys(def.commands).length;
      sections.push(...resourceSection(def));
    }
    for (const stream of streams) {
      events += Object.keys(stream.events).length;
      sections.push(...streamSection(stream));
    }
  }
  const head = [
    '# Event catalogue',
    '',
    '<!-- Generated by `npm run docs` from the `events` and `commands` each resource declares (defineResource). Do not edit: a test fails while this file differs. -->',
    '',
    `${String(events)} event types and ${String(commands)} command types. Every event is appended to the stream of its record, \`<category>-<id>\` (or of a stream a module declares beside its records), with ` +
      'metadata: `actor` and `at` always, and `requestId`, `correlationId`, `causationId`, `idempotencyKey`, `requestHash` when the request had them. ' +
      "An event's data is stored in its type's schema version at the time; the service reads an older one through that type's upcasters, so " +
      'consumers of the log should do the same (the audit feed and history show the current shape). Names never change: a new meaning is a new type.',
    '',
    'Every resource has the four shared event types (Created, Replaced, Patched, Deleted), whether or not its routes offer the operation; ' +
      'a change that changes nothing writes no event. Hidden parts (a password hash) are in the log but never in history or the audit feed.',
    '',
  ];
  return { text: `${[...head, ...sections].join('\n').trimEnd()}\n`, events, commands };
}
