import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.spec.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Looks for a container engine once; *.containers.spec.ts skip with its reason when none.
    globalSetup: ['test/support/containerRuntime.globalSetup.ts'],
  },
});
