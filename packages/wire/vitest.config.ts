import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'wire',
    include: ['test/**/*.test.ts'],
    // WEFT_FULL=1 runs 100,000 inputs per property.
    testTimeout: process.env.WEFT_FULL === '1' ? 3_600_000 : 60_000,
  },
});
