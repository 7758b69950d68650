/**
 * The filesystem tier's batch write (the proxy's bundle ingest), over the few things it needs
 * of the provider.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { promisify } from 'node:util';
import { InvalidArgumentError, ProviderError } from '../../errors.ts';
import type { KeyedMutex } from '../../keyed-mutex.ts';
import type { BatchLog } from './batch-log.ts';
import { parentPath } from '../../paths.ts';
import type { Change, Entry } from '../../provider.ts';
import { classify, forEachBounded, fsyncDir } from './util.ts';
import { inPlaceWorkersOn, writeInPlaceMany } from './in-place-worker.ts';

/** One file for `FsProvider.writeMany`. */
export interface WriteManyItem {
  readonly path: string;
  readonly bytes: Uint8Array;
  readonly modifiedMs?: number;
  /** When given, the bytes must have this SHA-256 (lower-case hex). */
  readonly sha256?: string;
  /**
   * The caller checked `sha256` against the bytes (the proxy's bundle ingest: the bundle's
   * decoder did): it is taken as it is, the bytes are not hashed again.
   */
  readonly sha256Checked?: boolean;
}

/** What writeMany needs of the provider. */
export interface BatchTarget {
  readonly name: string;
  readonly tmpDir: string;
  readonly fileMode: number;
  readonly mutex: KeyedMutex;
  norm(path: string): string;
  resolve(p: string): string;
  lockKey(p: string): string;
  /**
   * Run `write`, the in-place write of the file with lock key `key`: until it settles, the
   * provider's listings, stats and reads of that file wait for it (no part-written file seen).
   */
  inPlace<T>(key: string, write: () => Promise<T>): Promise<T>;
  /** `known`: the batch's folders looked at or being looked at (each once; added to). */
  prepareParents(p: string, known?: Map<string, Promise<void>>): Promise<void>;
  entryWithHash(p: string, st: import('node:fs').BigIntStats, sha256: string): Promise<Entry>;
  record(change: Change): void;
  /** The write-ahead log (batch-log.ts): one sync per batch instead of one per file. */
  readonly log?: BatchLog;
}

/**
 * Write many small files at once (the proxy's bundle ingest). Every file goes the way
 * `write` goes — temp file, fsync, rename — but the temp files are written and fsynced
 * in parallel (at most `concurrency` at a time), renamed into place one after another,
 * and each parent folder is fsynced once. With the write-ahead log (`t.log`) the batch is
 * logged and synced first and the files and folders get no fsync of their own (the log's
 * checkpoint syncs them together; a replay at open rewrites any lost). Each file is still
 * atomic on its own: a crash leaves it at its old or its new content. Returns, per item in
 * order, its entry or the error that item met (one failure does not stop the others).
 * Unconditional writes only.
 */
export async function writeMany(
  t: BatchTarget,
  items: readonly WriteManyItem[],
  options: { readonly concurrency?: number } = {},
): Promise<(Entry | Error)[]> {
  const out: (Entry | Error)[] = new Array<Entry | Error>(items.length);
  const staged: Staged[] = [];
  // 0. Paths and hashes checked; with the write-ahead log, the whole batch logged and synced
  //    at once (batch-log.ts), so the files below need no fsync of their own. Each path is
  //    resolved once here (its absolute path kept for the steps below; issue #16).
  const valid: Valid[] = [];
  for (const [i, item] of items.entries()) {
    let p = '';
    try {
      p = t.norm(item.path);
      const abs = t.resolve(p);
      const sha256 =
        item.sha256Checked && item.sha256 !== undefined
          ? item.sha256.toLowerCase()
          : createHash('sha256').update(item.bytes).digest('hex');
      if (item.sha256 !== undefined && item.sha256.toLowerCase() !== sha256) {
        throw new InvalidArgumentError(`${t.name}: SHA-256 of the bytes for ${p} does not match`);
      }
      valid.push({ i, p, abs, key: t.lockKey(p), sha256 });
    } catch (e) {
      out[i] = e instanceof ProviderError ? e : classify(e, t.name, p || item.path);
    }
  }
  const applied = await logItems(t, items, valid, out);
  if (applied === undefined) return out;
  try {
    return await writeAndPlace(t, items, valid, out, staged, options.concurrency ?? 8);
  } finally {
    applied();
  }
}

/**
 * Append `logged` (items by index, with their paths and lock keys) to the write-ahead log as one
 * batch, one sync; returns the call that says they are in place (a no-op without the log or
 * items), or undefined when the append failed — each of them then answered with that error.
 */
export async function logItems(
  t: BatchTarget,
  items: readonly { readonly bytes: Uint8Array; readonly modifiedMs?: number | undefined }[],
  logged: readonly { readonly i: number; readonly p: string; readonly abs: string; readonly key: string }[],
  out: (Entry | Error)[],
): Promise<(() => void) | undefined> {
  if (!t.log || logged.length === 0) return () => {};
  try {
    return await t.log.append(
      logged.map((v) => ({
        path: v.p,
        bytes: items[v.i]!.bytes,
        ...(items[v.i]!.modifiedMs !== undefined ? { modifiedMs: items[v.i]!.modifiedMs } : {}),
        abs: v.abs,
        key: v.key,
      })),
    );
  } catch (e) {
    for (const v of logged) out[v.i] = classify(e, t.name, v.p);
    return undefined;
  }
}

/** An item whose path and hash passed: its normalized path, absolute path and lock key. */
interface Valid {
  readonly i: number;
  readonly p: string;
  readonly abs: string;
  readonly key: string;
  readonly sha256: string;
}

/** A valid item on its way into place (`tmp`: its temp file, '' for none). */
type Staged = Valid & { tmp: string };

async function writeAndPlace(
  t: BatchTarget,
  items: readonly WriteManyItem[],
  valid: readonly Valid[],
  out: (Entry | Error)[],
  staged: Staged[],
  concurrency: number,
): Promise<(Entry | Error)[]> {
  const logged = t.log !== undefined;
  // 1. Temp files, written and fsynced in parallel. With the log, none: each file is written
  //    in place in step 2 (a crash leaves a part-written file there, which the log's replay
  //    rewrites), or through a temp file when one is already there (readers see old or new).
  if (logged) for (const v of valid) staged.push({ ...v, tmp: '' });
  await forEachBounded(logged ? 0 : valid.length, concurrency, async (k) => {
    const v = valid[k]!;
    try {
      staged.push({ ...v, tmp: await writeTemp(t, items[v.i]!, true) });
    } catch (e) {
      out[v.i] = e instanceof ProviderError ? e : classify(e, t.name, v.p);
    }
  });
  staged.sort((a, b) => a.i - b.i);
  // 2. Renames under the paths' locks: parents first, then the files (in parallel when
  //    no path repeats, else in item order).
  const renamed: {
    i: number;
    p: string;
    abs: string;
    sha256: string;
    st?: import('node:fs').BigIntStats;
  }[] = [];
  const dirs = new Set<string>();
  const keys = staged.map((s) => s.key);
  const distinct = new Set(keys).size === keys.length;
  await t.mutex.run(keys, async () => {
    // Distinct parents prepared in parallel (prepareParents tolerates a folder made meanwhile).
    const parents = new Map<string, Error | undefined>();
    const firstOfParent = new Map<string, string>();
    for (const s of staged) if (!firstOfParent.has(parentPath(s.p))) firstOfParent.set(parentPath(s.p), s.p);
    const todo = [...firstOfParent];
    // Ancestors the batch's parents share are looked at once (issue #16: every parent's chain
    // was lstat'd from the root, ~9 calls each under a proxy namespace).
    const known = new Map<string, Promise<void>>();
    await forEachBounded(todo.length, concurrency, async (k) => {
      const [parent, p] = todo[k]!;
      try {
        await t.prepareParents(p, known);
        parents.set(parent, undefined);
      } catch (e) {
        parents.set(parent, e instanceof ProviderError ? e : classify(e, t.name, parent));
      }
    });
    // With the log and no path repeated, the new files are written in place by the worker
    // threads (in-place-worker.ts), the whole batch in one go; each path counts as being
    // written in place (t.inPlace) until the batch is done.
    const inWorkers =
      logged && distinct && inPlaceWorkersOn ? writeAllInPlace(t, items, staged, keys, parents) : undefined;
    const place = async (k: number): Promise<void> => {
      const s = staged[k]!;
      const abs = s.abs;
      try {
        const parentError = parents.get(parentPath(s.p));
        if (parentError) throw parentError;
        if (logged) {
          const st = await (
            inWorkers?.[k] ?? t.inPlace(keys[k]!, () => writeInPlace(abs, items[s.i]!, t.fileMode))
          ).catch((e: unknown) => {
            throw classify(e, t.name, s.p);
          });
          if (st) {
            renamed.push({ i: s.i, p: s.p, abs, sha256: s.sha256, st });
            return;
          }
          s.tmp = await writeTemp(t, items[s.i]!, false).catch((e: unknown) => {
            throw classify(e, t.name, s.p);
          });
        }
        // A folder in the way makes rename(2) fail with EISDIR: AlreadyExistsError.
        await fsp.rename(s.tmp, abs).catch((e: unknown) => {
          throw classify(e, t.name, s.p);
        });
        dirs.add(nodePath.dirname(abs));
        renamed.push({ i: s.i, p: s.p, abs, sha256: s.sha256 });
      } catch (e) {
        if (s.tmp) await fsp.rm(s.tmp, { force: true });
        out[s.i] = e instanceof ProviderError ? e : classify(e, t.name, s.p);
      }
    };
    await forEachBounded(staged.length, distinct ? concurrency : 1, place);
    // 3. Each parent folder fsynced once (with the log: at its checkpoint), then the new
    //    entries recorded in item order.
    const dirList = logged ? [] : [...dirs];
    await forEachBounded(dirList.length, concurrency, (k) => fsyncDir(dirList[k]!));
    renamed.sort((a, b) => a.i - b.i);
    const stats = await Promise.all(
      renamed.map(
        (r) => r.st ?? fsp.lstat(r.abs, { bigint: true }).catch((e: unknown) => classify(e, t.name, r.p)),
      ),
    );
    for (const [k, r] of renamed.entries()) {
      const st = stats[k]!;
      if (st instanceof Error) {
        out[r.i] = st;
        continue;
      }
      const entry = await t.entryWithHash(r.p, st, r.sha256);
      t.record({ type: 'upsert', path: r.p, entry });
      out[r.i] = entry;
    }
  });
  return out;
}

/**
 * The in-place writes of the staged files whose parent is ready, in the worker threads, one
 * batch: per staged index, the promise of its stat (undefined: something is there) or error,
 * registered as that path's in-place write.
 */
function writeAllInPlace(
  t: BatchTarget,
  items: readonly WriteManyItem[],
  staged: readonly Staged[],
  keys: readonly string[],
  parents: ReadonlyMap<string, Error | undefined>,
): (Promise<fs.BigIntStats | undefined> | undefined)[] {
  const todo: number[] = [];
  for (const [k, s] of staged.entries()) if (!parents.get(parentPath(s.p))) todo.push(k);
  const batch = writeInPlaceMany(
    todo.map((k) => {
      const item = items[staged[k]!.i]!;
      return {
        abs: staged[k]!.abs,
        bytes: item.bytes,
        modifiedMs: item.modifiedMs,
        mode: t.fileMode,
      };
    }),
  );
  const out: (Promise<fs.BigIntStats | undefined> | undefined)[] = new Array(staged.length);
  for (const [j, k] of todo.entries())
    out[k] = t.inPlace(keys[k]!, async () => {
      const r = (await batch)[j]!;
      if (r instanceof Error) throw r;
      return r === 'exists' ? undefined : r;
    });
  return out;
}

const openFd = promisify(fs.open);
const writeFd = promisify(fs.write);
const futimesFd = promisify(fs.futimes);
const fstatFd = promisify(fs.fstat) as (fd: number, o: { bigint: true }) => Promise<fs.BigIntStats>;
const closeFd = promisify(fs.close);

/**
 * A new file written where it belongs (no temp file, no rename: with the write-ahead log),
 * its stat taken on the open descriptor; undefined when something is already there (then a
 * temp file and a rename replace it atomically). Plain descriptors, not FileHandles: a
 * bundle's thousands of small files spent a good part of the ingest's CPU on those.
 */
async function writeInPlace(
  abs: string,
  item: WriteManyItem,
  mode: number,
): Promise<fs.BigIntStats | undefined> {
  let fd: number;
  try {
    fd = await openFd(abs, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, mode);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
    throw e;
  }
  try {
    const b = item.bytes;
    for (let at = 0; at < b.byteLength;) at += (await writeFd(fd, b, at, b.byteLength - at, at)).bytesWritten;
    if (item.modifiedMs !== undefined) {
      const m = new Date(item.modifiedMs);
      await futimesFd(fd, m, m);
    }
    const st = await fstatFd(fd, { bigint: true });
    await closeFd(fd);
    return st;
  } catch (e) {
    await closeFd(fd).catch(() => undefined);
    await fsp.rm(abs, { force: true });
    throw e;
  }
}

/**
 * A temp file with the item's bytes and time, fsynced when `sync` (without the write-ahead
 * log; with it the log's checkpoint syncs it); removed again if anything fails.
 */
export async function writeTemp(t: BatchTarget, item: WriteManyItem, sync: boolean): Promise<string> {
  const tmp = nodePath.join(t.tmpDir, randomBytes(12).toString('hex'));
  try {
    const fh = await fsp.open(tmp, 'wx', t.fileMode);
    try {
      if (item.bytes.byteLength > 0) await fh.writeFile(item.bytes);
      if (item.modifiedMs !== undefined) {
        const m = new Date(item.modifiedMs);
        await fh.utimes(m, m);
      }
      if (sync) await fh.sync();
    } finally {
      await fh.close();
    }
    return tmp;
  } catch (e) {
    await fsp.rm(tmp, { force: true });
    throw e;
  }
}
