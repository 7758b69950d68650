/**
 * Drive's changes.list and Graph's delta are per item: a moved folder is one change, and
 * what it holds is not reported again (the items' parents did not change). The Change
 * contract says a move is a delete of the old path and upserts at the new one, so the
 * id-based adapters list each folder that appeared at a new path in a page (moved,
 * renamed, moved in from outside the root, or new) and add what is inside it at the end of
 * the page — these feeds give each item's latest state, so the listing is as current as
 * the rest of the page. Paths the page already reports are not repeated.
 */
import { NotFoundError } from '../errors.ts';
import { isWithin } from '../paths.ts';
import type { Change, Provider } from '../provider.ts';

export async function withFolderContents(
  provider: Provider,
  page: Change[],
  folders: readonly string[],
  signal?: AbortSignal,
): Promise<Change[]> {
  const reported = new Set(page.filter((c) => c.type === 'upsert').map((c) => c.path));
  const listed: string[] = [];
  for (const dir of [...folders].sort()) {
    if (listed.some((l) => isWithin(dir, l))) continue;
    listed.push(dir);
    try {
      for await (const e of provider.list(dir, { recursive: true, ...(signal ? { signal } : {}) })) {
        if (reported.has(e.path)) continue;
        reported.add(e.path);
        page.push({ type: 'upsert', path: e.path, entry: e });
      }
    } catch (e) {
      // Gone again since: its own change is in a later page.
      if (!(e instanceof NotFoundError)) throw e;
    }
  }
  return page;
}
