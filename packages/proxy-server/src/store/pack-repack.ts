/**
 * A repack's copy (packs.ts; moved out of it to keep it short): the live entries of a pack,
 * read with coalesced ranged reads, written into a new pack, indexed there in one transaction
 * (addPack with move), then the old pack's rows and object removed.
 */
import { randomBytes } from 'node:crypto';
import { NotFoundError, type Provider } from '@weft/providers';
import { PackBuilder } from '@weft/wire';
import type { PackIndex } from './pack-index.ts';
import type { PackLocation, PackStats, RepackOutcome } from './pack-types.ts';
import { packKey } from './pack-config.ts';
import { readPackRanges } from './pack-read.ts';

/** A new pack's id: its creation time then 8 random bytes (ids sort by age). */
export function newPackId(nowMs: number): string {
  return `${nowMs.toString(36)}-${randomBytes(8).toString('hex')}`;
}

export async function* toIterable(chunks: Uint8Array[]): AsyncIterable<Uint8Array> {
  for (const c of chunks) yield c;
}

/** Copy `live` (the pack's live entries, offset order) into a new pack and drop the old one. */
export async function copyLiveEntries(
  objects: Provider,
  index: PackIndex,
  st: PackStats,
  live: readonly PackLocation[],
  now: () => number,
): Promise<RepackOutcome> {
  const packId = st.packId;
  let newId = '';
  let newSize = 0;
  let liveBytes = 0;
  if (live.length > 0) {
    const bytes = await readPackRanges(objects, live);
    const b = new PackBuilder();
    for (const l of live) {
      b.add(bytes.get(l.sha256)!, l.sha256);
      liveBytes += l.length;
    }
    newId = newPackId(now());
    const { chunks, entries, size } = b.finish();
    await objects.write(packKey(newId), () => toIterable(chunks), { size });
    await index.addPack(newId, size, entries, true, now());
    newSize = size;
  }
  // Contents dropped from the index leave the fs_dropped set: their reads go to the fs tier.
  await index.removePack(packId);
  await objects.remove(packKey(packId)).catch((e) => {
    if (!(e instanceof NotFoundError)) throw e;
  });
  return { packId, into: newId, oldSize: st.size, newSize, liveBytes };
}
