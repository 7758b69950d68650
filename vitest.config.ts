import { defineConfig } from 'vitest/config';

// One root config; every package with tests is a project (tRPC's layout).
export default defineConfig({
  test: {
    projects: ['packages/*/vitest.config.ts', 'apps/*/vitest.config.ts', 'e2e/vitest.config.ts'],
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
