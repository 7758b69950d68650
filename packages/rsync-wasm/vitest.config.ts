import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'rsync-wasm',
    include: ['test/**/*.test.ts'],
    globalSetup: ['./test/global-setup.ts'],
  },
});
