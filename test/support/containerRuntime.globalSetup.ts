// Vitest global setup: looks for a container engine once per run, so every `*.containers.spec.ts`
// knows at once whether it can start KurrentDB or MongoDB, and why not when it cannot.

import type { TestProject } from 'vitest/node';
import { getContainerRuntimeClient } from 'testcontainers';

declare module 'vitest' {
  // Declaration merging needs an interface.
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions
  export interface ProvidedContext {
    /** Undefined when a container engine answered; otherwise why the container suites skip. */
    containerRuntimeMissing: string | undefined;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  let missing: string | undefined;
  try {
    await getContainerRuntimeClient();
  } catch (error) {
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    missing = `no container engine found (${reason ?? 'unknown reason'})`;
  }
  project.provide('containerRuntimeMissing', missing);
}
