// `npm start` and the image run the service with the Node arguments the tests and benchmarks use
// (api/nodeFlags.ts): a flag added in one place only would make the measured service another one.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SERVICE_NODE_ARGS } from '../../api/nodeFlags.ts';

const root = join(import.meta.dirname, '..', '..');

describe('how Node runs the service', () => {
  it('npm start runs api/main.ts with SERVICE_NODE_ARGS', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts.start).toBe(['node', ...SERVICE_NODE_ARGS, 'api/main.ts'].join(' '));
  });

  it("the image's CMD runs api/main.ts with SERVICE_NODE_ARGS", () => {
    const cmd = /^CMD (\[.*\])$/m.exec(
      readFileSync(join(root, 'Dockerfile'), 'utf8')
        .split('\n')
        .filter((line) => !line.startsWith('  '))
        .join('\n'),
    )?.[1];
    expect(JSON.parse(cmd ?? '[]')).toEqual(['node', ...SERVICE_NODE_ARGS, 'api/main.ts']);
  });
});
