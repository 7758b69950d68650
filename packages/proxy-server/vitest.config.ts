import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'proxy-server',
    include: ['test/**/*.test.ts'],
    globalSetup: ['./test/global-setup.ts'],
  },
});
