/**
 * Putting a version's bytes aside before it stops being current, and reading them back
 * (version-index.ts names the rows). A small file's bytes go once per content to
 * `versions/<aa>/<sha256>` on the filesystem tier; a large version needs nothing, its object
 * stays, referenced by the version row.
 */
import { collect, type FsProvider, NotFoundError } from '@weft/providers';
import type { EntryInfo } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { Content } from './content.ts';
import type { EntryRow } from './metadata.ts';
import { versionContentKey, type VersionRow } from './version-index.ts';

/** Small versions put aside per parallel write batch; at most 2 MiB each. */
const KEEP_BATCH = 32;

/** What the keeper needs of the store. */
export interface VersionKeepDeps {
  readonly fs: FsProvider;
  /** Keep content from the sweep until released. */
  pin(sha256: string): () => void;
  readAll(userId: string, entry: EntryRow | EntryInfo): Promise<Uint8Array>;
  stageObject(sha256: string, size: number): Promise<{ file: string; release: () => void }>;
}

/**
 * Put aside the bytes of the small files among `rows`, each content once. Returns the release
 * of the pins that keep the content from the sweep until the versions are recorded.
 */
export async function keepVersionContent(
  d: VersionKeepDeps,
  userId: string,
  rows: readonly (EntryRow | EntryInfo)[],
): Promise<() => void> {
  const unpins: (() => void)[] = [];
  const release = (): void => {
    for (const u of unpins.splice(0)) u();
  };
  try {
    const missing = new Map<string, EntryRow | EntryInfo>();
    for (const r of rows) {
      if (r.kind !== 'file' || r.tier !== 'small' || !r.sha256 || missing.has(r.sha256)) continue;
      unpins.push(d.pin(r.sha256));
      try {
        // Only whether the copy is there: stat would hash the file once its hash left the
        // provider's cache (a folder's delete may look up thousands: issue #16).
        await d.fs.statWithoutHash(versionContentKey(r.sha256));
        continue;
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
      }
      missing.set(r.sha256, r);
    }
    // Written in parallel batches (a folder's delete may keep thousands of files), each
    // batch read first so that memory stays bounded.
    const todo = [...missing];
    for (let i = 0; i < todo.length; i += KEEP_BATCH) {
      const items = [];
      for (const [sha256, r] of todo.slice(i, i + KEEP_BATCH))
        items.push({ path: versionContentKey(sha256), bytes: await d.readAll(userId, r), sha256 });
      const failed = (await d.fs.writeMany(items, { concurrency: 8 })).find((x) => x instanceof Error);
      if (failed) throw failed;
    }
  } catch (e) {
    release();
    throw e;
  }
  return release;
}

/** The bytes of a kept version: a stream, or a local file (large) to pass on as content. */
export async function readVersionContent(
  d: VersionKeepDeps,
  v: VersionRow,
): Promise<{ content: Content; release: () => void }> {
  if (v.tier === 'large') {
    const { file, release } = await d.stageObject(v.sha256, v.size);
    return { content: { file, size: v.size }, release };
  }
  try {
    const bytes = await collect(await d.fs.read(versionContentKey(v.sha256)));
    return { content: { bytes }, release: () => undefined };
  } catch (e) {
    if (e instanceof NotFoundError)
      throw new ApiError('NOT_FOUND', 'the content of this version is no longer kept');
    throw e;
  }
}
