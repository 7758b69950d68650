import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'cloud-emulators',
    include: ['test/**/*.test.ts'],
    // The root's testTimeout does not reach a project: vitest's 5 s default then failed tests
    // on a busy machine (two workers share two cores).
    testTimeout: 60_000,
    // Files share one module cache per worker (no file mocks modules, stubs globals or
    // keeps state between files): imports once per worker instead of once per file.
    isolate: false,
    globalSetup: ['./test/tls-setup.ts'],
  },
});
