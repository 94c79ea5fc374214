// Schemathesis, an outside fuzzer, on the whole API: the service started as `npm start` starts it,
// driven by openapi.json with an admin token, every default check (server errors, status codes,
// content types, response headers and schemas, negative-data rejection, the stateful links), with
// what the document cannot state written in schemathesis.toml. Bounded to fit CI; `npm run fuzz`
// runs longer. Skipped, saying why, where no Python 3.9+ is found.

import { describe, expect, it } from 'vitest';
import { fuzzService, installSchemathesis, MAX_EXAMPLES_IN_TESTS } from '../../scripts/schemathesis.ts';

const say = (line: string): void => {
  process.stderr.write(`[schemathesis] ${line}\n`);
};
const installed = installSchemathesis(say);
const reason = 'missing' in installed ? installed.missing : undefined;
if (reason !== undefined) say(`skipping the fuzz run of the API: ${reason}`);

describe.skipIf(reason !== undefined)('Schemathesis on the whole API', () => {
  it(
    'finds no failure: no 5xx, every status, content type, header and body as openapi.json says, schema-violating requests refused',
    async () => {
      if ('missing' in installed) return;
      const result = await fuzzService(installed.st, { maxExamples: MAX_EXAMPLES_IN_TESTS });
      say(result.summary);
      expect(result.exitCode, result.summary).toBe(0);
    },
    30 * 60_000,
  );
});
