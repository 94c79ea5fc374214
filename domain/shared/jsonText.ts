// Reads the text of a JSON request body before JSON.parse does, to refuse what parsing would
// change without a trace: numbers a double cannot hold exactly (a stored 12345678901234567890
// would read back as 12345678901234567000) and keys given twice (the last one would win). Only the
// text still shows either, so this has to look at the text, not at the parsed value.
//
// One pass, no recursion, strings skipped with indexOf: a body may be megabytes (a second pass
// runs only to name a number the first could not settle in bulk, see scanJsonText). It is no
// validator: syntax is the parser's to judge, and whatever this says about a text the parser
// refuses is never shown. What it cannot follow in a text the parser accepts becomes an error
// line, so a document it misread is refused rather than let through unchecked.

import { issuePath } from './validation.ts';

export type JsonTextReport = {
  /** One line per problem, `path: what`, at most `maxErrors` of them. */
  readonly errors: readonly string[];
  /** Containers nest deeper than allowed; the scan stopped there. */
  readonly tooDeep: boolean;
  /** More values than allowed (counted as containers and separators); the scan stopped there. */
  readonly tooMany: boolean;
  /** With `refusePrototypeKeys`: the first member name refused, and the position of its quote. */
  readonly forbiddenMember?: { readonly name: string; readonly position: number };
};

export type JsonTextOptions = {
  /** Report `__proto__` members, and `prototype` members of a `constructor` object: the members
   * fastify's JSON parser refuses (its protoAction and constructorAction `error`). JSON.parse keeps
   * them as data, but merged into another object they could reach a prototype. */
  readonly refusePrototypeKeys?: boolean;
};

type Frame = {
  array: boolean;
  /** Arrays: the index of the current element. */
  index: number;
  /** Objects: the current member's key. */
  key: string;
  /** Objects: the distinct keys read so far, in order: the first `count` entries (the arrays are
   * reused, never truncated). */
  names: string[];
  count: number;
  /** Objects with many keys that differ from `shape`: the keys read so far. */
  keys: Set<string> | undefined;
  /** The keys of the last object closed at this depth, the first `shapeCount` entries. Objects in
   * an array mostly repeat their keys in the same order; while they do, a key is known new by
   * comparing it with one string, without slicing or hashing it. */
  shape: string[];
  shapeCount: number;
  /** Whether this object's keys so far are the first ones of `shape`. */
  prefix: boolean;
};

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

// A decimal of at most 15 significant digits (DBL_DIG) well inside the normal range of a double
// reads back as written, so most numbers are settled without converting them.
const MAX_EXACT_DIGITS = 15;
const MAX_EXACT_MAGNITUDE = 300;
const MAX_EXPONENT_DIGITS = 4;
// Up to this many keys, comparing a key with each one read is cheaper than hashing it.
const SMALL_OBJECT = 8;
// Numbers checked in batches this big keep the batches' garbage young.
const DEFERRED_BATCH = 2048;
const SHOWN_CHARS = 40;

const isDigit = (c: number): boolean => c >= ZERO && c <= NINE;
const isLetter = (c: number): boolean => c >= 0x61 && c <= 0x7a;
const shorten = (s: string): string => (s.length > SHOWN_CHARS ? `${s.slice(0, SHOWN_CHARS)}…` : s);

/** Problems of a JSON text that parsing would hide: inexact numbers, duplicate keys, and
 * nesting deeper than `maxDepth` containers. */
export function scanJsonText(
  text: string,
  maxDepth: number,
  maxErrors = 20,
  maxValues = Number.POSITIVE_INFINITY,
  options: JsonTextOptions = {},
): JsonTextReport {
  const limits = { maxDepth, maxErrors, maxValues, refusePrototypeKeys: options.refusePrototypeKeys === true };
  const quick = scan(text, new Scan(text, limits, false));
  // Converting numbers one by one is the slow part, so the quick pass checks the numbers it could
  // not settle all at once; only when one of them fails is the text scanned again, checking each
  // number where it stands, to name it.
  const done = quick.tooMany || quick.deferredReadBack() ? quick : scan(text, new Scan(text, limits, true));
  return {
    errors: done.errors,
    tooDeep: done.tooDeep,
    tooMany: done.tooMany,
    ...(done.forbiddenMember === undefined ? {} : { forbiddenMember: done.forbiddenMember }),
  };
}

function scan(text: string, state: Scan): Scan {
  const end = text.length;
  // fastify's parser drops a leading byte order mark, so the scan must too.
  let pos = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  while (pos < end && !state.full) {
    const c = text.charCodeAt(pos);
    switch (c) {
      case 0x20: // space, tab, line feed, carriage return, colon: nothing to track
      case 0x09:
      case 0x0a:
      case 0x0d:
      case 0x3a:
        pos++;
        break;
      case QUOTE:
        pos = state.string(pos + 1);
        break;
      case 0x7b: // {
        pos = state.open(false, pos + 1);
        break;
      case 0x5b: // [
        pos = state.open(true, pos + 1);
        break;
      case 0x7d: // } and ]
      case 0x5d:
        state.close();
        pos++;
        break;
      case 0x2c: // ,
        state.comma();
        pos++;
        break;
      default:
        pos = c === MINUS || isDigit(c) ? state.number(pos) : state.other(c, pos);
    }
  }
  return state;
}

/** The state of one pass; each step takes the position and returns the next one (the text's end
 * to stop), so the loop keeps the position in a local. */
class Scan {
  readonly errors: string[] = [];
  tooDeep = false;
  tooMany = false;
  full = false;
  forbiddenMember: { name: string; position: number } | undefined;
  /** Containers opened and separators passed: about the number of values, found without parsing. */
  private values = 0;
  private readonly maxValues: number;
  private depth = 0;
  // Frames are reused by depth, so a body of many small objects allocates next to nothing.
  private readonly frames: Frame[] = [];
  private top: Frame | undefined;
  private expectKey = false;
  /** The first backslash at or after the last string's start: found once for many strings. */
  private backslash = -1;
  private readonly deferred: string[] = [];
  private deferredFailed = false;
  private readonly text: string;
  private readonly maxDepth: number;
  private readonly maxErrors: number;
  private readonly eachNumber: boolean;
  private readonly refusePrototypeKeys: boolean;

  constructor(
    text: string,
    limits: { maxDepth: number; maxErrors: number; maxValues: number; refusePrototypeKeys: boolean },
    eachNumber: boolean,
  ) {
    this.text = text;
    this.maxDepth = limits.maxDepth;
    this.maxErrors = limits.maxErrors;
    this.maxValues = limits.maxValues;
    this.refusePrototypeKeys = limits.refusePrototypeKeys;
    this.eachNumber = eachNumber;
  }

  /** Counts a value; past the bound the document is refused whole, and scanning on is no use. */
  private counted(): boolean {
    if (++this.values <= this.maxValues) return true;
    this.tooMany = true;
    this.report(`(body): at most ${String(this.maxValues)} values (objects, arrays, strings, numbers, booleans and nulls)`);
    this.full = true;
    return false;
  }

  open(array: boolean, next: number): number {
    if (!this.counted()) return this.text.length;
    if (this.depth === this.maxDepth) {
      // Refused anyway; stopping keeps the frames (and the work) bounded on a hostile document.
      this.tooDeep = true;
      this.report(`(body): at most ${this.maxDepth} levels of nesting`);
      return this.text.length;
    }
    let frame = this.frames[this.depth];
    if (frame === undefined) {
      frame = { array, index: 0, key: '', names: [], count: 0, keys: undefined, shape: [], shapeCount: 0, prefix: true };
      this.frames.push(frame);
    } else {
      frame.array = array;
      frame.index = 0;
      frame.key = '';
      frame.count = 0;
      frame.keys = undefined;
      frame.prefix = true;
    }
    this.depth++;
    this.top = frame;
    this.expectKey = !array;
    return next;
  }

  close(): void {
    const closed = this.top;
    if (closed?.array === false) {
      const { names, shape } = closed;
      closed.shape = names;
      closed.shapeCount = closed.count;
      closed.names = shape;
    }
    if (this.depth > 0) this.depth--;
    this.top = this.depth > 0 ? this.frames[this.depth - 1] : undefined;
    this.expectKey = false;
  }

  comma(): void {
    if (!this.counted()) return;
    const frame = this.top;
    if (frame?.array === true) frame.index++;
    else this.expectKey = true;
  }

  string(start: number): number {
    const { text } = this;
    if (this.backslash < start) {
      const at = text.indexOf('\\', start);
      this.backslash = at < 0 ? text.length : at;
    }
    let close = text.indexOf('"', start);
    while (close > this.backslash && isEscaped(text, close)) close = text.indexOf('"', close + 1);
    if (close < 0) return text.length; // unterminated: the parser says so
    if (this.expectKey) this.key(start, close);
    return close + 1;
  }

  private key(start: number, close: number): void {
    this.expectKey = false;
    const frame = this.top;
    if (frame === undefined) return;
    const escaped = this.backslash < close;
    const known = frame.prefix && !escaped ? sameAsShape(frame, this.text, start, close) : undefined;
    if (known !== undefined) {
      frame.names[frame.count++] = known;
      frame.key = known;
      if (this.refusePrototypeKeys) this.prototypeKey(known, start - 1);
      return;
    }
    frame.prefix = false;
    const raw = this.text.slice(start, close);
    // "a" and "\u0061" are one key to the parser, so escaped keys are compared decoded.
    const key = escaped ? decodeKey(raw) : raw;
    if (!addKey(frame, key)) this.report(`${this.path(this.depth - 1)}: duplicate key ${JSON.stringify(shorten(key))}`);
    frame.key = key;
    if (this.refusePrototypeKeys) this.prototypeKey(key, start - 1);
  }

  /** `__proto__` anywhere, `prototype` directly in the value of a `constructor` member: what
   * fastify's parser refuses (secure-json-parse), named by path. `quote` is where the name starts. */
  private prototypeKey(key: string, quote: number): void {
    const parent = this.depth >= 2 ? this.frames[this.depth - 2] : undefined;
    if (key !== '__proto__' && !(key === 'prototype' && parent?.array === false && parent.key === 'constructor')) return;
    this.forbiddenMember ??= { name: key, position: quote };
    this.report(`${this.path(this.depth)}: member name not allowed`);
  }

  number(start: number): number {
    const { text } = this;
    const negative = text.charCodeAt(start) === MINUS;
    const intStart = negative ? start + 1 : start;
    const intEnd = skipDigits(text, intStart);
    const after = text.charCodeAt(intEnd);
    // Most numbers are short integers: settled here.
    const shortInteger = intEnd - intStart <= MAX_EXACT_DIGITS && after !== DOT && (after | 0x20) !== 0x65;
    if (shortInteger && !(negative && text.charCodeAt(intStart) === ZERO)) return Math.max(intEnd, start + 1);
    const fracEnd = after === DOT ? skipDigits(text, intEnd + 1) : intEnd;
    const end = exponentEnd(text, fracEnd);
    const next = Math.max(end, start + 1);
    if (!readsBackAsWritten(text, negative, intStart, intEnd, fracEnd, exponentValue(text, fracEnd, end))) this.convert(start, next);
    return next;
  }

  /** A number the cheap test could not settle: put off to the bulk check, or checked at once. */
  private convert(start: number, end: number): void {
    const token = this.text.slice(start, end);
    if (!this.eachNumber) {
      if (this.deferred.push(token) === DEFERRED_BATCH) this.checkDeferred();
      return;
    }
    const problem = inexactNumber(token);
    if (problem !== undefined) this.report(`${this.path(this.depth)}: ${problem}`);
  }

  other(c: number, pos: number): number {
    if (!isLetter(c)) {
      this.report(`(body): unexpected character at offset ${pos}`);
      return this.text.length;
    }
    // true, false, null: the parser checks the spelling.
    let p = pos + 1;
    while (isLetter(this.text.charCodeAt(p))) p++;
    return p;
  }

  /** Whether the numbers put off all read back as written; once one may not, the pass stops. */
  deferredReadBack(): boolean {
    this.checkDeferred();
    return !this.deferredFailed;
  }

  /** Parses the numbers put off in one go and prints them back: when the text comes back
   * unchanged, spelling included, each one certainly reads back as written. A different spelling
   * of the same value (1.50, 1E3) only costs the second pass. */
  private checkDeferred(): void {
    if (this.deferred.length === 0) return;
    const written = `[${this.deferred.join(',')}]`;
    this.deferred.length = 0;
    let same: boolean;
    try {
      same = JSON.stringify(JSON.parse(written)) === written;
    } catch {
      same = false;
    }
    if (same) return;
    this.deferredFailed = true;
    this.full = true;
  }

  /** The path of the value `depth` frames down: object keys and array indexes. */
  private path(depth: number): string {
    const segments: PropertyKey[] = [];
    for (const frame of this.frames.slice(0, depth)) segments.push(frame.array ? frame.index : shorten(frame.key));
    return issuePath(segments);
  }

  private report(line: string): void {
    this.errors.push(line);
    this.full = this.errors.length >= this.maxErrors;
  }
}

/** The next key of the last object at this depth, when the text at [start, close) spells it:
 * then it is new here too, since that object's keys were distinct and so far these are its. */
function sameAsShape(frame: Frame, text: string, start: number, close: number): string | undefined {
  if (frame.count >= frame.shapeCount) return undefined;
  const next = frame.shape[frame.count];
  if (next?.length !== close - start) return undefined;
  for (let i = 0; i < next.length; i++) if (next.charCodeAt(i) !== text.charCodeAt(start + i)) return undefined;
  return next;
}

/** Records a key of an object; false when the object already had it. */
function addKey(frame: Frame, key: string): boolean {
  const { names, count } = frame;
  if (frame.keys === undefined) {
    if (count < SMALL_OBJECT) {
      for (let i = 0; i < count; i++) if (names[i] === key) return false;
      names[frame.count++] = key;
      return true;
    }
    frame.keys = new Set(names.slice(0, count));
  }
  if (frame.keys.has(key)) return false;
  frame.keys.add(key);
  names[frame.count++] = key;
  return true;
}

/** Where the exponent part of a number starting at `at`, if there is one, ends. */
function exponentEnd(text: string, at: number): number {
  if ((text.charCodeAt(at) | 0x20) !== 0x65) return at; // e or E
  const sign = text.charCodeAt(at + 1);
  return skipDigits(text, sign === MINUS || sign === PLUS ? at + 2 : at + 1);
}

/** The value of the exponent part at [from, to), 0 when there is none. Longer than a few digits
 * it is Infinity: beyond the cheap test, left to the full conversion. */
function exponentValue(text: string, from: number, to: number): number {
  if (from === to) return 0;
  const sign = text.charCodeAt(from + 1);
  const digits = sign === MINUS || sign === PLUS ? from + 2 : from + 1;
  if (to - digits > MAX_EXPONENT_DIGITS) return Infinity;
  let value = 0;
  for (let p = digits; p < to; p++) value = value * 10 + text.charCodeAt(p) - ZERO;
  return sign === MINUS ? -value : value;
}

function skipDigits(text: string, from: number): number {
  let p = from;
  while (isDigit(text.charCodeAt(p))) p++;
  return p;
}

/** Whether the quote at `at` is escaped: preceded by an odd run of backslashes. Each run is
 * counted for the one character after it, so this stays linear over the whole text. */
function isEscaped(text: string, at: number): boolean {
  let p = at - 1;
  while (text.charCodeAt(p) === BACKSLASH) p--;
  return (at - 1 - p) % 2 === 1;
}

function decodeKey(raw: string): string {
  try {
    return JSON.parse(`"${raw}"`) as string;
  } catch {
    return raw; // a bad escape: the parser refuses the text
  }
}

/** The cheap sufficient test: at most 15 significant digits, magnitude well inside the normal
 * range, not -0. False only means "convert and compare". [intStart, intEnd) are the integer
 * digits, then come the fraction's dot and digits up to fracEnd. */
function readsBackAsWritten(text: string, negative: boolean, intStart: number, intEnd: number, fracEnd: number, exponent: number): boolean {
  let first = intStart;
  while (first < fracEnd && (first === intEnd || text.charCodeAt(first) === ZERO)) first++;
  if (first === fracEnd) return !negative; // zero
  let last = fracEnd - 1;
  while (last === intEnd || text.charCodeAt(last) === ZERO) last--;
  const digits = last - first + 1 - (first < intEnd && last > intEnd ? 1 : 0);
  const magnitude = (first < intEnd ? intEnd - 1 : intEnd) - first + exponent;
  return digits <= MAX_EXACT_DIGITS && Math.abs(magnitude) <= MAX_EXACT_MAGNITUDE;
}

/** A number as sign, significant digits (no leading or trailing zeros; '' for zero) and the
 * power of ten of the last digit, so spellings of one value compare equal. */
type Decimal = { negative: boolean; digits: string; exponent: number };

function decimal(s: string): Decimal | undefined {
  const m = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/.exec(s);
  if (m === null) return undefined;
  const [, sign = '', whole = '', fraction = '', exp = '0'] = m;
  const all = whole + fraction;
  let from = 0;
  while (all.charCodeAt(from) === ZERO) from++;
  let to = all.length;
  while (to > from && all.charCodeAt(to - 1) === ZERO) to--;
  const digits = all.slice(from, to);
  return { negative: sign === '-', digits, exponent: digits === '' ? 0 : Number(exp) - fraction.length + (all.length - to) };
}

/** Why a number token would not read back as written, if it would not: the decimal value
 * written must equal the value of the double as JavaScript prints it. -0 counts as inexact
 * because it prints as 0. */
function inexactNumber(token: string): string | undefined {
  const value = Number(token);
  const printed = String(value);
  if (printed === token) return undefined;
  const shown = shorten(token);
  const written = decimal(token);
  if (written === undefined) return `${shown} is not a JSON number`;
  if (!Number.isFinite(value)) return `${shown} cannot be stored exactly (beyond the range of a double; use a string)`;
  const read = decimal(printed);
  if (read?.negative === written.negative && read.digits === written.digits && read.exponent === written.exponent) {
    return undefined;
  }
  if (/^-?\d+$/.test(token) && !Number.isSafeInteger(value)) {
    return `${shown} cannot be stored exactly (integers beyond ±${Number.MAX_SAFE_INTEGER} lose digits; use a string)`;
  }
  return `${shown} cannot be stored exactly (it reads back as ${printed}; use a string)`;
}
