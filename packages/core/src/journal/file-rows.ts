/**
 * The journal's `files` rows as the agent reads them (split out of journal.ts): the row
 * types, their conversion from SQLite records, and the paged reads of a subtree.
 */
import type Database from 'better-sqlite3';
import { type RawIndexRow, toIndexRow } from './scan-index.ts';

export interface FileRow {
  path: string;
  kind: 'file' | 'dir';
  size: number;
  mtimeNs: bigint;
  inode: bigint;
  hash: string | null;
  syncedRev: string | null;
  syncedHash: string | null;
  signature: Buffer | null;
  signatureBlock: number | null;
}

/** A row as a scan compares it (Journal.indexUnderPaged): the stat, and whether it has a hash and a synced revision. */
export interface IndexRow {
  readonly path: string;
  readonly kind: 'file' | 'dir';
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly inode: bigint;
  /** The row holds a content hash (hash IS NOT NULL). */
  readonly hashed: boolean;
  /** The row was synced (synced_rev IS NOT NULL). */
  readonly synced: boolean;
}

export interface FileRecord {
  path: string;
  kind: 'file' | 'dir';
  size: number | bigint;
  mtime_ns: number | bigint;
  inode: number | bigint;
  hash: string | null;
  synced_rev: string | null;
  synced_hash: string | null;
  signature: Buffer | null;
  signature_block: number | bigint | null;
}

/** Stats younger than this are not trusted to show a change (coarsest common granularity). */
export const RACY_MS = 2_000;
/** The mtime recorded for a racily clean file: matches no real stat. */
export const SMUDGED_MTIME = -1n;

/** A row as a bundle upload reads it (Journal.uploadRows; sync/propagate/upload-read.ts). */
export interface UploadRow {
  readonly kind: 'file' | 'dir';
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly inode: bigint;
  readonly hash: string | null;
  readonly syncedRev: string | null;
}

export function toRow(r: FileRecord): FileRow {
  return {
    path: r.path,
    kind: r.kind,
    size: Number(r.size),
    mtimeNs: BigInt(r.mtime_ns),
    inode: BigInt(r.inode),
    hash: r.hash,
    syncedRev: r.synced_rev,
    syncedHash: r.synced_hash,
    signature: r.signature,
    signatureBlock: r.signature_block === null ? null : Number(r.signature_block),
  };
}

type Sql = (text: string) => Database.Statement;

/**
 * Rows at or below `dir` ('' = all), in path order, read a page at a time with a turn of
 * the event loop between pages: 100,000 rows read at once held the agent for seconds.
 */
export async function* filesUnderPaged(sql: Sql, dir: string, pageSize: number): AsyncGenerator<FileRow> {
  const page =
    dir === ''
      ? sql('SELECT * FROM files WHERE path > ? ORDER BY path LIMIT ?')
      : sql(
          'SELECT * FROM files WHERE (path = ? OR (path >= ? AND path < ?)) AND path > ? ORDER BY path LIMIT ?',
        );
  let last = '';
  for (;;) {
    const rows = (
      dir === '' ? page.all(last, pageSize) : page.all(dir, dir + '/', dir + '0', last, pageSize)
    ) as FileRecord[];
    for (const r of rows) yield toRow(r);
    if (rows.length < pageSize) return;
    last = (rows[rows.length - 1] as FileRecord).path;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/**
 * What a scan compares the disk with, for the rows at or below `dir` ('' = all), in path
 * order, a page at a time with a turn of the event loop between pages: only the columns
 * the stat comparison needs (no hashes, revisions or signatures: a third of the memory and
 * of the time of whole rows — issue #16); the scanner reads a whole row (getFile) only for
 * an entry that changed.
 */
export async function* indexUnderPaged(sql: Sql, dir: string, pageSize: number): AsyncGenerator<IndexRow> {
  const columns = "path, kind = 'dir', size, mtime_ns, inode, hash IS NOT NULL, synced_rev IS NOT NULL";
  const page = (
    dir === ''
      ? sql(`SELECT ${columns} FROM files WHERE path > ? ORDER BY path LIMIT ?`)
      : sql(
          `SELECT ${columns} FROM files WHERE (path = ? OR (path >= ? AND path < ?)) AND path > ? ORDER BY path LIMIT ?`,
        )
  ).raw(true);
  let last = '';
  for (;;) {
    const rows = (
      dir === '' ? page.all(last, pageSize) : page.all(dir, dir + '/', dir + '0', last, pageSize)
    ) as RawIndexRow[];
    for (const row of rows) yield toIndexRow(row);
    if (rows.length < pageSize) return;
    last = (rows[rows.length - 1] as [string, ...bigint[]])[0];
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}
