/** Which object-tier objects a user's files depend on (the storage health view, issue #17). */
import { objectKey } from './link-file.ts';
import { packKey } from './packs.ts';
import type Database from 'better-sqlite3';
import type { MetadataStore } from './metadata.ts';

/**
 * A user's current files in the object tier, as object-tier key → how many of their files
 * refer to it: large files (their content object) and small files whose filesystem-tier
 * copy was dropped (the pack holding them). Small files kept on the filesystem tier do not
 * depend on the object tier's backends and are not counted.
 */
export async function userObjectKeys(
  meta: MetadataStore,
  /** The database holding the pack index (pack_entries, fs_dropped): the proxy's SQLite file. */
  packs: Database.Database,
  userId: string,
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  const add = (key: string): void => {
    out.set(key, (out.get(key) ?? 0) + 1);
  };
  const dropped = packs.prepare(
    'SELECT p.pack_id FROM pack_entries p JOIN fs_dropped d ON d.sha256 = p.sha256 WHERE p.sha256 = ?',
  );
  for (const e of await meta.listEntries(userId, '', true)) {
    if (e.kind !== 'file' || !e.sha256) continue;
    if (e.tier === 'large') add(objectKey(e.sha256));
    else {
      const row = dropped.get(e.sha256) as { pack_id: string } | undefined;
      if (row) add(packKey(row.pack_id));
    }
  }
  return out;
}
