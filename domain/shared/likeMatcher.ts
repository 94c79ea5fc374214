// LIKE in JavaScript, for the patterns SQLite's own LIKE cannot take (it reads its pattern as a C
// string, so a NUL would end it). A backtracking regular expression can take exponential time on
// `%a%a%a%…`; this simulates the pattern's automaton on every state at once instead, so one value
// costs time linear in its length (times the pattern's length over 32) whatever the pattern.

import type { LikePattern } from './filtering.ts';

/** Whether a whole value matches, case-insensitively (both sides lowercased, as rm_fold does). */
export type LikeMatcher = (value: string) => boolean;

/**
 * State i is "the first i characters of the pattern are matched"; a literal code point or `_`
 * moves state i-1 to state i, and a `%` after state i lets it stay on any character. Sets of
 * states are bitsets over 32-bit words, state i at bit i % 32 of word i / 32.
 */
type Automaton = {
  words: number;
  /** The states a code point can enter: literals equal to it, and every `_`. */
  entering: ReadonlyMap<number, Uint32Array>;
  /** The states any other code point can enter: every `_`. */
  enteringAny: Uint32Array;
  /** The states that stay on any character. */
  staying: Uint32Array;
  final: number;
};

const setBit = (bits: Uint32Array, state: number): void => {
  bits[state >>> 5] = (bits[state >>> 5] ?? 0) | (1 << (state & 31));
};

const hasBit = (bits: Uint32Array, state: number): boolean => ((bits[state >>> 5] ?? 0) & (1 << (state & 31))) !== 0;

function automaton(pattern: LikePattern): Automaton {
  // Each step is the code point it consumes, or undefined for `_`.
  const steps: (number | undefined)[] = [];
  const loops: number[] = [];
  for (const token of pattern) {
    if (token.kind === 'any') loops.push(steps.length);
    else if (token.kind === 'one') steps.push(undefined);
    else for (const c of token.text.toLowerCase()) steps.push(c.codePointAt(0));
  }
  const words = (steps.length >>> 5) + 1;
  const enteringAny = new Uint32Array(words);
  steps.forEach((step, i) => {
    if (step === undefined) setBit(enteringAny, i + 1);
  });
  const entering = new Map<number, Uint32Array>();
  steps.forEach((step, i) => {
    if (step === undefined) return;
    const bits = entering.get(step) ?? Uint32Array.from(enteringAny);
    setBit(bits, i + 1);
    entering.set(step, bits);
  });
  const staying = new Uint32Array(words);
  for (const state of loops) setBit(staying, state);
  return { words, entering, enteringAny, staying, final: steps.length };
}

function run(a: Automaton, value: string): boolean {
  const { words, entering, enteringAny, staying, final } = a;
  const finalStays = hasBit(staying, final);
  let live = new Uint32Array(words);
  let next = new Uint32Array(words);
  live[0] = 1;
  for (let i = 0; i < value.length;) {
    if (finalStays && hasBit(live, final)) return true;
    const point = value.codePointAt(i) ?? 0;
    i += point > 0xffff ? 2 : 1;
    const enter = entering.get(point) ?? enteringAny;
    let carry = 0;
    let any = 0;
    for (let w = 0; w < words; w += 1) {
      const bits = live[w] ?? 0;
      const moved = ((bits << 1) | carry) & (enter[w] ?? 0);
      const word = moved | (bits & (staying[w] ?? 0));
      carry = bits >>> 31;
      next[w] = word;
      any |= word;
    }
    if (any === 0) return false;
    [live, next] = [next, live];
  }
  return hasBit(live, final);
}

export function likeMatcher(pattern: LikePattern): LikeMatcher {
  const a = automaton(pattern);
  return (value) => run(a, value.toLowerCase());
}
