// An incremental reader of an export object (SPEC.md "Export object") as JSON text that arrives in
// chunks: it hands out the members of the object other than `data` whole (small: the export's
// head) and the items of `data` one at a time, each as its own JSON text with its position in the
// file, so a file of any size is read holding one item at a time. It only finds where each value
// starts and ends (strings, nesting); each text is then parsed with JSON.parse by the caller, which
// reports a syntax error inside it at its position in the file (`at` + its position in the text).

import { validationFailed } from '../domain/shared/errors.ts';

/** One member of the export object other than `data`, or one item of its `data`. */
export type FilePiece =
  { kind: 'member'; key: string; text: string; at: number } | { kind: 'item'; index: number; text: string; at: number };

/** The longest value held whole: an item of `data` (a record) or a member of the head. */
const MAX_VALUE_CHARS = 16 * 1024 * 1024;

type State =
  | 'start'
  | 'keyOrEnd'
  | 'keyStart'
  | 'key'
  | 'colon'
  | 'valueStart'
  | 'value'
  | 'afterMember'
  | 'itemOrEnd'
  | 'itemStart'
  | 'afterItem'
  | 'done';

const isSpace = (c: number): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
/** Characters that end a number or literal. */
const endsScalar = (c: number): boolean => isSpace(c) || c === 0x2c || c === 0x7d || c === 0x5d;

export const notJsonAt = (what: string, at: number): Error =>
  validationFailed(`The file is not JSON: ${what} at position ${String(at)}`, ['file: expected an export object as JSON']);

export class ExportFileParser {
  private state: State = 'start';
  /** Position in the file (characters) of the start of the current chunk. */
  private offset = 0;
  private key = '';
  private readonly keys = new Set<string>();
  private items = 0;
  // The value being read: its pieces so far, where it began, its nesting and string state.
  private pieces: string[] = [];
  private length = 0;
  private start = 0;
  private valueAt = 0;
  private depth = 0;
  private scalar = false;
  private inString = false;
  private escaped = false;
  private inItem = false;
  /** Whether `data` was an array. */
  sawData = false;

  /** The pieces completed by this chunk of the text. */
  feed(chunk: string): FilePiece[] {
    const out: FilePiece[] = [];
    let i = 0;
    this.start = 0;
    while (i < chunk.length) i = this.step(chunk, i, out);
    if (this.state === 'value' || this.state === 'key') this.keep(chunk.slice(this.start));
    this.offset += chunk.length;
    return out;
  }

  /** The end of the text: an error unless the object was closed. */
  end(): void {
    if (this.state === 'done') return;
    if (this.state === 'start')
      throw validationFailed('The file is not JSON: unexpected end of input', ['file: expected an export object as JSON']);
    throw validationFailed('The file is not JSON: unexpected end of input', ['file: the export object is not closed']);
  }

  private keep(piece: string): void {
    this.pieces.push(piece);
    this.length += piece.length;
    if (this.length > MAX_VALUE_CHARS) {
      throw validationFailed(
        `The file holds a value of more than ${String(MAX_VALUE_CHARS)} characters at position ${String(this.valueAt)}`,
        ['file: one record of data, or one member of the export object, is too large'],
      );
    }
  }

  private begin(chunk: string, i: number): void {
    this.pieces = [];
    this.length = 0;
    this.start = i;
    this.valueAt = this.offset + i;
    const c = chunk.charCodeAt(i);
    this.scalar = c !== 0x7b && c !== 0x5b && c !== 0x22;
    this.inString = c === 0x22;
    this.escaped = false;
    this.depth = this.scalar || this.inString ? 0 : 1;
    if (c === 0x2c || c === 0x5d || c === 0x7d || c === 0x3a) throw notJsonAt(`unexpected ${JSON.stringify(chunk[i])}`, this.valueAt);
  }

  /** The text of the value read, ending before `end` in this chunk. */
  private taken(chunk: string, end: number): string {
    this.keep(chunk.slice(this.start, end));
    const text = this.pieces.length === 1 ? (this.pieces[0] ?? '') : this.pieces.join('');
    this.pieces = [];
    this.length = 0;
    return text;
  }

  /** Reads the current value from i; the index after its end, or chunk.length when it goes on. */
  private scanValue(chunk: string, from: number): { end: number; done: boolean } {
    let i = from;
    if (this.scalar) {
      while (i < chunk.length && !endsScalar(chunk.charCodeAt(i))) i++;
      return { end: i, done: i < chunk.length };
    }
    for (; i < chunk.length; i++) {
      const c = chunk.charCodeAt(i);
      if (this.inString) {
        if (this.endsString(c) && this.depth === 0) return { end: i + 1, done: true };
      } else if (c === 0x22) this.inString = true;
      else if (c === 0x7b || c === 0x5b) this.depth++;
      else if (c === 0x7d || c === 0x5d) {
        this.depth--;
        if (this.depth === 0) return { end: i + 1, done: true };
      }
    }
    return { end: i, done: false };
  }

  /** One character of a string: whether it closes it. */
  private endsString(c: number): boolean {
    if (this.escaped) this.escaped = false;
    else if (c === 0x5c) this.escaped = true;
    else if (c === 0x22) {
      this.inString = false;
      return true;
    }
    return false;
  }

  private step(chunk: string, i: number, out: FilePiece[]): number {
    const c = chunk.charCodeAt(i);
    const s = this.state;
    if (s === 'value' || s === 'key') return this.stepValue(chunk, i, out);
    if (isSpace(c)) return i + 1;
    const at = this.offset + i;
    const unexpected = () => notJsonAt(`unexpected ${JSON.stringify(chunk[i])}`, at);
    switch (s) {
      case 'start':
        if (c !== 0x7b) throw c === 0x5b || c === 0x22 ? notAnObject() : unexpected();
        this.state = 'keyOrEnd';
        return i + 1;
      case 'keyOrEnd':
      case 'keyStart':
        if (c === 0x7d && s === 'keyOrEnd') {
          this.state = 'done';
          return i + 1;
        }
        if (c !== 0x22) throw unexpected();
        this.begin(chunk, i);
        this.state = 'key';
        return i + 1;
      case 'colon':
        if (c !== 0x3a) throw unexpected();
        this.state = 'valueStart';
        return i + 1;
      case 'valueStart':
        return this.stepMemberValue(chunk, i, c);
      case 'afterMember':
        if (c === 0x2c) this.state = 'keyStart';
        else if (c === 0x7d) this.state = 'done';
        else throw unexpected();
        return i + 1;
      case 'itemOrEnd':
      case 'itemStart':
      case 'afterItem':
        return this.stepData(chunk, i, c);
      case 'done':
        throw notJsonAt('unexpected content after the export object', at);
    }
  }

  /** The start of a member's value: `data`'s array is read item by item. */
  private stepMemberValue(chunk: string, i: number, c: number): number {
    if (this.key === 'data' && c === 0x5b) {
      this.sawData = true;
      this.state = 'itemOrEnd';
      return i + 1;
    }
    return this.startValue(chunk, i, false);
  }

  /** Between the items of `data`. */
  private stepData(chunk: string, i: number, c: number): number {
    if (this.state === 'afterItem') {
      if (c === 0x2c) this.state = 'itemStart';
      else if (c === 0x5d) this.state = 'afterMember';
      else throw notJsonAt(`unexpected ${JSON.stringify(chunk[i])}`, this.offset + i);
      return i + 1;
    }
    if (c === 0x5d && this.state === 'itemOrEnd') {
      this.state = 'afterMember';
      return i + 1;
    }
    return this.startValue(chunk, i, true);
  }

  /** A value (an item of `data`, or another member's) begins at i. */
  private startValue(chunk: string, i: number, inItem: boolean): number {
    this.begin(chunk, i);
    this.inItem = inItem;
    this.state = 'value';
    return this.scalar ? i : i + 1;
  }

  private stepValue(chunk: string, i: number, out: FilePiece[]): number {
    const { end, done } = this.scanValue(chunk, i);
    if (!done) return chunk.length;
    const text = this.taken(chunk, end);
    this.start = end;
    if (this.state === 'key') {
      this.key = parseKey(text, this.valueAt);
      if (this.keys.has(this.key))
        throw validationFailed('The file would not be stored as sent', [
          `file: the key ${JSON.stringify(this.key.slice(0, 100))} appears twice in the export object`,
        ]);
      this.keys.add(this.key);
      this.state = 'colon';
    } else if (this.inItem) {
      out.push({ kind: 'item', index: this.items++, text, at: this.valueAt });
      this.state = 'afterItem';
    } else {
      out.push({ kind: 'member', key: this.key, text, at: this.valueAt });
      this.state = 'afterMember';
    }
    return end;
  }
}

function parseKey(text: string, at: number): string {
  try {
    return JSON.parse(text) as string;
  } catch {
    throw notJsonAt('a key that is not a JSON string', at);
  }
}

const notAnObject = (): Error =>
  validationFailed('The file is not an export object', ['(file): expected a JSON object with data and filtering']);
