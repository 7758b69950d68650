import { defineConfig } from 'vitest/config';

// One root config; every package with tests is a project (tRPC's layout).
export default defineConfig({
  test: {
    projects: ['packages/*/vitest.config.ts', 'apps/*/vitest.config.ts', 'e2e/vitest.config.ts'],
    testTimeout: 60_000,
    // The lockfile pins an AWS SDK that supports Node 20; its notice about 2027 releases is noise here.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    hookTimeout: 180_000,
  },
});
