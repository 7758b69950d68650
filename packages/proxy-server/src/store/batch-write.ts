/**
 * Bundle ingest (HybridStore.writeFiles): every small file of a bundle is written to a temp
 * file, all of them in parallel (bounded) and fsynced, then renamed into place, and the
 * whole batch — new folders, files, conflicted copies — is recorded in ONE metadata
 * transaction. Each entry is decided by the write rule (@weft/wire write-rule.ts) that a single write
 * follows, in entry order as if the entries were applied one by one; entries big enough
 * for the object tier go through the single write afterwards.
 */
import type { Logger } from 'pino';
import { ancestors, type FsProvider, sha256Hex } from '@weft/providers';
import type { ChangeRecord, ConflictReport, EntryInfo, OpResult } from '@weft/wire';
import { conflictReport, decideWrite } from '@weft/wire';
import { ApiError, toApiError } from '../errors.ts';
import type { ProxyMetrics } from '../metrics.ts';
import type { Content, Writer } from './hybrid.ts';
import { checkNewPath } from './paths.ts';
import { ignoreNotFound } from './ignore-not-found.ts';
import { LINK_EXTENSION } from './link-file.ts';
import { type ChangeInput, type MetadataStore, publicEntry } from './metadata.ts';
import { lastEntry, NOOP_SEQ } from './op-results.ts';
import type { QuotaLedger } from './quota.ts';

/** Make folder `dir` (user path) at `at` in the filesystem tier: the index change that records it. */
export async function makeDir(fs: FsProvider, at: string, dir: string): Promise<ChangeInput> {
  await fs.mkdir(at);
  const st = await fs.stat(at);
  return {
    type: 'upsert',
    entry: { path: dir, kind: 'dir', size: 0, mtimeMs: Math.floor(st.modifiedMs), fsRevision: st.revision },
  };
}

/** One file of a bundle for HybridStore.writeFiles. */
export interface BatchFile {
  readonly path: string;
  readonly bytes: Uint8Array;
  readonly sha256: string;
  readonly mtimeMs: number;
  /** Base revision of a conditional write (see api.md): undefined, null (must not exist) or a revision. */
  readonly base: string | null | undefined;
  /** Contents the writer sent here and never heard back about: a file holding one is its own (write-rule.ts). */
  readonly own?: readonly string[] | undefined;
  /** The caller checked `sha256` against the bytes (decodeBundle does): they are not hashed again. */
  readonly checked?: boolean;
  /** The caller ran checkNewPath on `path` (BundleService does, for the whole bundle first). */
  readonly pathChecked?: boolean;
}

/** What a batch write needs of the store. */
export interface BatchWriteDeps {
  readonly fs: FsProvider;
  readonly meta: MetadataStore;
  readonly log: Logger;
  readonly metrics: ProxyMetrics;
  /** Content of at least this many bytes belongs in the object tier. */
  readonly smallFileBytes: number;
  readonly quota: QuotaLedger;
  growthAt(userId: string, path: string, size: number): Promise<number>;
  nsPath(userId: string, path: string): string;
  /** Record changes in one metadata transaction. */
  record(userId: string, changes: ChangeInput[], w: Writer): Promise<ChangeRecord[]>;
  /** A conflicted-copy name free in the index and not taken by `taken`. */
  conflictPathFor(w: Writer, path: string, taken: (p: string) => boolean): Promise<string>;
  /** Put aside the bytes of files about to be replaced (kept versions); returns the unpin. */
  keepContent(userId: string, rows: readonly EntryInfo[]): Promise<() => void>;
  /** A single write of content whose SHA-256 is already checked. */
  writeFile(
    w: Writer,
    path: string,
    content: Content,
    sha256: string,
    mtimeMs: number,
    base: string | null | undefined,
    own?: readonly string[],
  ): Promise<OpResult>;
}

/** Temp files of one bundle written and fsynced at once (the fsyncs are what costs). */
const WRITE_CONCURRENCY = 8;

/**
 * Apply a bundle's files in one go (bundle ingest): every small file is written to a temp
 * file, all of them in parallel (bounded) and fsynced, then renamed into place, and the
 * whole batch — new folders, files, conflicted copies — is recorded in ONE metadata
 * transaction. Each file stays atomic on its own (old or new content after a crash; a crash
 * before the transaction is repaired by reconcile()), and nothing is acknowledged before
 * the transaction. Decisions (conflict, no-op, folder in the way) are the ones writeFile
 * makes, taken in entry order as if the entries were applied one by one; content whose
 * size puts it in the large tier goes through writeFile afterwards. The caller holds the
 * scheduler's slot for every path of the batch (stop-and-wait against other operations).
 */
export async function writeBatchFiles(
  store: BatchWriteDeps,
  w: Writer,
  items: readonly BatchFile[],
): Promise<OpResult[]> {
  const results: (OpResult | undefined)[] = new Array<OpResult | undefined>(items.length);
  const fail = (i: number, e: unknown): void => {
    const err = toApiError(e);
    if (err.status >= 500) store.log.error({ err: e, userId: w.userId }, 'bundle entry failed');
    results[i] = {
      status: 'error',
      error: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) },
    };
  };
  /** What this batch puts at a path, before it is recorded. */
  const planned = new Map<string, 'file' | 'dir'>();
  /** Folders already in the index, looked up once per batch (a bundle's files share them). */
  const existing = new Map<string, 'file' | 'dir' | undefined>();
  const kindAt = async (path: string): Promise<'file' | 'dir' | undefined> => {
    const p = planned.get(path);
    if (p !== undefined) return p;
    if (!existing.has(path)) existing.set(path, (await store.meta.getEntry(w.userId, path))?.kind);
    return existing.get(path);
  };
  const newDirs: string[] = [];
  const jobs: {
    i: number;
    path: string;
    item: BatchFile;
    conflict?: ConflictReport;
    /** The entry it replaces (its bytes are kept as a version). */
    before: EntryInfo | undefined;
    /** Bytes it adds to the namespace (its size less the file it replaces). */
    growth: number;
  }[] = [];
  const large: number[] = [];
  for (const [i, item] of items.entries()) {
    try {
      if (!item.pathChecked) checkNewPath(item.path);
      if (!item.checked && sha256Hex(item.bytes) !== item.sha256)
        throw new ApiError('HASH_MISMATCH', 'SHA-256 of the content does not match the declared one');
      if (item.bytes.byteLength >= store.smallFileBytes) {
        large.push(i);
        continue;
      }
      // A folder this batch creates is in the way as much as one already there.
      const cur = await store.meta.getEntry(w.userId, item.path);
      const d =
        planned.get(item.path) === 'dir'
          ? ({ action: 'refuse-folder' } as const)
          : decideWrite(cur, item.base, item.sha256, item.own);
      if (d.action === 'refuse-folder')
        throw new ApiError('ALREADY_EXISTS', 'a folder exists at that path', { path: item.path });
      if (d.action === 'unchanged' && cur) {
        results[i] = { status: 'applied', entry: publicEntry(cur), seq: NOOP_SEQ };
        continue;
      }
      let target = item.path;
      let conflict: ConflictReport | undefined;
      if (d.action === 'conflict') {
        target = await store.conflictPathFor(w, item.path, (p) => planned.has(p));
        conflict = conflictReport(item.path, target, d);
      }
      const missing: string[] = [];
      for (const dir of ancestors(target)) {
        const k = await kindAt(dir);
        if (k === 'dir') continue;
        if (k === 'file')
          throw new ApiError('ALREADY_EXISTS', `a file is in the way of folder ${dir}`, { path: dir });
        missing.push(dir);
      }
      for (const dir of missing) {
        planned.set(dir, 'dir');
        newDirs.push(dir);
      }
      planned.set(target, 'file');
      const before = target === item.path ? cur : await store.meta.getEntry(w.userId, target);
      jobs.push({
        i,
        path: target,
        item,
        ...(conflict ? { conflict } : {}),
        before,
        growth: item.bytes.byteLength - (before?.kind === 'file' ? before.size : 0),
      });
    } catch (e) {
      fail(i, e);
    }
  }

  // The quota is checked for the whole batch before anything is written: a bundle that
  // does not fit is refused whole (QUOTA_EXCEEDED thrown), never half applied.
  const largeGrowth = new Map<number, number>();
  for (const i of large)
    largeGrowth.set(i, await store.growthAt(w.userId, items[i]!.path, items[i]!.bytes.byteLength));
  const smallGrowth = jobs.reduce((n, j) => n + j.growth, 0);
  const held = await store.quota.reserve(
    w.userId,
    smallGrowth + [...largeGrowth.values()].reduce((n, g) => n + g, 0),
  );
  try {
    return await writeBatch(store, w, items, results, fail, jobs, newDirs, large, {
      // Recorded small files count in the usage now: their share of the reservation goes.
      smallRecorded: () => held.shrink(Math.max(0, smallGrowth)),
      // A large entry reserves its own bytes in writeFile: hand its share back just before.
      beforeLarge: (i) => held.shrink(Math.max(0, largeGrowth.get(i) ?? 0)),
    });
  } finally {
    held.release();
  }
}

async function writeBatch(
  store: BatchWriteDeps,
  w: Writer,
  items: readonly BatchFile[],
  results: (OpResult | undefined)[],
  fail: (i: number, e: unknown) => void,
  jobs: readonly {
    i: number;
    path: string;
    item: BatchFile;
    conflict?: ConflictReport;
    before: EntryInfo | undefined;
  }[],
  newDirs: readonly string[],
  large: readonly number[],
  quota: { smallRecorded(): void; beforeLarge(i: number): void },
): Promise<OpResult[]> {
  // Folders first (parents before children: newDirs is in that order), then the files.
  const changes: ChangeInput[] = [];
  const dirErrors = new Map<string, unknown>();
  // One depth at a time (parents before children), the folders of a depth in parallel.
  const byDepth = new Map<number, string[]>();
  for (const dir of newDirs) {
    const d = dir.split('/').length;
    const level = byDepth.get(d);
    if (level) level.push(dir);
    else byDepth.set(d, [dir]);
  }
  const dirChanges = new Map<string, ChangeInput>();
  for (const d of [...byDepth.keys()].sort((x, y) => x - y)) {
    const level = byDepth.get(d) ?? [];
    await forEachBounded(level.length, WRITE_CONCURRENCY, async (k) => {
      const dir = level[k]!;
      const parentError = ancestors(dir).find((a) => dirErrors.has(a));
      if (parentError !== undefined) {
        dirErrors.set(dir, dirErrors.get(parentError));
        return;
      }
      try {
        dirChanges.set(dir, await makeDir(store.fs, store.nsPath(w.userId, dir), dir));
      } catch (e) {
        dirErrors.set(dir, e);
      }
    });
  }
  for (const dir of newDirs) {
    const c = dirChanges.get(dir);
    if (c) changes.push(c);
  }
  // (No folder failed, the usual case: no per-file walk of its ancestors.)
  const writable =
    dirErrors.size === 0
      ? jobs
      : jobs.filter((j) => {
          const d = ancestors(j.path).find((a) => dirErrors.has(a));
          if (d === undefined) return true;
          fail(j.i, dirErrors.get(d));
          return false;
        });
  // The versions these files replace stay restorable: their bytes are put aside first.
  // (Each one's entry was read when it was decided; the scheduler holds its path since.)
  const replaced: EntryInfo[] = [];
  for (const j of writable) if (j.before && j.before.sha256 !== j.item.sha256) replaced.push(j.before);
  const unkeep = await store.keepContent(w.userId, replaced);
  let records: ChangeRecord[];
  const recorded: { job: (typeof jobs)[number]; change: number }[] = [];
  try {
    const written = await store.fs.writeMany(
      writable.map((j) => ({
        path: store.nsPath(w.userId, j.path),
        bytes: j.item.bytes,
        modifiedMs: j.item.mtimeMs,
        sha256: j.item.sha256,
        // Checked above (or by the caller): writeMany does not hash the bytes again.
        sha256Checked: true,
      })),
      { concurrency: WRITE_CONCURRENCY },
    );
    let fsBytesIn = 0; // counted once per bundle, not per file (a labelled counter each)
    for (const [k, j] of writable.entries()) {
      const e = written[k]!;
      if (e instanceof Error) {
        fail(j.i, e);
        continue;
      }
      fsBytesIn += j.item.bytes.byteLength;
      if (j.before?.tier === 'large')
        await store.fs.remove(store.nsPath(w.userId, j.path) + LINK_EXTENSION).catch(ignoreNotFound);
      recorded.push({ job: j, change: changes.length });
      changes.push({
        type: 'upsert',
        // Looked up under the scheduler's slot for the path: nothing there (SQLite: no second look).
        ...(j.before === undefined ? { absent: true as const } : {}),
        entry: {
          path: j.path,
          kind: 'file',
          size: j.item.bytes.byteLength,
          mtimeMs: j.item.mtimeMs,
          sha256: j.item.sha256,
          tier: 'small',
          fsRevision: e.revision,
        },
      });
    }
    if (fsBytesIn > 0) store.metrics.bytes.inc({ tier: 'fs', direction: 'in' }, fsBytesIn);
    // One transaction for the whole batch.
    records = await store.record(w.userId, changes, w);
  } finally {
    unkeep();
  }
  quota.smallRecorded();
  for (const { job, change } of recorded) {
    const { entry, seq } = lastEntry(records.slice(change, change + 1));
    results[job.i] = job.conflict
      ? { status: 'conflict', conflict: job.conflict, ...(entry ? { entry } : {}), seq }
      : { status: 'applied', ...(entry ? { entry } : {}), seq };
  }
  // Content big enough for the object tier: one by one, as a single write would go.
  for (const i of large) {
    const item = items[i]!;
    try {
      quota.beforeLarge(i);
      results[i] = await store.writeFile(
        w,
        item.path,
        { bytes: item.bytes },
        item.sha256,
        item.mtimeMs,
        item.base,
        item.own,
      );
    } catch (e) {
      fail(i, e);
    }
  }
  return results.map((r) => r ?? { status: 'error', error: { code: 'INTERNAL', message: 'not applied' } });
}

/** Run `work(0..n-1)` with at most `limit` calls in flight. */
async function forEachBounded(n: number, limit: number, work: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < n) await work(next++);
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, n)) }, lane));
}
