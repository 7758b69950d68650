/**
 * The provider conformance suite over the redundant tier (issue #17): once over five memory
 * backends and once over five directory backends, with a small threshold and shard size so
 * the suite's larger files are striped RS(3, 2) over many stripes.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { FsProvider } from '../src/adapters/fs.ts';
import { runProviderConformance } from '../src/conformance/index.ts';
import type { Provider } from '../src/provider.ts';
import { openRedundantProvider } from '../src/redundant/index.ts';

const skip = {
  changeFeedOrderAndResume: 'the redundant tier has no change feed yet (docs/redundancy.md)',
  changeFeedFolderMove: 'the redundant tier has no change feed yet (docs/redundancy.md)',
} as const;

async function tier(make: (i: number, dir: string) => Promise<Provider>): Promise<Provider> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-'));
  const backends = await Promise.all(
    [0, 1, 2, 3, 4].map(async (i) => ({ id: `b${i}`, provider: await make(i, dir) })),
  );
  return openRedundantProvider({
    backends,
    dir: nodePath.join(dir, 'tier'),
    thresholdBytes: 64 * 1024,
    maxShardBytes: 256 * 1024,
    probeIntervalMs: 0,
  });
}

runProviderConformance({
  name: 'redundant over memory',
  create: () => tier(async () => new MemoryProvider()),
  skip,
});

runProviderConformance({
  name: 'redundant over directories',
  create: () =>
    tier(async (i, dir) => {
      const root = nodePath.join(dir, `backend${i}`);
      await fsp.mkdir(root);
      return FsProvider.open({ root });
    }),
  skip,
});
