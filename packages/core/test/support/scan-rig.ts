/**
 * What the scanner's tests share: a folder to scan beside its journal (both removed when the
 * test ends), a clock by which every file counts as settled, and every row marked synced.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { onTestFinished } from 'vitest';
import { Journal } from '../../src/journal/journal.ts';

/** A scan's `now` by which every file counts as settled (10 s ahead). */
export const later = (): number => Date.now() + 10_000;

/**
 * An empty folder (`root`) and a journal beside it, in a temporary folder named after
 * `prefix`; the journal is closed and the folder removed when the calling test ends.
 */
export async function scanFolder(prefix = 'weft-scan-'): Promise<{ root: string; journal: Journal }> {
  const base = await fsp.mkdtemp(nodePath.join(os.tmpdir(), prefix));
  const root = nodePath.join(base, 'folder');
  await fsp.mkdir(root);
  const journal = new Journal(nodePath.join(base, 'journal.db'));
  onTestFinished(async () => {
    if (journal.isOpen) journal.close();
    await fsp.rm(base, { recursive: true, force: true });
  });
  return { root, journal };
}

/** Mark every row of the journal synced at its current hash (as after an upload). */
export function markSynced(journal: Journal): void {
  for (const r of journal.allFiles())
    journal.upsertFile({ ...r, syncedRev: `rev-${r.path}`, syncedHash: r.hash });
}
