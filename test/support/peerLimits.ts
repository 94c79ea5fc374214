// Tests a peer server is known to fail. A contract suite declared once runs on servers that are
// not all alike (FerretDB is not MongoDB): a test listed for a peer still runs there, and passes
// only when it fails as listed, with the peer's own error or, where the peer answers without one,
// with a failed assertion. A peer that learns it makes the test fail, so no entry outlives its
// limit; what the peer said is printed.

import { expect, it } from 'vitest';

/** How a peer fails a test: with this text in its error, or by answering differently; or, for a
 * test whose outcome there is not steady (so neither passing nor failing can be asserted), why it
 * is not run there: it shows as skipped with that reason in its title. */
export type PeerLimit = { error: string } | { differs: string } | { notRun: string };

export type PeerLimits = { peer: string; tests: Readonly<Record<string, PeerLimit>> };

/** `it`, with the tests `limits` lists run as "the peer fails it" (`.each` is vitest's own). */
export function limitedIt(limits: PeerLimits | undefined) {
  const limited = (title: string, body: () => unknown, timeout?: number): void => {
    const limit = limits?.tests[title];
    if (limits === undefined || limit === undefined) {
      it(
        title,
        async () => {
          await body();
        },
        timeout,
      );
      return;
    }
    if ('notRun' in limit) {
      it.skip(`${title} [not run on ${limits.peer}: ${limit.notRun}]`, () => undefined);
      return;
    }
    const label =
      'error' in limit ? `unsupported by ${limits.peer}: ${limit.error}` : `${limits.peer} answers differently: ${limit.differs}`;
    it(
      `${title} [${label}]`,
      async () => {
        const failure: unknown = await Promise.resolve()
          .then(body)
          .then(
            () => undefined,
            (error: unknown) => error ?? new Error('rejected without a reason'),
          );
        expect(failure, `${limits.peer} now passes "${title}": remove it from its limits in test/support/mongoPeers.ts`).toBeDefined();
        const message = failure instanceof Error ? failure.message : String(failure);
        if ('error' in limit) expect(message).toContain(limit.error);
        else expect(failure instanceof Error ? failure.name : '', message).toBe('AssertionError');
        const verdict = 'error' in limit ? `unsupported by ${limits.peer}` : `${limits.peer} answers differently`;
        process.stderr.write(`[${limits.peer}] ${title}: ${verdict}: ${message.split('\n')[0] ?? ''}\n`);
      },
      timeout,
    );
  };
  return Object.assign(limited, { each: it.each.bind(it) });
}
