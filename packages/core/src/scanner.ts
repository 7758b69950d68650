/**
 * The scanner: the only producer of operations. It compares the folder on disk with the
 * journal's index — size, mtime, inode, then content hash — and enqueues what changed.
 * Watcher events only tell it where to look.
 *
 * - A file whose mtime is younger than `settleMs` may still be being written: it is left
 *   for the next scan (reported in `unsettled`).
 * - A path that vanished while a path with the same inode and size appeared is a move.
 * - Symlinks and special files are skipped with a warning; names the path rules refuse
 *   are skipped with a warning; ignored paths are skipped silently.
 * - Names that differ only by case are reported as clashes on case-insensitive remotes and
 *   the later one is skipped (never overwriting the other).
 * - Local names are mapped back to remote names by LocalPaths (local-path.ts): `CON＿.txt`
 *   on Windows is the remote `CON.txt`. A name that is not one Weft writes (it would not
 *   come back unchanged) is skipped with a warning and left on disk.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { caseFoldKey, normalizePath } from '@weft/providers/paths';
import type { IgnoreRules } from './ignore-rules.ts';
import { IGNORE_FILE } from './ignore-rules.ts';
import type { FileRow, Journal } from './journal/journal.ts';
import { PARTIAL_PREFIX, sha256File } from './local-fs.ts';
import { LocalPaths, UnsafeLocalPathError, encodeName } from './local-path.ts';
import type { Op } from './ops.ts';

export interface ScanOptions {
  /** Only look at these subtrees (provider paths); default: everything. */
  readonly scope?: readonly string[];
  /** Files modified more recently than this are left for later. Default 1000 ms. */
  readonly settleMs?: number;
  /** The disk folds case: report names that differ only by case (a renamed-case file). Default false. */
  readonly detectCaseClashes?: boolean;
  readonly now?: () => number;
  /** How local names map to remote ones. Default: this host's rules, long names from the journal. */
  readonly paths?: LocalPaths;
}

export interface ScanResult {
  readonly ops: Op[];
  readonly unsettled: string[];
  readonly warnings: string[];
  readonly scannedFiles: number;
  /** Files (not folders) that vanished from disk in this scan, counting those inside deleted folders. */
  readonly deletedFiles: number;
  /** Files the journal knew in the scanned scope before this scan. */
  readonly knownFilesBefore: number;
  /** Entries found under an encoded local name (recorded in the journal by `commit`). */
  readonly storedAs: number;
  /**
   * Writes the index rows this scan found. The scanner changes nothing itself: the caller
   * runs this in the same transaction that queues `ops` (Journal.enqueueMany), so a crash
   * can never record a change without the operation that sends it.
   */
  readonly commit: () => void;
}

interface DiskEntry {
  path: string;
  /** Where it is on disk. */
  abs: string;
  kind: 'file' | 'dir';
  size: number;
  mtimeNs: bigint;
  inode: bigint;
}

function inScope(p: string, scope: readonly string[] | undefined): boolean {
  return scope === undefined || scope.some((s) => s === '' || p === s || p.startsWith(s + '/'));
}

export async function scan(
  root: string,
  realJournal: Journal,
  ignore: IgnoreRules,
  options: ScanOptions = {},
): Promise<ScanResult> {
  const now = options.now ?? Date.now;
  // Reads go to the journal; writes are deferred into `commit` (see ScanResult.commit).
  const deferred: (() => void)[] = [];
  const journal = {
    filesUnder: (dir: string) => realJournal.filesUnder(dir),
    upsertFile: (row: FileRow) => void deferred.push(() => realJournal.upsertFile(row)),
    deleteFile: (p: string) => void deferred.push(() => realJournal.deleteFile(p)),
    deleteFilesUnder: (p: string) => void deferred.push(() => realJournal.deleteFilesUnder(p)),
    moveFiles: (from: string, to: string) => void deferred.push(() => realJournal.moveFiles(from, to)),
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

  // Load .weftignore files first so they apply to this very scan.
  const walk = async (dirAbs: string, dirRel: string): Promise<void> => {
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
    for (const name of names) {
      if (name.startsWith(PARTIAL_PREFIX)) continue;
      // Back to the remote name (NFC first: macOS may hand us NFD).
      const remoteName = paths.remoteName(name.normalize('NFC'));
      if (remoteName === undefined) {
        warnings.push(
          `skipped ${JSON.stringify(nodePath.join(dirRel, name))}: its name is not one Weft can send unchanged`,
        );
        continue;
      }
      let rel: string;
      try {
        rel = normalizePath(dirRel === '' ? remoteName : `${dirRel}/${remoteName}`);
      } catch (e) {
        warnings.push(`skipped ${JSON.stringify(nodePath.join(dirRel, name))}: ${(e as Error).message}`);
        continue;
      }
      if (remoteName !== name.normalize('NFC')) {
        storedAs += 1;
        const reason = encodeName(remoteName, paths.rules).reason ?? 'quoted';
        deferred.push(() => realJournal.recordLocalName(rel, name.normalize('NFC'), reason));
      }
      const abs = nodePath.join(dirAbs, name);
      let st: import('node:fs').BigIntStats;
      try {
        st = await fsp.lstat(abs, { bigint: true });
      } catch {
        continue;
      }
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
      disk.set(rel, {
        path: rel,
        abs,
        kind: isDir ? 'dir' : 'file',
        size: isDir ? 0 : Number(st.size),
        mtimeNs: st.mtimeNs,
        inode: st.ino,
      });
      if (isDir) await walk(abs, rel);
    }
  };

  const scope = options.scope;
  if (scope === undefined || scope.includes('')) await walk(root, '');
  else {
    for (const s of scope) {
      // Load ignore rules of the ancestors, then walk the subtree itself.
      let sAbs: string;
      try {
        sAbs = await paths.resolve(s);
      } catch (e) {
        if (!(e instanceof UnsafeLocalPathError)) throw e;
        // A link (or a path through one) is not synced, as in the full walk.
        warnings.push(`skipped ${s}: ${e.message}`);
        continue;
      }
      const st = await fsp.lstat(sAbs, { bigint: true }).catch(() => undefined);
      if (!st || st.isSymbolicLink()) continue;
      if (ignore.ignores(s, st.isDirectory())) continue;
      disk.set(s, {
        path: s,
        abs: sAbs,
        kind: st.isDirectory() ? 'dir' : 'file',
        size: st.isDirectory() ? 0 : Number(st.size),
        mtimeNs: st.mtimeNs,
        inode: st.ino,
      });
      if (st.isDirectory()) await walk(sAbs, s);
    }
  }

  const known = new Map<string, FileRow>();
  for (const s of scope ?? ['']) for (const r of journal.filesUnder(s)) known.set(r.path, r);
  const knownFilesBefore = [...known.values()].filter((r) => r.kind === 'file').length;

  const ops: Op[] = [];
  const nowNs = BigInt(Math.floor(now())) * 1_000_000n;

  // Moves: a known path gone from disk whose inode (and size, for files) shows up elsewhere, new.
  const goneByInode = new Map<string, FileRow>();
  for (const r of known.values()) {
    if (!disk.has(r.path) && inScope(r.path, scope) && r.inode !== 0n)
      goneByInode.set(`${r.kind}:${r.inode}`, r);
  }
  const movedFrom = new Set<string>();
  const sortedDisk = [...disk.values()].sort((a, b) => (a.path < b.path ? -1 : 1));
  for (const e of sortedDisk) {
    if (known.has(e.path)) continue;
    const from = goneByInode.get(`${e.kind}:${e.inode}`);
    if (!from || (e.kind === 'file' && from.size !== e.size)) continue;
    if ([...movedFrom].some((m) => from.path.startsWith(m + '/'))) continue; // inside a moved folder
    if (from.syncedRev === null && from.kind === 'file') continue; // never synced: plain create
    ops.push({ kind: 'move', from: from.path, to: e.path, replaces: false });
    movedFrom.add(from.path);
    journal.moveFiles(from.path, e.path);
    for (const [k, r] of [...known]) {
      if (k !== from.path && !k.startsWith(from.path + '/')) continue;
      known.delete(k);
      const moved = e.path + k.slice(from.path.length);
      known.set(moved, { ...r, path: moved });
    }
  }

  for (const e of sortedDisk) {
    const row = known.get(e.path);
    if (e.kind === 'dir') {
      if (!row) {
        ops.push({ kind: 'mkdir', path: e.path, created: true });
        journal.upsertFile(newRow(e, null));
      } else if (row.kind !== 'dir') {
        // A file became a folder: delete the file, create the folder.
        ops.push({ kind: 'delete', path: e.path });
        ops.push({ kind: 'mkdir', path: e.path, created: true });
        journal.upsertFile(newRow(e, null));
      } else if (row.inode !== e.inode) {
        journal.upsertFile({ ...row, inode: e.inode, mtimeNs: e.mtimeNs });
      }
      continue;
    }
    if (
      row &&
      row.kind === 'file' &&
      row.size === e.size &&
      row.mtimeNs === e.mtimeNs &&
      row.inode === e.inode &&
      row.hash
    ) {
      continue; // unchanged by every cheap measure
    }
    if (nowNs - e.mtimeNs < settleNs) {
      unsettled.push(e.path);
      continue;
    }
    let hash: string;
    try {
      hash = await sha256File(e.abs);
      // Changed while we hashed: leave it for the next scan.
      const again = await fsp.lstat(e.abs, { bigint: true });
      if (again.mtimeNs !== e.mtimeNs || Number(again.size) !== e.size) {
        unsettled.push(e.path);
        continue;
      }
    } catch {
      continue;
    }
    if (row && row.kind === 'dir') {
      ops.push({ kind: 'delete', path: e.path });
      ops.push({ kind: 'put', path: e.path, hash, size: e.size, created: true });
      journal.deleteFilesUnder(e.path);
      journal.upsertFile({ ...newRow(e, hash) });
      continue;
    }
    if (row && row.hash === hash) {
      journal.upsertFile({ ...row, size: e.size, mtimeNs: e.mtimeNs, inode: e.inode }); // touched, not changed
      continue;
    }
    if (!row || row.syncedHash !== hash) {
      ops.push({ kind: 'put', path: e.path, hash, size: e.size, created: !row || row.syncedRev === null });
    }
    journal.upsertFile(
      row ? { ...row, size: e.size, mtimeNs: e.mtimeNs, inode: e.inode, hash } : newRow(e, hash),
    );
  }

  // Deletions: known rows in scope that are no longer on disk (top-most only: a folder
  // delete covers its content).
  const gone = [...known.values()]
    .filter((r) => !disk.has(r.path) && !present.has(r.path) && inScope(r.path, scope))
    .sort((a, b) => (a.path < b.path ? -1 : 1));
  const deletedDirs: string[] = [];
  for (const r of gone) {
    if (deletedDirs.some((d) => r.path.startsWith(d + '/'))) continue;
    ops.push(
      r.kind === 'file' && r.syncedRev !== null
        ? { kind: 'delete', path: r.path, revision: r.syncedRev }
        : { kind: 'delete', path: r.path },
    );
    if (r.kind === 'dir') deletedDirs.push(r.path);
  }
  for (const r of gone) journal.deleteFile(r.path);
  const deletedFiles = gone.filter((r) => r.kind === 'file').length;

  return {
    ops,
    unsettled,
    warnings,
    scannedFiles: disk.size,
    deletedFiles,
    knownFilesBefore,
    storedAs,
    commit: () => {
      for (const w of deferred) w();
    },
  };
}

function newRow(e: DiskEntry, hash: string | null): FileRow {
  return {
    path: e.path,
    kind: e.kind,
    size: e.size,
    mtimeNs: e.mtimeNs,
    inode: e.inode,
    hash,
    syncedRev: null,
    syncedHash: null,
    signature: null,
    signatureBlock: null,
  };
}
