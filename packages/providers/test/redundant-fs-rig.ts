/**
 * A redundant tier over five directory backends, as several redundant-* tests set it up: each
 * backend an FsProvider on its own folder (wrapped by `wrap`, e.g. in an OutageProvider), small
 * thresholds so that a few hundred KiB are striped over several stripes, hedging soon, no probe
 * timer. The caller closes the tier.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { FsProvider } from '../src/adapters/fs.ts';
import type { Provider } from '../src/provider.ts';
import {
  openRedundantProvider,
  type RedundantOptions,
  type RedundantProvider,
} from '../src/redundant/index.ts';

const KiB = 1024;

export interface FsRig<P extends Provider> {
  readonly tier: RedundantProvider;
  /** The temp folder holding the backends' folders and the tier's state. */
  readonly dir: string;
  /** Each backend's folder. */
  readonly roots: string[];
  /** Each backend's FsProvider, and what the tier was given (`wrap`'s). */
  readonly providers: FsProvider[];
  readonly backends: P[];
}

export async function redundantFsRig<P extends Provider = FsProvider>(
  prefix: string,
  wrap: (p: FsProvider, i: number) => P = (p) => p as unknown as P,
  options: Partial<RedundantOptions> = {},
): Promise<FsRig<P>> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), prefix));
  const roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(dir, `b${i}`));
  const providers = await Promise.all(
    roots.map(async (root) => {
      await fsp.mkdir(root);
      return FsProvider.open({ root });
    }),
  );
  const backends = providers.map(wrap);
  const tier = openRedundantProvider({
    backends: backends.map((provider, i) => ({ id: `b${i}`, provider })),
    dir: nodePath.join(dir, 'tier'),
    thresholdBytes: 64 * KiB,
    maxShardBytes: 32 * KiB,
    hedgeAfterMs: 50,
    probeIntervalMs: 0,
    ...options,
  });
  return { tier, dir, roots, providers, backends };
}
