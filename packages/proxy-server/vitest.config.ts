import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'proxy-server',
    include: ['test/**/*.test.ts'],
    globalSetup: ['./test/global-setup.ts', './test/emulators-setup.ts'],
    testTimeout: process.env.WEFT_FULL === '1' ? 3_600_000 : 60_000,
    hookTimeout: 180_000,
  },
});
