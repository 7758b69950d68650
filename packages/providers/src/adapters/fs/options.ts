/** How the filesystem tier is opened (fs.ts). */
import type { BatchLogOptions } from './batch-log.ts';

export interface FsProviderOptions {
  readonly root: string;
  /** Apply the portable (Windows-safe) path rules. Default: on when the filesystem folds case. */
  readonly portable?: boolean;
  /** Journal lines kept before compaction; older cursors then get `reset`. Default 200,000. */
  readonly maxJournal?: number;
  /**
   * Keep the change feed (a journal line per change, `changes()`); default true. A caller that
   * keeps its own feed and never reads this one (the proxy: SQLite) turns it off, and with
   * it the JSON line written per file (issue #16): `features.changeFeed` is then false.
   */
  readonly changeFeed?: boolean;
  /** SHA-256s of files kept in memory by path (fs/hash-cache.ts); default 10,000. */
  readonly hashCacheEntries?: number;
  /**
   * Keep everything to the owner, whatever the umask: the root and every folder made 0700,
   * every file 0600 (a server's storage tier). Default: 0755/0644 less the umask.
   */
  readonly private?: boolean;
  /**
   * Batch writes (`writeMany`) through a write-ahead log (fs/batch-log.ts): one sync per
   * batch instead of an fsync per file and folder, the files synced together at a checkpoint
   * and rewritten from the log at the next open after a crash. Default off.
   */
  readonly batchLog?: boolean | BatchLogOptions;
}
