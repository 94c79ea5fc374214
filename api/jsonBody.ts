// Request bodies as JSON, refused rather than changed: the declared charset must be UTF-8 and the
// bytes valid UTF-8 (a decoder would put U+FFFD in place of what was sent), no content coding the
// service does not undo, no member repeated, no member name that could reach a prototype
// (`__proto__`, `constructor.prototype`: refused by fastify's parser, named here by path), only
// numbers JSON carries exactly, strings of well-formed Unicode, and bounded nesting and size
// (schemas walk every value).

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { DomainError, validationFailed } from '../domain/shared/errors.ts';
import { holdsMoreValuesThan } from '../domain/shared/json.ts';
import { scanJsonText } from '../domain/shared/jsonText.ts';
import { jsonProblem } from './errorHandler.ts';

const MAX_JSON_DEPTH = 32;
const MAX_JSON_VALUES = 50_000;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

const unsupported = (message: string): DomainError => new DomainError('HTTP.UNSUPPORTED_MEDIA_TYPE', message);

/** The body as text, or the 4xx that says why it cannot be read as sent. */
function bodyText(request: FastifyRequest, body: Buffer): string {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)"?/i.exec(request.headers['content-type'] ?? '')?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    throw unsupported(`JSON bodies are UTF-8; charset=${charset.slice(0, 40)} is not supported`);
  }
  const coding = request.headers['content-encoding']?.trim().toLowerCase();
  if (coding !== undefined && coding !== '' && coding !== 'identity') {
    throw unsupported(`Content-Encoding ${coding.slice(0, 40)} is not supported: send the body uncompressed`);
  }
  try {
    return utf8.decode(body);
  } catch {
    throw validationFailed('The body is not valid UTF-8', ['(body): bytes that are not UTF-8']);
  }
}

/** A string with a lone surrogate (only a \u escape can make one in JSON) cannot be stored or
 * searched as sent: SQLite and MongoDB keep UTF-8. */
function illFormedString(text: string, value: unknown): boolean {
  if (!/\\u[dD][89a-fA-F]/.test(text)) return false;
  const stack: unknown[] = [value];
  for (let v = stack.pop(); v !== undefined || stack.length > 0; v = stack.pop()) {
    if (typeof v === 'string' && !v.isWellFormed()) return true;
    if (typeof v === 'object' && v !== null) for (const [k, child] of Object.entries(v)) stack.push(k, child);
  }
  return false;
}

type TextProblem = DomainError & { unparsed?: true; prototypeKey?: true };

/** What the text shows before it is parsed (parsing a million empty arrays takes a while too). */
function textProblem(text: string, maxValues: number): TextProblem | undefined {
  const scan = scanJsonText(text, MAX_JSON_DEPTH, 20, maxValues, { refusePrototypeKeys: true });
  if (scan.errors.length === 0) return undefined;
  // Too many values: refused without parsing them (a million empty arrays take a while to parse).
  if (scan.tooMany)
    return Object.assign(validationFailed(`JSON holds more than ${String(maxValues)} values`, scan.errors), { unparsed: true as const });
  if (scan.tooDeep) return validationFailed(`JSON nests deeper than ${String(MAX_JSON_DEPTH)} levels`, scan.errors);
  const member = scan.forbiddenMember;
  if (member !== undefined) {
    return Object.assign(
      validationFailed(`JSON member name not allowed: "${member.name}" at position ${String(member.position)}`, scan.errors),
      { prototypeKey: true as const },
    );
  }
  return validationFailed('JSON would not be stored as sent', scan.errors);
}

/** The scan's refusal when the parser refused a well-formed text for a member name; else what the
 * parser found and where (fastify's parser says only that the body is not valid JSON, so JSON.parse
 * says it again), never a stretch of the text: a body may hold a password. */
function parserRefusal(error: Error, text: string, early: TextProblem | undefined): Error {
  // Only its refusal of a text: an empty body keeps its own answer.
  if ((error as { code?: unknown }).code !== 'FST_ERR_CTP_INVALID_JSON_BODY') return error;
  try {
    JSON.parse(text);
  } catch (syntax) {
    return syntax instanceof SyntaxError ? new DomainError('HTTP.BAD_REQUEST', `Malformed JSON: ${jsonProblem(syntax.message)}`) : error;
  }
  return early?.prototypeKey === true ? early : error;
}

function valueProblem(text: string, value: unknown, maxValues: number): DomainError | undefined {
  // The scan counts separators, not scalars: the exact count, once parsed, stays the bound.
  if (holdsMoreValuesThan(value, maxValues)) {
    return validationFailed(`JSON holds more than ${String(maxValues)} values`, [
      `(body): at most ${String(maxValues)} values (objects, arrays, strings, numbers, booleans and nulls)`,
    ]);
  }
  if (illFormedString(text, value)) {
    return validationFailed('JSON holds a string that is not well-formed Unicode', [
      '(body): a \\u escape of a lone surrogate (half of a pair)',
    ]);
  }
  return undefined;
}

/** JSON only: a text/plain body is a 415, not a string handed to the schema. */
export function installJsonParsing(app: FastifyInstance): void {
  app.removeContentTypeParser(['text/plain', 'application/json']);
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser(['application/json', 'application/merge-patch+json'], { parseAs: 'buffer' }, (request, body, done) => {
    // Clients send Content-Type: application/json on every call: an empty body where the route
    // takes none (a DELETE, an action) is no body. A route with a body schema still refuses it.
    if ((body as Buffer).length === 0 && request.routeOptions.schema?.body === undefined) {
      done(null, undefined);
      return;
    }
    let text: string;
    try {
      text = bodyText(request, body as Buffer);
    } catch (error) {
      done(error as Error);
      return;
    }
    // A route carrying whole data sets (export/diff, diff/apply) allows more, within its body limit.
    const maxValues = request.routeOptions.config.maxJsonValues ?? MAX_JSON_VALUES;
    const early = textProblem(text, maxValues);
    if (early?.unparsed === true) {
      done(early);
      return;
    }
    void parseJson(request, text, (error: Error | null, value?: unknown) => {
      // A malformed text keeps the parser's own message; the scan's problems come after it.
      if (error) done(parserRefusal(error, text, early));
      else {
        const refused = early ?? valueProblem(text, value, maxValues);
        if (refused) done(refused);
        else done(null, value);
      }
    });
  });
}
