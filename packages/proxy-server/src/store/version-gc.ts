/**
 * Garbage collection of kept versions (version-index.ts): versions replaced longer ago than
 * the retention period are forgotten (a large one's object reference is released, and the
 * object GC collects it after the grace period like any other), then small versions' bytes
 * under `versions/` that no kept version names any more are removed once older than the
 * grace period. Content being put aside right now is pinned and stays.
 */
import { NotFoundError, type FsProvider } from '@weft/providers';
import { ignoreNotFound } from './ignore-not-found.ts';
import type { VersionStore } from './version-index.ts';

export interface VersionGcDeps {
  readonly fs: FsProvider;
  readonly versions: VersionStore;
  isPinned(sha256: string): boolean;
  now(): number;
}

/** Returns how many versions were forgotten. */
export async function collectVersions(
  d: VersionGcDeps,
  retentionMs: number,
  graceMs: number,
): Promise<number> {
  const now = d.now();
  const purged = await d.versions.purge(now - retentionMs, now);
  const cutoff = now - graceMs;
  try {
    for await (const e of d.fs.list('versions', { recursive: true })) {
      if (e.kind !== 'file') continue;
      const sha = e.path.slice(e.path.lastIndexOf('/') + 1);
      if ((await d.versions.holdsSmall(sha)) || d.isPinned(sha) || e.modifiedMs >= cutoff) continue;
      await d.fs.remove(e.path).catch(ignoreNotFound);
    }
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  return purged;
}
