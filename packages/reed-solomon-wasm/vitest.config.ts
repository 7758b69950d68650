import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'reed-solomon-wasm',
    include: ['test/**/*.test.ts'],
    // Files share one module cache per worker (no file mocks modules, stubs globals or
    // keeps state between files): imports once per worker instead of once per file.
    isolate: false,
    testTimeout: 60_000,
    globalSetup: ['./test/global-setup.ts'],
  },
});
