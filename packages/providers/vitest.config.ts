import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'providers',
    include: ['test/**/*.test.ts'],
    globalSetup: ['./test/global-setup.ts', './test/emulators-setup.ts'],
  },
});
