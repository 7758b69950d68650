/**
 * Orphan collection for the redundant tier (issue #17). A write stores its replicas or
 * fragments before the transaction that records them (store.ts), so a crash between the two
 * — or a write that failed and could not delete what it had stored — leaves blobs on the
 * backends that the placement store does not reference. The sweep lists each available
 * backend's blob folder and deletes every blob whose (object, slot, backend) has no
 * location row, once it is older than a grace period (a write in flight in another process
 * has not committed yet) and not part of a write in flight in this one. With a placement
 * store several proxy instances share, the grace period is what protects the other
 * instances' writes in flight, and only the controller sweeps.
 */
import { NotFoundError, isProviderError } from '../errors.ts';
import { BLOB_DIR, type RedundantProvider } from './redundant-provider.ts';

export interface SweepOptions {
  /** Keep blobs younger than this (ms; default one hour): another process may still commit them. */
  readonly graceMs?: number;
  /** Only count what would be deleted. */
  readonly dryRun?: boolean;
  readonly now?: () => number;
  readonly signal?: AbortSignal;
  /** Delete at most this many blobs a second (default: unlimited), waiting with `sleep`. */
  readonly deletesPerSecond?: number;
  readonly sleep?: (ms: number) => Promise<void>;
}

export interface SweepReport {
  /** Backends listed. */
  backends: number;
  /** Backends down (not listed this time). */
  skipped: string[];
  /** Blobs seen. */
  blobs: number;
  /** Blobs no location refers to and older than the grace period. */
  orphans: number;
  /** Of those, deleted (0 on a dry run). */
  removed: number;
  /** Bytes of the orphans. */
  bytes: number;
  /** Orphans kept because they are younger than the grace period. */
  young: number;
}

/** Deletes under one fence (one transaction holding the lease on a shared store). */
const SWEEP_BATCH = 32;

const BLOB_NAME = /^\.weft-redundant\/([0-9a-f]{2})\/([0-9a-f]{32})\.([rf])(\d+)$/;

/** Parse a blob key (`blobKey`); undefined for anything else under the blob folder (the probe key). */
export function parseBlobKey(
  key: string,
): { id: string; layout: 'replicated' | 'striped'; slot: number } | undefined {
  const m = BLOB_NAME.exec(key);
  if (!m || m[2]!.slice(0, 2) !== m[1]) return undefined;
  return { id: m[2]!, layout: m[3] === 'r' ? 'replicated' : 'striped', slot: Number(m[4]) };
}

/**
 * Delete the blobs on the available backends that the placement store does not reference.
 * A blob is referenced when its object is recorded with that layout and the location of
 * its slot names this backend (in any state: 'owed' and 'bad' blobs are rewritten by
 * replay and scrub, not swept). Down backends are skipped (listed in the report).
 */
export async function sweepOrphans(
  tier: RedundantProvider,
  options: SweepOptions = {},
): Promise<SweepReport> {
  const graceMs = options.graceMs ?? 3_600_000;
  const now = options.now ?? Date.now;
  const rate = options.deletesPerSecond ?? 0;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  let lastDelete: number | undefined;
  const report: SweepReport = {
    backends: 0,
    skipped: [],
    blobs: 0,
    orphans: 0,
    removed: 0,
    bytes: 0,
    young: 0,
  };
  for (const backend of tier.backendIds()) {
    const p = tier.backend(backend);
    if (!p || !tier.isUp(backend)) {
      report.skipped.push(backend);
      continue;
    }
    const candidates: { path: string; size: number }[] = [];
    try {
      for await (const e of p.list(BLOB_DIR, { recursive: true, signal: options.signal })) {
        if (e.kind !== 'file') continue;
        const key = parseBlobKey(e.path);
        if (!key) continue;
        report.blobs += 1;
        if (await isReferenced(tier, backend, key)) continue;
        if (now() - e.modifiedMs < graceMs) {
          report.young += 1;
          continue;
        }
        candidates.push({ path: e.path, size: e.size });
      }
    } catch (e) {
      if (e instanceof NotFoundError) {
        report.backends += 1;
        continue;
      }
      if (options.signal?.aborted) throw e;
      if (!isProviderError(e) || e.code !== 'InvalidArgument') tier.markDown(backend);
      report.skipped.push(backend);
      continue;
    }
    report.backends += 1;
    // In batches, each under the controller's fence (PlacementStore.whileFenced): on a shared
    // store a controller paused past its lease, or deposed, deletes nothing — the in-memory
    // role flag alone could be stale. A batch lasts about a second at most when paced.
    const batch = rate > 0 ? Math.max(1, Math.min(SWEEP_BATCH, Math.floor(rate))) : SWEEP_BATCH;
    for (let i = 0; i < candidates.length; i += batch) {
      if (!options.dryRun && rate > 0 && lastDelete !== undefined) {
        const wait = lastDelete + 1000 / rate - now();
        if (wait > 0) await sleep(wait);
      }
      const deleteBatch = async (): Promise<void> => {
        for (const [j, c] of candidates.slice(i, i + batch).entries()) {
          if (j > 0 && !options.dryRun && rate > 0 && lastDelete !== undefined) {
            const wait = lastDelete + 1000 / rate - now();
            if (wait > 0) await sleep(wait);
          }
          // Looked at again just before deleting: a write may have committed since the listing.
          const key = parseBlobKey(c.path)!;
          if (await isReferenced(tier, backend, key)) continue;
          // Several instances on one store: only the controller deletes (it may have just lost the role).
          if (!tier.maintains())
            throw new Error('orphan sweep stopped: this instance is no longer the controller');
          report.orphans += 1;
          report.bytes += c.size;
          if (options.dryRun) continue;
          lastDelete = now();
          try {
            await p.remove(c.path, { signal: options.signal });
            report.removed += 1;
          } catch (e) {
            if (e instanceof NotFoundError) continue;
            throw e;
          }
        }
      };
      await (options.dryRun ? deleteBatch() : tier.store.whileFenced(deleteBatch));
    }
  }
  return report;
}

async function isReferenced(
  tier: RedundantProvider,
  backend: string,
  key: { id: string; layout: 'replicated' | 'striped'; slot: number },
): Promise<boolean> {
  if (tier.isWriting(key.id)) return true;
  const obj = await tier.store.object(key.id);
  if (!obj || obj.layout !== key.layout) return false;
  return (await tier.store.locations(key.id)).some((l) => l.slot === key.slot && l.backend === backend);
}
