// Given events, when command, then events (or then an error): the shape of every decider test.

import { expect } from 'vitest';
import type { DomainError } from '../../domain/shared/errors.ts';

type Decider<S, C, E> = {
  decide: (state: S, command: C) => { events: E[] } & Record<string, unknown>;
  evolve: (state: S, event: E, index: number) => S;
  initial: () => S;
};

export function deciderSpec<S, C, E>(decider: Decider<S, C, E>) {
  return {
    given: (events: E[]) => ({
      when: (command: C) => {
        const run = () => decider.decide(events.reduce(decider.evolve, decider.initial()), command);
        return {
          then: (expected: Partial<E>[], rest?: Record<string, unknown>) => {
            const decision = run();
            expect(decision.events).toEqual(expected.map((e) => expect.objectContaining(e as Record<string, unknown>) as unknown));
            if (rest) expect(decision).toMatchObject(rest);
          },
          thenNothing: () => {
            expect(run().events).toEqual([]);
          },
          thenThrows: (expected: Partial<Pick<DomainError, 'code' | 'status'>> & { errors?: unknown }) => {
            let error: unknown;
            try {
              run();
            } catch (e) {
              error = e;
            }
            expect(error).toMatchObject(expected);
          },
        };
      },
    }),
  };
}
