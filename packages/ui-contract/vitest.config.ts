import { defineProject } from 'vitest/config';

export default defineProject({
  test: {
    name: 'ui-contract',
    include: ['test/**/*.test.ts'],
  },
});
