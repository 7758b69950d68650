/**
 * The scanner: the only producer of operations. It compares the folder on disk with the
 * journal's index — size, mtime, inode, then content hash — and enqueues what changed.
 * Watcher events only tell it where to look.
 *
 * - A file whose mtime is younger than `settleMs` may still be being written: it is left
 *   for the next scan (reported in `unsettled`).
 * - A path that vanished while a path with the same inode (and, for files, size and mtime —
 *   content for a racily clean row) appeared is a move.
 * - Symlinks and special files are skipped with a warning; names the path rules refuse
 *   are skipped with a warning, and so are names the server reserves (`*.weftlink`, its
 *   link files: one in an ops request fails the whole request); ignored paths are
 *   skipped silently.
 * - Names that differ only by case are reported as clashes on case-insensitive remotes and
 *   the later one is skipped (never overwriting the other).
 * - Local names are mapped back to remote names by LocalPaths (local-path.ts): `CON＿.txt`
 *   on Windows is the remote `CON.txt`. A name that is not one Weft writes (it would not
 *   come back unchanged) is skipped with a warning and left on disk.
 *
 * Also here: scan-disk.ts (the stats and hashes, on the event loop while quick), scan-rows.ts
 * (an entry against its row), scan-types.ts (the options and the result), scan-queue.ts.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { MAX_PATH_BYTES, caseFoldKey, normalizePath } from '@weft/providers/paths';
import type { IgnoreRules } from './ignore-rules.ts';
import { IGNORE_FILE } from './ignore-rules.ts';
import { type FileRow, type IndexRow, type Journal, SMUDGED_MTIME } from './journal/journal.ts';
import { type RawIndexRow, indexIn, indexRowOf, statMatches, toIndexRow } from './journal/scan-index.ts';
import { PARTIAL_PREFIX } from './local-fs.ts';
import { LocalPaths, UnsafeLocalPathError, encodeName, isPlainName } from './local-path.ts';
import type { Op } from './ops.ts';
import { ScanDisk, absOf } from './scan-disk.ts';
import { CHUNK_ENTRIES, type ScanOptions, type ScanResult, ScanStopped } from './scan-types.ts';
import {
  type DiskEntry,
  type Known,
  newRow,
  outermost,
  properAncestorIn,
  reservedNameReason,
  selfOrAncestorIn,
  unchanged,
} from './scan-rows.ts';

export { ENQUEUE_BATCH, enqueueScan } from './scan-queue.ts';
export { reservedNameReason } from './scan-rows.ts';
export { STAT_SLICE } from './scan-disk.ts';
export { CHUNK_ENTRIES, ScanStopped, type ScanOptions, type ScanResult } from './scan-types.ts';

export async function scan(
  root: string,
  realJournal: Journal,
  ignore: IgnoreRules,
  options: ScanOptions = {},
): Promise<ScanResult> {
  const now = options.now ?? Date.now;
  const ops: Op[] = [];
  /** ops[0, letGone) were taken for good by ScanOptions.found: empty places (see found). */
  let letGone = 0;
  const letGo = (taken: number | void): void => {
    const end = typeof taken === 'number' ? Math.min(taken, ops.length) : 0;
    for (; letGone < end; letGone++) ops[letGone] = undefined as unknown as Op;
  };
  const stopCheck = (): void => {
    if (options.shouldStop?.()) throw new ScanStopped();
  };
  // Reads go to the journal; writes are deferred into `commit` (see ScanResult.commit),
  // each tagged with how many operations preceded it (see ScanResult.commitThrough). Kept
  // as data in two parallel arrays, not as a closure and a row object each: a new file's
  // write is the entry found on disk itself (its row made when written), which a first scan
  // of 100,000 files held 100,000 of until the queue took them (issue #16).
  const deferredAfter: number[] = [];
  const deferred: (DiskEntry | FileRow | (() => void) | undefined)[] = [];
  const defer = (write: DiskEntry | FileRow | (() => void)): void => {
    deferredAfter.push(ops.length);
    deferred.push(write);
  };
  const journal = {
    upsertFile: (row: FileRow) => defer(row),
    /** The row of an entry found on disk and not known before (newRow when written). */
    insertNew: (e: DiskEntry) => defer(e),
    deleteFile: (p: string) => defer(() => realJournal.deleteFile(p)),
    deleteFilesUnder: (p: string) => defer(() => realJournal.deleteFilesUnder(p)),
    moveFiles: (from: string, to: string) => defer(() => realJournal.moveFiles(from, to)),
  };
  let storedAs = 0;
  const paths = options.paths ?? new LocalPaths(root, undefined, (l) => realJournal.remoteNameOf(l));
  const settleNs = BigInt(options.settleMs ?? 1000) * 1_000_000n;
  const warnings: string[] = [];
  const unsettled: string[] = [];
  const disk = new Map<string, DiskEntry>();
  /** Paths that exist but were skipped (case clashes): not deletions. */
  const present = new Set<string>();
  const folded = new Map<string, string>();
  const detectClashes = options.detectCaseClashes ?? false;

  const diskIo = new ScanDisk(paths.gate, stopCheck);

  /**
   * The journal's rows that the scan still compares, and the entries found on disk that it
   * still compares (`disk`): an entry that matches its row — a file by its stat, a folder by
   * its inode — is let go with its row as soon as its folder is read (settle), so a rescan
   * holds only what changed, not the index beside the disk (issue #16: the 100,000 entries
   * of a no-change rescan, held until the index was read after the walk, were half the
   * agent's memory and most of the rescan's garbage collection).
   */
  const known = new Map<string, Known>();
  let foundEntries = 0;
  let knownFilesBefore = 0;
  const settle = (e: DiskEntry | undefined, r: IndexRow | undefined): void => {
    if (
      e !== undefined &&
      r !== undefined &&
      (e.kind === 'dir' ? r.kind === 'dir' && r.inode === e.inode : unchanged(e, r))
    )
      return;
    if (e !== undefined) disk.set(e.path, e);
    if (r !== undefined) known.set(r.path, r);
  };
  /** The rows strictly below `p`, a path the walk does not enter (gone, skipped, now a file). */
  const knowBelow = async (p: string): Promise<void> => {
    for await (const r of realJournal.indexUnderPaged(p)) {
      if (r.path === p) continue;
      if (r.kind === 'file') knownFilesBefore += 1;
      known.set(r.path, r);
    }
    stopCheck();
  };
  // now() truncates to the ms, an mtime has ns: the end of this ms (a file written in it is past).
  const nowNs = (BigInt(Math.floor(now())) + 1n) * 1_000_000n;
  const cheaplyUnchanged = (e: DiskEntry, row: Known | undefined): boolean =>
    row !== undefined && unchanged(e, row);
  /**
   * The whole row of a known entry, under its path now (read when an entry changed): where it
   * was stored, or already at its path once a caller queued its move (ScanOptions.found).
   */
  const whole = (k: Known): FileRow | undefined => {
    const r =
      realJournal.getFile(k.storedAt ?? k.path) ??
      (k.storedAt === undefined ? undefined : realJournal.getFile(k.path));
    return r && { ...r, path: k.path };
  };
  const settled = (e: DiskEntry): boolean => nowNs - e.mtimeNs >= settleNs;
  /** ScanResult.commitThrough: rows written up to `written`. */
  let written = 0;
  const commitThrough = (end: number): void => {
    for (; written < deferred.length && (deferredAfter[written] as number) <= end; written++) {
      const d = deferred[written];
      deferred[written] = undefined; // the row it holds can go
      if (typeof d === 'function') d();
      else if (d !== undefined)
        realJournal.upsertFile('dir' in d ? newRow(d, d.kind === 'dir' ? null : (d.hash ?? null)) : d);
    }
  };

  const hashAll = (chunk: readonly DiskEntry[]): Promise<void> =>
    diskIo.hashAll(chunk, (e) => e.kind === 'file' && !cheaplyUnchanged(e, known.get(e.path)) && settled(e));

  const compare = (e: DiskEntry): void => {
    const row = known.get(e.path);
    if (e.kind === 'dir') {
      if (!row) {
        ops.push({ kind: 'mkdir', path: e.path, created: true });
        journal.insertNew(e);
      } else if (row.kind !== 'dir') {
        // A file became a folder: delete the file, create the folder.
        ops.push({ kind: 'delete', path: e.path });
        ops.push({ kind: 'mkdir', path: e.path, created: true });
        journal.insertNew(e);
      } else if (row.inode !== e.inode) {
        const r = whole(row);
        if (r) journal.upsertFile({ ...r, inode: e.inode, mtimeNs: e.mtimeNs });
      }
      return;
    }
    if (cheaplyUnchanged(e, row)) return; // unchanged by every cheap measure
    if (!settled(e)) {
      unsettled.push(e.path);
      return;
    }
    const hash = e.hash ?? 'gone';
    if (hash === 'gone') return;
    if (hash === 'unsettled') {
      unsettled.push(e.path); // changed while we hashed: leave it for the next scan
      return;
    }
    if (row && row.kind === 'dir') {
      ops.push({ kind: 'delete', path: e.path });
      ops.push({ kind: 'put', path: e.path, hash, size: e.size, created: true });
      journal.deleteFilesUnder(e.path);
      journal.insertNew(e);
      return;
    }
    const r = row && whole(row); // changed by its stat: its whole row now
    if (r && r.hash === hash) {
      journal.upsertFile({ ...r, size: e.size, mtimeNs: e.mtimeNs, inode: e.inode }); // touched, not changed
      return;
    }
    if (!r || r.syncedHash !== hash) {
      ops.push({ kind: 'put', path: e.path, hash, size: e.size, created: !r || r.syncedRev === null });
    }
    if (r) journal.upsertFile({ ...r, size: e.size, mtimeNs: e.mtimeNs, inode: e.inode, hash });
    else journal.insertNew(e);
  };

  // A first scan (no journal rows: no moves or deletions to find) handing over what it finds
  // compares entries as the walk finds them, CHUNK_ENTRIES at a time (issue #16).
  const streaming = options.found !== undefined && realJournal.isEmpty();
  let walked: DiskEntry[] = [];
  let streamed = 0;
  const handOver = async (): Promise<void> => {
    const chunk = walked;
    walked = [];
    await hashAll(chunk);
    for (const e of chunk) {
      compare(e);
      disk.delete(e.path); // compared: the scan's later steps have nothing more to do with it
    }
    streamed += chunk.length;
    letGo(await options.found?.(ops, commitThrough));
    await new Promise<void>((resolve) => setImmediate(resolve));
    stopCheck();
  };

  // Load .weftignore files first so they apply to this very scan.
  const walk = async (dirAbs: string, dirRel: string): Promise<void> => {
    stopCheck();
    let names: string[];
    try {
      names = (await fsp.readdir(dirAbs)).sort();
    } catch {
      return; // vanished meanwhile: the next scan sees it
    }
    if (names.includes(IGNORE_FILE)) {
      try {
        ignore.setFolderRules(dirRel, await fsp.readFile(nodePath.join(dirAbs, IGNORE_FILE), 'utf8'));
      } catch {
        /* unreadable: keep the previous rules */
      }
    }
    const stats = await diskIo.statNames(dirAbs, names);
    // The folder's rows, compared as its entries are found (none while streaming: the rows
    // in the journal are this scan's own).
    const index = streaming ? undefined : await indexIn(realJournal, dirRel);
    const rowsHere = index?.rows ?? new Map<string, RawIndexRow>();
    knownFilesBefore += index?.files ?? 0;
    /** Subfolders entered (their rows are compared there). */
    const entered = new Set<string>();
    // A path under this folder fits when its bytes (ASCII names: one a character) do.
    const dirBytes = dirRel === '' ? 0 : Buffer.byteLength(dirRel) + 1;
    for (let i = 0; i < names.length; i++) {
      const name = names[i] as string;
      if (name.startsWith(PARTIAL_PREFIX)) continue;
      let rel: string;
      let remoteName: string;
      /** The name as the remote has it when it differs from the local one (NFC), else undefined. */
      let localNfc: string | undefined;
      if (isPlainName(name, paths.rules) && dirBytes + name.length <= MAX_PATH_BYTES) {
        // Its own remote name, in NFC, a valid segment (local-path.ts): what the checks
        // below would find, without their cost (issue #16).
        remoteName = name;
        rel = dirRel === '' ? name : `${dirRel}/${name}`;
      } else {
        // Back to the remote name (NFC first: macOS may hand us NFD).
        const nfc = name.normalize('NFC');
        const decoded = paths.remoteName(nfc);
        if (decoded === undefined) {
          warnings.push(
            `skipped ${JSON.stringify(nodePath.join(dirRel, name))}: its name is not one Weft can send unchanged`,
          );
          continue;
        }
        remoteName = decoded;
        if (remoteName !== nfc) localNfc = nfc;
        try {
          rel = normalizePath(dirRel === '' ? remoteName : `${dirRel}/${remoteName}`);
        } catch (e) {
          warnings.push(`skipped ${JSON.stringify(nodePath.join(dirRel, name))}: ${(e as Error).message}`);
          continue;
        }
      }
      const reserved = reservedNameReason(remoteName);
      if (reserved) {
        warnings.push(`skipped ${rel}: ${reserved}`);
        continue;
      }
      if (localNfc !== undefined) {
        storedAs += 1;
        const reason = encodeName(remoteName, paths.rules).reason ?? 'quoted';
        const [at, local] = [rel, localNfc];
        defer(() => realJournal.recordLocalName(at, local, reason));
      }
      const st = stats[i];
      if (st === undefined) continue;
      if (st.isSymbolicLink() || (!st.isFile() && !st.isDirectory())) {
        warnings.push(`skipped ${rel}: symbolic links and special files are not synced`);
        continue;
      }
      const isDir = st.isDirectory();
      if (ignore.ignores(rel, isDir)) continue;
      if (detectClashes) {
        const key = caseFoldKey(rel);
        const other = folded.get(key);
        if (other !== undefined && other !== rel) {
          warnings.push(`skipped ${rel}: its name differs only by case from ${other}`);
          present.add(rel); // skipped, not deleted: never send a delete for it
          continue;
        }
        folded.set(key, rel);
      }
      const raw = rowsHere.get(rel);
      if (raw !== undefined) {
        rowsHere.delete(rel);
        // A file that matches its row is done with: nothing made or held for it (issue #16).
        if (!isDir && statMatches(raw, st)) {
          foundEntries += 1;
          continue;
        }
      }
      const e: DiskEntry = {
        path: rel,
        dir: dirAbs,
        name,
        kind: isDir ? 'dir' : 'file',
        size: isDir ? 0 : Number(st.size),
        mtimeNs: st.mtimeNs,
        inode: st.ino,
      };
      foundEntries += 1;
      if (streaming) {
        disk.set(rel, e);
        walked.push(e);
        if (walked.length >= CHUNK_ENTRIES) await handOver();
      } else settle(e, raw && toIndexRow(raw));
      if (isDir) {
        entered.add(rel);
        await walk(nodePath.join(dirAbs, name), rel);
      }
    }
    // Rows with no entry found (gone, or skipped), and what is below a subfolder not entered.
    for (const r of rowsHere.values()) known.set(r[0], toIndexRow(r));
    for (const b of index?.below ?? []) if (!entered.has(b)) await knowBelow(b);
  };

  /** A scope entry as found on disk, or undefined (absent, or skipped: a warning says why). */
  const scopeEntry = async (s: string): Promise<DiskEntry | undefined> => {
    const reserved = s
      .split('/')
      .map(reservedNameReason)
      .find((r) => r !== undefined);
    if (reserved) {
      warnings.push(`skipped ${s}: ${reserved}`);
      return undefined;
    }
    // Load ignore rules of the ancestors, then walk the subtree itself.
    let sAbs: string;
    try {
      sAbs = await paths.resolve(s);
    } catch (e) {
      if (!(e instanceof UnsafeLocalPathError)) throw e;
      // A link (or a path through one) is not synced, as in the full walk.
      warnings.push(`skipped ${s}: ${e.message}`);
      return undefined;
    }
    const st = await fsp.lstat(sAbs, { bigint: true }).catch(() => undefined);
    if (!st || st.isSymbolicLink()) return undefined;
    if (ignore.ignores(s, st.isDirectory())) return undefined;
    return {
      path: s,
      dir: nodePath.dirname(sAbs),
      name: nodePath.basename(sAbs),
      kind: st.isDirectory() ? 'dir' : 'file',
      size: st.isDirectory() ? 0 : Number(st.size),
      mtimeNs: st.mtimeNs,
      inode: st.ino,
    };
  };

  const scope = options.scope;
  if (scope === undefined || scope.includes('')) await walk(root, '');
  else {
    // (A scope entry inside another is walked with it.)
    for (const s of outermost(scope)) {
      const e = await scopeEntry(s);
      if (e !== undefined) {
        foundEntries += 1;
        if (streaming) disk.set(s, e);
      }
      if (!streaming) {
        const r = indexRowOf(realJournal, s);
        if (r?.kind === 'file') knownFilesBefore += 1;
        settle(e, r);
      }
      if (e?.kind === 'dir') await walk(absOf(e), s);
      else if (!streaming) await knowBelow(s);
    }
  }

  if (walked.length > 0) await handOver();

  const scannedFiles = foundEntries;
  const heldForComparison = disk.size + known.size + streamed;
  const scopeSet = scope === undefined || scope.includes('') ? undefined : new Set(scope);
  /** In scope: the path or one of its ancestors is a scope entry (O(depth), not O(scope)). */
  const scoped = (p: string): boolean => scopeSet === undefined || selfOrAncestorIn(p, scopeSet);

  // Moves: a known path gone from disk whose inode (and, for files, size and modification
  // time) shows up elsewhere, new. A rename keeps a file's time; a new file at a freed inode
  // the filesystem reused has its own (with the size alone, a delete and a create of the
  // same size were taken for a move). A row too fresh to keep its time (SMUDGED_MTIME, racily
  // clean) is matched by content instead: the new path is hashed now (rare: such a row at an
  // inode that shows up elsewhere).
  const goneByInode = new Map<string, Known>();
  // In path order, as the index is (of two gone rows at one inode, the later one counts).
  for (const r of [...known.values()].sort((a, b) => (a.path < b.path ? -1 : 1))) {
    if (!disk.has(r.path) && scoped(r.path) && r.inode !== 0n) goneByInode.set(`${r.kind}:${r.inode}`, r);
  }
  const movedFrom = new Set<string>();
  const sortedDisk = [...disk.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
  const candidate = (e: DiskEntry): Known | undefined => {
    if (known.has(e.path)) return undefined;
    const from = goneByInode.get(`${e.kind}:${e.inode}`);
    return from && (e.kind === 'dir' || from.size === e.size) ? from : undefined;
  };
  const smudged = sortedDisk.filter((e) => e.kind === 'file' && candidate(e)?.mtimeNs === SMUDGED_MTIME);
  if (smudged.length > 0) await diskIo.hashAll(smudged, () => true);
  const sameFile = (from: Known, e: DiskEntry): boolean =>
    from.mtimeNs === SMUDGED_MTIME
      ? e.hash !== undefined && e.hash === (whole(from)?.hash ?? null)
      : from.mtimeNs === e.mtimeNs;
  for (const e of sortedDisk) {
    const from = candidate(e);
    if (!from || (e.kind === 'file' && !sameFile(from, e))) continue;
    if (properAncestorIn(from.path, movedFrom)) continue; // inside a moved folder
    if (!from.synced && from.kind === 'file') continue; // never synced: plain create
    ops.push({ kind: 'move', from: from.path, to: e.path, replaces: false });
    movedFrom.add(from.path);
    journal.moveFiles(from.path, e.path);
    // A file moves alone; a folder takes its subtree (one pass over the index per folder move).
    const movedKeys =
      from.kind === 'file'
        ? [from.path]
        : [...known.keys()].filter((k) => k === from.path || k.startsWith(from.path + '/'));
    for (const k of movedKeys) {
      const r = known.get(k) as Known;
      known.delete(k);
      const moved = e.path + k.slice(from.path.length);
      known.set(moved, { ...r, path: moved, storedAt: r.storedAt ?? r.path });
    }
  }

  // Hashed and compared CHUNK_ENTRIES at a time, with a turn of the event loop between chunks
  // (100,000 entries compared in one go held the agent's UI and SIGTERM for seconds; issue
  // #16) and what was found so far handed to options.found (the caller may queue it and
  // start sending while the scan goes on).
  for (let from = 0; from < sortedDisk.length; from += CHUNK_ENTRIES) {
    const chunk = sortedDisk.slice(from, from + CHUNK_ENTRIES);
    await hashAll(chunk);
    for (const e of chunk) compare(e);
    letGo(await options.found?.(ops, commitThrough));
    await new Promise<void>((resolve) => setImmediate(resolve));
    stopCheck();
  }

  // Deletions: known rows in scope that are no longer on disk (top-most only: a folder
  // delete covers its content). A row the ignore rules now match (a pattern added since it
  // synced) is forgotten instead: it stops syncing and stays where it is, here and there.
  const missing = [...known.values()].filter(
    (r) => !disk.has(r.path) && !present.has(r.path) && scoped(r.path),
  );
  const gone: Known[] = [];
  for (const r of missing) {
    if (ignore.ignores(r.path, r.kind === 'dir')) journal.deleteFile(r.path);
    else gone.push(r);
  }
  gone.sort((a, b) => (a.path < b.path ? -1 : 1));
  const deletedDirs = new Set<string>();
  for (const r of gone) {
    if (properAncestorIn(r.path, deletedDirs)) continue;
    const revision = r.kind === 'file' && r.synced ? whole(r)?.syncedRev : undefined;
    ops.push(
      revision !== undefined && revision !== null
        ? { kind: 'delete', path: r.path, revision }
        : { kind: 'delete', path: r.path },
    );
    if (r.kind === 'dir') deletedDirs.add(r.path);
  }
  for (const r of gone) journal.deleteFile(r.path);
  const deletedFiles = gone.filter((r) => r.kind === 'file').length;
  // The returned closures keep this scope alive: let go of what only the scan needed.
  disk.clear();
  known.clear();
  folded.clear();
  return {
    ops,
    unsettled,
    warnings,
    scannedFiles,
    deletedFiles,
    knownFilesBefore,
    storedAs,
    hashedFiles: diskIo.hashedFiles,
    heldForComparison,
    commit: () => commitThrough(Number.POSITIVE_INFINITY),
    commitThrough,
  };
}
