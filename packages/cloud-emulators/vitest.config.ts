import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'cloud-emulators',
    include: ['test/**/*.test.ts'],
    globalSetup: ['./test/tls-setup.ts'],
  },
});
