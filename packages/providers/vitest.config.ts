import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'providers',
    include: ['test/**/*.test.ts'],
    // The root's testTimeout does not reach a project: vitest's 5 s default then failed tests
    // on a busy machine (two workers share two cores).
    testTimeout: 60_000,
    globalSetup: ['./test/global-setup.ts', './test/emulators-setup.ts'],
  },
});
