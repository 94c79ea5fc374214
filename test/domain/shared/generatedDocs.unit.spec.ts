// The documents generated from declarations (scripts/docs.ts) are committed as the generator
// writes them: after a change to a declaration, `npm run docs` writes them again.

import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { GENERATED } from '../../../scripts/docs.ts';

describe('generated documents', () => {
  it.each(GENERATED.map((g) => [g.file, g.render] as const))('%s is what `npm run docs` writes', (file, render) => {
    expect(readFileSync(file, 'utf8'), `${file} differs from its declarations: run npm run docs`).toBe(render());
  });
});
