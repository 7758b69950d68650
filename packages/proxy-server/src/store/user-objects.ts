/** Which object-tier objects a user's files depend on (the storage health view, issue #17). */
import { objectKey } from './link-file.ts';
import { packKey } from './packs.ts';
import type { MetadataStore } from './metadata.ts';
import type { PackIndex } from './pack-index.ts';

/**
 * A user's current files in the object tier, as object-tier key → how many of their files
 * refer to it: large files (their content object) and small files whose filesystem-tier
 * copy was dropped (the pack holding them). Small files kept on the filesystem tier do not
 * depend on the object tier's backends and are not counted.
 */
export async function userObjectKeys(
  meta: MetadataStore,
  /** The pack index (SQLite's or, with databaseUrl, the one on PostgreSQL every instance shares). */
  packs: PackIndex,
  userId: string,
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const add = (key: string): void => {
    out.set(key, (out.get(key) ?? 0) + 1);
  };
  const small: string[] = [];
  for (const e of await meta.listEntries(userId, '', true)) {
    if (e.kind !== 'file' || !e.sha256) continue;
    if (e.tier === 'large') add(objectKey(e.sha256));
    else small.push(e.sha256);
  }
  const packOf = new Map((await packs.droppedLocations(small)).map((l) => [l.sha256, l.packId]));
  for (const h of small) {
    const packId = packOf.get(h);
    if (packId) add(packKey(packId));
  }
  return out;
}
