import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'e2e',
    include: ['test/**/*.test.ts'],
    globalSetup: ['./src/global-setup.ts'],
    // Scenarios share the machine's two cores with each other badly: one file at a time.
    fileParallelism: false,
    testTimeout: 600_000,
    hookTimeout: 300_000,
  },
});
