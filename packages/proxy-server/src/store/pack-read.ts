/**
 * Reading packs from the object tier (packs.ts; moved out of it to keep it short): a pack's
 * footer, one entry, many entries with adjacent ranges coalesced, the packs present, and
 * indexing packs from their footers (a crash after the PUT, or a rebuild of the tables).
 */
import type { Logger } from 'pino';
import { collect, NotFoundError, type Provider } from '@weft/providers';
import {
  coalescePackRanges,
  decodePackFooter,
  decodePackTrailer,
  PACK_TRAILER_SIZE,
  type PackEntry,
  unpackEntry,
  WireFormatError,
} from '@weft/wire';
import type { PackIndex } from './pack-index.ts';
import type { PackLocation } from './pack-types.ts';
import { PACK_PREFIX, packKey } from './pack-config.ts';

/** The footer of a pack, read with two ranged reads (trailer, then footer). */
export async function readPackFooter(objects: Provider, packId: string, size?: number): Promise<PackEntry[]> {
  const key = packKey(packId);
  const total = size ?? (await objects.stat(key)).size;
  if (total < PACK_TRAILER_SIZE) throw new WireFormatError('pack', 'TRUNCATED', `${key} is ${total} bytes`);
  const trailerBytes = await collect(
    await objects.read(key, { offset: total - PACK_TRAILER_SIZE, length: PACK_TRAILER_SIZE }),
  );
  const trailer = decodePackTrailer(trailerBytes, total);
  const footer = await collect(
    await objects.read(key, {
      offset: trailer.footerOffset,
      length: total - PACK_TRAILER_SIZE - trailer.footerOffset,
    }),
  );
  return decodePackFooter(footer, trailer);
}

/** The packs in the object tier (none if the folder is missing). */
export async function* listPackObjects(objects: Provider): AsyncIterable<{ packId: string; size: number }> {
  try {
    for await (const e of objects.list(PACK_PREFIX))
      if (e.kind === 'file') yield { packId: e.path.slice(e.path.lastIndexOf('/') + 1), size: e.size };
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
}

/**
 * Index the packs present in the object tier but not in the tables, oldest first (so that, for
 * a content in two packs, the newest wins); a pack with an unreadable footer is skipped with a
 * warning. Returns the number of packs indexed.
 */
export async function indexUnindexedPacks(
  objects: Provider,
  index: PackIndex,
  log: Logger,
  now: () => number,
  move: boolean,
): Promise<number> {
  const known = await index.packIds();
  const found: { packId: string; size: number }[] = [];
  for await (const p of listPackObjects(objects)) if (!known.has(p.packId)) found.push(p);
  found.sort((a, b) => (a.packId < b.packId ? -1 : 1));
  let n = 0;
  for (const p of found) {
    try {
      await index.addPack(p.packId, p.size, await readPackFooter(objects, p.packId, p.size), move, now());
      n++;
    } catch (e) {
      if (!(e instanceof WireFormatError)) throw e;
      log.warn({ err: e, pack: p.packId }, 'unreadable pack footer: pack ignored');
    }
  }
  return n;
}

/** One packed content, streamed from one ranged read of its pack. */
export async function readPackEntry(objects: Provider, loc: PackLocation): Promise<Uint8Array> {
  const stored = await collect(
    await objects.read(packKey(loc.packId), { offset: loc.offset, length: loc.length }),
  );
  return unpackEntry(stored, loc);
}

/**
 * Many packed contents: ranges of one pack closer than `maxGap` are fetched in one read.
 * Returns hash → bytes for every location given.
 */
export async function readPackRanges(
  objects: Provider,
  locs: readonly PackLocation[],
  maxGap?: number,
): Promise<Map<string, Uint8Array>> {
  const byPack = new Map<string, PackLocation[]>();
  for (const l of locs) {
    const list = byPack.get(l.packId);
    if (list) list.push(l);
    else byPack.set(l.packId, [l]);
  }
  const out = new Map<string, Uint8Array>();
  for (const [packId, list] of byPack)
    for (const g of coalescePackRanges(list, maxGap)) {
      const bytes = await collect(
        await objects.read(packKey(packId), { offset: g.offset, length: g.length }),
      );
      for (const l of g.entries)
        out.set(
          l.sha256,
          unpackEntry(bytes.subarray(l.offset - g.offset, l.offset - g.offset + l.length), l),
        );
    }
  return out;
}
