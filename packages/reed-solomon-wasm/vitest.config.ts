import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'reed-solomon-wasm',
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    globalSetup: ['./test/global-setup.ts'],
  },
});
