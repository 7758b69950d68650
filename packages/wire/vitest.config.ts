import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'wire',
    include: ['test/**/*.test.ts'],
    // Files share one module cache per worker (no file mocks modules, stubs globals or
    // keeps state between files): imports once per worker instead of once per file.
    isolate: false,
    // WEFT_FULL=1 runs 100,000 inputs per property.
    testTimeout: process.env.WEFT_FULL === '1' ? 3_600_000 : 60_000,
  },
});
