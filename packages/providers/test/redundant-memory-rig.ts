/**
 * The redundant tier as several redundant-* tests open it over in-memory (or wrapped)
 * backends: ids b0, b1, …; below 64 KiB replicated, shards of 16 KiB, so a few hundred KiB
 * make many stripes; no hedge and no probe timer unless asked. Its folder is temporary. What
 * a test opens here is closed, and the folder removed, when the test ends (onTestFinished).
 * (redundant-fs-rig.ts: the same over directory backends.)
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { onTestFinished } from 'vitest';
import type { Provider } from '../src/provider.ts';
import {
  openRedundantProvider,
  type RedundantOptions,
  type RedundantProvider,
} from '../src/redundant/index.ts';

const KiB = 1024;

/** A temporary folder, removed when the calling test ends. */
export async function tempDir(prefix: string): Promise<string> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), prefix));
  onTestFinished(() => fsp.rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A tier over `backends` (ids b0, b1, …) with its state in `dir`; closed when the test ends. */
export function openTier(
  dir: string,
  backends: readonly Provider[],
  options: Partial<RedundantOptions> = {},
): RedundantProvider {
  const tier = openRedundantProvider({
    backends: backends.map((provider, i) => ({ id: `b${i}`, provider })),
    dir,
    thresholdBytes: 64 * KiB,
    maxShardBytes: 16 * KiB,
    hedgeAfterMs: 60_000,
    probeIntervalMs: 0,
    ...options,
  });
  onTestFinished(() => tier.close().catch(() => undefined));
  return tier;
}

/** A tier over `backends` in a new temporary folder (`dir`; its state in `dir`/tier). */
export async function memoryTier(
  prefix: string,
  backends: readonly Provider[],
  options: Partial<RedundantOptions> = {},
): Promise<{ tier: RedundantProvider; dir: string }> {
  const dir = await tempDir(prefix);
  return { tier: openTier(nodePath.join(dir, 'tier'), backends, options), dir };
}

/**
 * `p` with each call passed on, but `close` doing nothing (a backend that outlives the tier,
 * as a cloud outlives a restart); `over` replaces some calls (to watch or slow them).
 */
export function forwardingTo(p: Provider, over: Partial<Provider> = {}): Provider {
  return {
    name: p.name,
    features: p.features,
    list: (d, o) => p.list(d, o),
    stat: (q, o) => p.stat(q, o),
    read: (q, o) => p.read(q, o),
    write: (q, b, o) => p.write(q, b, o),
    remove: (q, o) => p.remove(q, o),
    mkdir: (q, o) => p.mkdir(q, o),
    close: async () => undefined,
    ...over,
  };
}
