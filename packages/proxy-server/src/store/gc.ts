/**
 * Garbage collection of the object tier and the staging area: objects unreferenced for
 * longer than the grace period, orphans (uploaded but never recorded: a crash between
 * steps 1 and 3 of hybrid.ts's write order) and signatures without their object once older
 * than it, and abandoned transfers (idle for the grace period). Pinned objects (being linked right now) are kept.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { NotFoundError, type Provider } from '@weft/providers';
import { ignoreNotFound } from './ignore-not-found.ts';
import { objectKey, signatureBlockSize, signatureKey } from './link-file.ts';
import type { MetadataStore } from './metadata.ts';
import type { RelayCache } from './relay-cache.ts';

export interface GcDeps {
  readonly objects: Provider;
  readonly meta: MetadataStore;
  readonly relay: RelayCache;
  /** Where transfers stage their blocks (one file per transfer id). */
  readonly stagingDir: string;
  isPinned(sha256: string): boolean;
  now(): number;
}

export interface GcResult {
  objects: number;
  orphans: number;
  transfers: number;
}

export async function collectGarbage(d: GcDeps, graceMs: number): Promise<GcResult> {
  const cutoff = d.now() - graceMs;
  let objects = 0;
  for (const o of await d.meta.collectableObjects(cutoff)) {
    if (d.isPinned(o.sha256)) continue;
    // The row goes first, and only while nothing references the object (one transaction): a
    // reference taken since the listing keeps it. A crash before the bytes go leaves an
    // orphan, which the sweep below removes.
    if (!(await d.meta.deleteObject(o.sha256))) continue;
    await d.objects.remove(objectKey(o.sha256)).catch(ignoreNotFound);
    await d.objects.remove(signatureKey(o.sha256, signatureBlockSize(o.size))).catch(ignoreNotFound);
    await d.relay.forget(o.sha256);
    objects += 1;
  }
  let orphans = 0;
  try {
    for await (const e of d.objects.list('objects', { recursive: true })) {
      if (e.kind !== 'file') continue;
      const sha = e.path.slice(e.path.lastIndexOf('/') + 1);
      if ((await d.meta.getObject(sha)) || d.isPinned(sha) || e.modifiedMs >= cutoff) continue;
      await d.objects.remove(e.path).catch(ignoreNotFound);
      orphans += 1;
    }
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  // Signatures whose object is gone (or was never recorded), once older than the grace period.
  try {
    for await (const e of d.objects.list('signatures', { recursive: true })) {
      if (e.kind !== 'file') continue;
      const name = e.path.slice(e.path.lastIndexOf('/') + 1);
      const sha = name.slice(0, name.indexOf('.'));
      if ((await d.meta.getObject(sha)) || d.isPinned(sha) || e.modifiedMs >= cutoff) continue;
      await d.objects.remove(e.path).catch(ignoreNotFound);
      orphans += 1;
    }
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  let transfers = 0;
  // Abandoned: no activity (opened, a block, a commit attempt) for the grace period, however
  // long ago it was opened. The row goes first, and only while still idle (a block or commit
  // since the listing keeps it); then nothing can use the staged bytes, which go next.
  for (const t of await d.meta.idleTransfers(cutoff)) {
    if (!(await d.meta.deleteIdleTransfer(t.id, cutoff))) continue;
    await fsp.rm(nodePath.join(d.stagingDir, t.id), { force: true });
    transfers += 1;
  }
  return { objects, orphans, transfers };
}
