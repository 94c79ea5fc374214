// The one template engine of the service (formatter templates now, notification templates next):
// handlebars on an isolated instance (no prototype access, no partials, no decorators, only the
// helpers below), HTML escaping for HTML and EMAIL documents; and JSONata (evaluated, never run as
// code, within a time and depth budget) for SCRIPT templates. Templates are checked when saved:
// a text that does not compile is refused with its line and column, not found at render time.

import Handlebars from 'handlebars';
import jsonata from 'jsonata';
import { DomainError } from '../../../domain/shared/errors.ts';
import { documentTooLarge } from './documents.ts';

const engine = Handlebars.create();

type HelperOptions = { hash?: Record<string, unknown> };
const isOptions = (v: unknown): v is HelperOptions => typeof v === 'object' && v !== null && 'hash' in v;
/** A helper's positional arguments without handlebars' trailing options object. */
const positional = (args: unknown[]): unknown[] => (args.length > 0 && isOptions(args.at(-1)) ? args.slice(0, -1) : args);
const hashOf = (args: unknown[]): Record<string, unknown> => {
  const last = args.at(-1);
  return isOptions(last) ? (last.hash ?? {}) : {};
};
const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
/** A scalar as text; objects and arrays as JSON (never "[object Object]"). */
function asText(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  return v === undefined || v === null || typeof v === 'function' || typeof v === 'symbol' ? '' : JSON.stringify(v);
}

/** The helpers a template may call; their names are the only ones the compiler knows. */
export const HELPERS: Readonly<Record<string, (...args: unknown[]) => unknown>> = {
  /** {{formatDate value "Europe/Prague" "cs-CZ" dateStyle="long" timeStyle="short"}} */
  formatDate: (...args) => {
    const [value, timeZone, locale] = positional(args);
    const hash = hashOf(args);
    if (value === undefined || value === null || value === '') return '';
    const date = new Date(typeof value === 'number' ? value : asText(value));
    if (Number.isNaN(date.getTime())) return asText(value);
    const dateStyle = (text(hash.dateStyle) ?? 'medium') as Intl.DateTimeFormatOptions['dateStyle'];
    const timeStyle =
      hash.timeStyle === 'none' ? undefined : ((text(hash.timeStyle) ?? 'short') as Intl.DateTimeFormatOptions['timeStyle']);
    return new Intl.DateTimeFormat(text(locale) ?? 'en-GB', {
      timeZone: text(timeZone) ?? 'UTC',
      dateStyle,
      ...(timeStyle === undefined ? {} : { timeStyle }),
    }).format(date);
  },
  /** {{formatNumber value "cs-CZ" minimumFractionDigits=2 style="currency" currency="CZK"}} */
  formatNumber: (...args) => {
    const [value, locale] = positional(args);
    const hash = hashOf(args);
    const n = typeof value === 'number' ? value : Number(value);
    if (value === undefined || value === null || value === '' || Number.isNaN(n)) return value ?? '';
    const digits = (k: string) => (typeof hash[k] === 'number' ? { [k]: Math.min(20, Math.max(0, hash[k])) } : {});
    return new Intl.NumberFormat(text(locale) ?? 'en-GB', {
      ...digits('minimumFractionDigits'),
      ...digits('maximumFractionDigits'),
      ...(hash.style === 'percent' || hash.style === 'currency' ? { style: hash.style } : {}),
      ...(typeof hash.currency === 'string' ? { currency: hash.currency } : {}),
    }).format(n);
  },
  eq: (...args) => {
    const [a, b] = positional(args);
    return a === b;
  },
  default: (...args) => {
    const [value, fallback] = positional(args);
    return value === undefined || value === null || value === '' ? fallback : value;
  },
  join: (...args) => {
    const [list, separator] = positional(args);
    return Array.isArray(list) ? list.map(asText).join(typeof separator === 'string' ? separator : ', ') : '';
  },
  upper: (...args) => asText(positional(args)[0]).toUpperCase(),
  lower: (...args) => asText(positional(args)[0]).toLowerCase(),
};
for (const [name, helper] of Object.entries(HELPERS)) engine.registerHelper(name, helper);
// The built-ins that reach beyond the data given: none may be used.
for (const name of ['log', 'lookup', 'helperMissing', 'blockHelperMissing']) engine.unregisterHelper(name);
const KNOWN = { ...Object.fromEntries(Object.keys(HELPERS).map((k) => [k, true])), if: true, unless: true, each: true, with: true };

export type TemplateMode = 'html' | 'text';

/** Why a template text does not compile, as `content: line L, column C: reason` lines. */
export function handlebarsProblems(source: string, field = 'content'): string[] {
  try {
    const ast = engine.parse(source);
    const problems: string[] = [];
    walkAst(ast, (node) => {
      if (node.type === 'PartialStatement' || node.type === 'PartialBlockStatement')
        problems.push(
          `${field}: line ${String(node.loc.start.line)}, column ${String(node.loc.start.column + 1)}: partials are not available`,
        );
      if (node.type === 'Decorator' || node.type === 'DecoratorBlock')
        problems.push(
          `${field}: line ${String(node.loc.start.line)}, column ${String(node.loc.start.column + 1)}: decorators are not available`,
        );
      const helper = helperCalled(node);
      if (helper !== undefined && !Object.hasOwn(KNOWN, helper)) {
        problems.push(
          `${field}: line ${String(node.loc.start.line)}, column ${String(node.loc.start.column + 1)}: no helper ${JSON.stringify(helper)} (available: ${Object.keys(KNOWN).join(', ')})`,
        );
      }
    });
    if (problems.length === 0) engine.precompile(source, { knownHelpers: KNOWN, knownHelpersOnly: true, strict: false });
    return problems;
  } catch (error) {
    const e = error as Error & { lineNumber?: number; column?: number };
    // The parser's lexer (not in the type declarations) keeps where it stopped.
    const loc = (Handlebars as unknown as { Parser?: { lexer?: { yylloc?: { first_line?: number; first_column?: number } } } }).Parser
      ?.lexer?.yylloc;
    const line = e.lineNumber ?? loc?.first_line ?? 1;
    const column = e.column !== undefined ? e.column + 1 : (loc?.first_column ?? 0) + 1;
    const reason = e.message.split('\n').find((l) => l.startsWith('Expecting')) ?? e.message.split('\n')[0] ?? 'does not compile';
    return [`${field}: line ${String(line)}, column ${String(column)}: ${reason.replace(/ - \d+:\d+$/, '')}`];
  }
}

type AstNode = { type: string; loc: { start: { line: number; column: number } }; [k: string]: unknown };

/** The helper a node calls: a block, a subexpression, or a mustache with arguments. */
function helperCalled(node: AstNode): string | undefined {
  if (!['MustacheStatement', 'SubExpression', 'BlockStatement'].includes(node.type)) return undefined;
  const params = Array.isArray(node.params) ? node.params.length : 0;
  const hashed = typeof node.hash === 'object' && node.hash !== null;
  if (node.type === 'MustacheStatement' && params === 0 && !hashed) return undefined;
  const path = node.path as { original?: unknown } | undefined;
  return typeof path?.original === 'string' ? path.original : undefined;
}
function walkAst(node: unknown, visit: (n: AstNode) => void): void {
  if (Array.isArray(node)) {
    for (const n of node) walkAst(n, visit);
    return;
  }
  if (typeof node !== 'object' || node === null) return;
  const n = node as AstNode;
  if (typeof n.type === 'string' && typeof n.loc === 'object') visit(n);
  for (const key of ['body', 'program', 'inverse', 'params', 'hash', 'pairs', 'value']) walkAst(n[key], visit);
}

/** Why a JSONata expression does not parse, as `content: line L, column C: reason` lines. */
export function jsonataProblems(source: string, field = 'content'): string[] {
  try {
    jsonata(source);
    return [];
  } catch (error) {
    const e = error as { message?: string; position?: number };
    const upTo = source.slice(0, e.position ?? 0);
    const line = upTo.split('\n').length;
    const column = (e.position ?? 0) - upTo.lastIndexOf('\n');
    return [`${field}: line ${String(line)}, column ${String(column)}: ${e.message ?? 'does not parse'}`];
  }
}

type Compiled = (data: unknown) => string;
const CACHE_SIZE = 500;

/** Compiled templates by template (id, or a preview text's hash) and mode: one version each, so a
 * template's new version replaces its old compiled form. Bounded: the oldest go first. Whoever
 * evaluates templates owns one (a template worker thread its own), so nothing is kept per process. */
export class CompiledTemplates {
  readonly #cache = new Map<string, { version: number; run: Compiled }>();

  /** A template compiled once per (template, version). */
  of(template: { key: string; version: number }, source: string, mode: TemplateMode): Compiled {
    const cacheKey = `${mode}|${template.key}`;
    const hit = this.#cache.get(cacheKey);
    if (hit?.version === template.version) return hit.run;
    const problems = handlebarsProblems(source);
    if (problems.length > 0) throw new DomainError('FORMATTER.TEMPLATE_INVALID', 'The template does not compile', problems);
    const fn = engine.compile(source, { knownHelpers: KNOWN, knownHelpersOnly: true, noEscape: mode === 'text', strict: false });
    const run: Compiled = (data) =>
      fn(data, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false, allowCallsToHelperMissing: false });
    this.#cache.delete(cacheKey);
    if (this.#cache.size >= CACHE_SIZE) this.#cache.delete(this.#cache.keys().next().value ?? '');
    this.#cache.set(cacheKey, { version: template.version, run });
    return run;
  }
}

const renderFailed = (error: unknown): DomainError =>
  // A text past the longest string the engine can hold (about 512 MiB) is a document too large.
  error instanceof RangeError && error.message.startsWith('Invalid string length')
    ? documentTooLarge('longer than a string can be')
    : new DomainError('FORMATTER.RENDER_FAILED', 'The template could not be rendered with this data', [
        error instanceof Error ? (error.message.split('\n')[0] ?? 'render failed') : String(error),
      ]);

/** Renders a handlebars template over data: HTML-escaped in 'html' mode. */
export function renderHandlebars(
  compiled: CompiledTemplates,
  template: { key: string; version: number },
  source: string,
  data: unknown,
  mode: TemplateMode,
): string {
  const run = compiled.of(template, source, mode);
  try {
    return run(data);
  } catch (error) {
    throw renderFailed(error);
  }
}

/** Budget of a JSONata evaluation: wall time and call depth. */
export const JSONATA_LIMITS = { timeoutMs: 1000, maxDepth: 500 } as const;

/** Evaluates a JSONata expression over data; the result must be text (the document's source). */
export async function renderJsonata(source: string, data: unknown): Promise<string> {
  let expression: ReturnType<typeof jsonata>;
  try {
    expression = jsonata(source);
  } catch {
    throw new DomainError('FORMATTER.TEMPLATE_INVALID', 'The expression does not parse', jsonataProblems(source));
  }
  const started = Date.now();
  let depth = 0;
  // jsonata calls these hooks around every evaluation step when they are bound under its symbols.
  const hook = expression.assign.bind(expression) as unknown as (name: symbol, value: unknown) => void;
  hook(Symbol.for('jsonata.__evaluate_entry'), () => {
    depth += 1;
    if (depth > JSONATA_LIMITS.maxDepth) throw new Error(`the expression nests deeper than ${String(JSONATA_LIMITS.maxDepth)} calls`);
    if (Date.now() - started > JSONATA_LIMITS.timeoutMs)
      throw new Error(`the expression ran longer than ${String(JSONATA_LIMITS.timeoutMs)} ms`);
  });
  hook(Symbol.for('jsonata.__evaluate_exit'), () => {
    depth -= 1;
  });
  let result: unknown;
  try {
    result = await expression.evaluate(data);
  } catch (error) {
    throw renderFailed(error);
  }
  if (typeof result !== 'string')
    throw renderFailed(new Error(`the expression gave ${result === undefined ? 'nothing' : typeof result}, not text`));
  return result;
}
