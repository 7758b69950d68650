import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// One root config; every package with tests is a project (tRPC's layout).
export default defineConfig({
  test: {
    projects: ['packages/*/vitest.config.ts', 'apps/*/vitest.config.ts', 'e2e/vitest.config.ts'],
    // One test file per core. Vitest's default is one fewer than the cores, which on a 2-core
    // CI machine ran every file one after another while the main process sat mostly idle
    // (issue #15). The e2e project still runs its files one at a time, after the rest
    // (fileParallelism: false puts it in a group of its own).
    maxWorkers: availableParallelism(),
    testTimeout: 60_000,
    // The lockfile pins an AWS SDK that supports Node 20; its notice about 2027 releases is noise here.
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
    hookTimeout: 180_000,
  },
});
