/**
 * The client journal: local index, durable operation queue, transfer state and delta
 * history in SQLite (better-sqlite3, WAL). Schema as numbered .sql files in ./sql
 * (NNN_name.sql produces version NNN, the database's user_version), applied by the shared
 * runner in @weft/providers/sqlite-migrations.
 */
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { migrate } from '@weft/providers/sqlite-migrations';
import { caseFoldKey } from '@weft/providers/paths';
import { MAX_OWN_PER_ENTRY } from '@weft/wire';
import type { Op } from '../ops.ts';
import { privateDatabaseFile } from '../private-file.ts';
import { ACTIVITY_KEPT, ActivityLog, type ActivityRecord } from './activity.ts';
import { Checkpointer } from './checkpointer.ts';
import { PathRecords } from './path-records.ts';
import { OpQueueStore, type QueuedOp } from './op-queue.ts';
import { ROWS_PER_STATEMENT, valuesList } from './rows.ts';
import {
  type FileRecord,
  type FileRow,
  type IndexRow,
  RACY_MS,
  SMUDGED_MTIME,
  type UploadRow,
  filesUnderPaged,
  indexUnderPaged,
  toRow,
} from './file-rows.ts';

export type { ActivityRecord } from './activity.ts';
export type { QueuedOp } from './op-queue.ts';
export type { FileRow, IndexRow, UploadRow } from './file-rows.ts';
export { SMUDGED_MTIME } from './file-rows.ts';

const SQL_DIR = fileURLToPath(new URL('./sql/', import.meta.url));

export class Journal {
  readonly db: Database.Database;

  /** The WAL's checkpoints, in a worker thread (checkpointer.ts); undefined: in this connection. */
  readonly checkpointer: Checkpointer | undefined;

  /**
   * `checkpointInWorker` (default true): the WAL's checkpoints, and their disk syncs, in a
   * worker thread instead of on the event loop (checkpointer.ts).
   */
  constructor(file: string, o: { readonly checkpointInWorker?: boolean } = {}) {
    privateDatabaseFile(file);
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    // WAL + NORMAL: a process crash (kill -9) loses no committed transaction; only a power
    // loss may roll back the last few, which the next scan redoes (the server recognises
    // content it already has, so nothing is duplicated).
    this.db.pragma('synchronous = NORMAL');
    this.db.pragma('foreign_keys = ON');
    // A 4 MiB page cache instead of better-sqlite3's 16 MB: a journal of 100,000 files
    // filled it, a dozen MiB of the agent's peak RSS (issue #16); pages left out come back
    // from the OS's file cache.
    this.db.pragma('cache_size = -4096');
    this.db.defaultSafeIntegers(true);
    // The key of the files_case_fold index (ensureCaseFoldIndex): registered before any write
    // to `files`, since a journal that has the index computes it on every insert.
    this.db.function('weft_case_fold', { deterministic: true }, (p: unknown) => caseFoldKey(String(p)));
    this.migrate();
    this.ops = new OpQueueStore(this.db, (text) => this.sql(text));
    this.activity = new ActivityLog(this.db, (text) => this.sql(text));
    this.records = new PathRecords((text) => this.sql(text));
    this.checkpointer =
      o.checkpointInWorker === false || file === ':memory:' ? undefined : Checkpointer.start(this.db, file);
  }

  private migrate(): void {
    migrate(this.db, SQL_DIR, 'journal');
  }

  /** Prepared statements by text: preparing one costs more than running it (issue #16 profile). */
  private readonly statements = new Map<string, Database.Statement>();

  private sql(text: string): Database.Statement {
    let st = this.statements.get(text);
    if (st === undefined) {
      st = this.db.prepare(text);
      this.statements.set(text, st);
    }
    return st;
  }

  close(): void {
    this.flushActivity();
    this.checkpointerEnded = this.checkpointer?.close() ?? Promise.resolve();
    this.db.close();
  }

  /**
   * Resolves once nothing of the journal touches its files any more (the checkpoint worker
   * ended too): await it before removing the journal's folder.
   */
  closed(): Promise<void> {
    return this.checkpointerEnded;
  }

  private checkpointerEnded: Promise<void> = Promise.resolve();

  /** False once closed (an engine's last status events may come after its stop). */
  get isOpen(): boolean {
    return this.db.open;
  }

  // ---------------------------------------------------------------- meta

  getMeta(key: string): string | undefined {
    const r = this.sql('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
    return r?.value;
  }

  setMeta(key: string, value: string): void {
    this.sql(
      'INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value',
    ).run(key, value);
  }

  // ---------------------------------------------------------------- files

  getFile(path: string): FileRow | undefined {
    const r = this.sql('SELECT * FROM files WHERE path = ?').get(path) as FileRecord | undefined;
    return r ? toRow(r) : undefined;
  }

  /**
   * The revision `path` was last synced at: null when never (or no row). One column, not a
   * whole row (an upload asks it of every file it sends; issue #16).
   */
  syncedRevOf(path: string): string | null {
    const r = this.sql('SELECT synced_rev FROM files WHERE path = ?').get(path) as
      { synced_rev: string | null } | undefined;
    return r?.synced_rev ?? null;
  }

  /**
   * What a bundle upload needs of each path's row (absent: no row) — what the scan saw and
   * its synced revision — for many paths in one statement, not one per file (issue #16).
   */
  uploadRows(paths: readonly string[]): Map<string, UploadRow> {
    const out = new Map<string, UploadRow>();
    if (paths.length === 0) return out;
    const rows = this.sql(
      'SELECT path, kind, size, mtime_ns, inode, hash, synced_rev FROM files WHERE path IN (SELECT value FROM json_each(?))',
    )
      .raw(true)
      .all(JSON.stringify(paths)) as [
      string,
      'file' | 'dir',
      bigint,
      bigint,
      bigint,
      string | null,
      string | null,
    ][];
    for (const [path, kind, size, mtimeNs, inode, hash, syncedRev] of rows)
      out.set(path, { kind, size: Number(size), mtimeNs, inode, hash, syncedRev });
    return out;
  }

  /**
   * When `path` is a file synced at revision `rev` whose content is the synced one (its hash
   * is its synced hash) — what an echo of our own upload finds (discovery/remote.ts) — its
   * synced hash (null if it has none); otherwise undefined. One indexed look-up, no whole row.
   */
  syncedEchoHash(path: string, rev: string): string | null | undefined {
    const r = this.sql(
      "SELECT synced_hash FROM files WHERE path = ? AND kind = 'file' AND synced_rev = ? AND hash IS synced_hash",
    ).get(path, rev) as { synced_hash: string | null } | undefined;
    return r?.synced_hash;
  }

  /**
   * syncedEchoHash for many entries in one statement (a page of the change feed: issue #16):
   * each path whose row is a file synced at the entry's revision with its synced content
   * maps to its synced hash (null if none); the others are absent. Each path once.
   */
  syncedEchoHashes(entries: readonly { path: string; revision: string }[]): Map<string, string | null> {
    const out = new Map<string, string | null>();
    if (entries.length === 0) return out;
    const revs = new Map(entries.map((e) => [e.path, e.revision]));
    const rows = this.sql(
      "SELECT path, synced_rev, synced_hash FROM files WHERE path IN (SELECT value FROM json_each(?)) AND kind = 'file' AND hash IS synced_hash",
    )
      .raw(true)
      .all(JSON.stringify([...revs.keys()])) as [string, string | null, string | null][];
    for (const [path, rev, hash] of rows) if (rev !== null && revs.get(path) === rev) out.set(path, hash);
    return out;
  }

  /** The index holds no row at all (a first scan). */
  isEmpty(): boolean {
    return this.sql('SELECT 1 FROM files LIMIT 1').get() === undefined;
  }

  /** How many files (not folders) the index holds: one row the triggers keep (sql/006). */
  fileCount(): number {
    const r = this.sql('SELECT n FROM file_count WHERE id = 0').get() as { n: number | bigint };
    return Number(r.n);
  }

  /**
   * Make the index caseFoldTwins reads (once; kept from then on). Not a migration: a row
   * insert costs ~3 µs more with it (a JS call and a second B-tree key), which only a device
   * on a disk that folds case needs to pay. Building it reads every row once.
   */
  ensureCaseFoldIndex(): void {
    this.db.exec('CREATE INDEX IF NOT EXISTS files_case_fold ON files (weft_case_fold(path))');
  }

  /**
   * The paths whose case-fold key is `p`'s, `p` itself left out: one seek of the
   * files_case_fold index (ensureCaseFoldIndex) where it exists, not a read of a folder's
   * rows (issue #16); without it, a scan of the table.
   */
  caseFoldTwins(p: string): string[] {
    const rows = this.sql('SELECT path FROM files WHERE weft_case_fold(path) = ? AND path <> ?')
      .raw(true)
      .all(caseFoldKey(p), p) as [string][];
    return rows.map(([path]) => path);
  }

  allFiles(): FileRow[] {
    return (this.sql('SELECT * FROM files ORDER BY path').all() as FileRecord[]).map(toRow);
  }

  /** Rows at or below `dir` ('' = all). */
  filesUnder(dir: string): FileRow[] {
    if (dir === '') return this.allFiles();
    return (
      this.sql('SELECT * FROM files WHERE path = ? OR (path >= ? AND path < ?) ORDER BY path').all(
        dir,
        dir + '/',
        dir + '0',
      ) as FileRecord[]
    ).map(toRow);
  }

  /**
   * Rows at or below `dir` ('' = all), in path order, read a page at a time with a turn of
   * the event loop between pages (file-rows.ts).
   */
  filesUnderPaged(dir: string, pageSize = 2_000): AsyncGenerator<FileRow> {
    return filesUnderPaged((text) => this.sql(text), dir, pageSize);
  }

  /** What a scan compares the disk with, a page at a time: only the stat columns (file-rows.ts). */
  indexUnderPaged(dir: string, pageSize = 2_000): AsyncGenerator<IndexRow> {
    return indexUnderPaged((text) => this.sql(text), dir, pageSize);
  }

  upsertFile(row: FileRow): void {
    // "Racily clean" (as git calls it): a file whose mtime is this recent may still change
    // within the same timestamp tick (a jiffy on ext4, 2 s on FAT) without its size or
    // mtime moving. Record such a stat smudged, so the next look re-hashes the content
    // instead of trusting size + mtime + inode.
    if (row.kind === 'file' && row.mtimeNs > BigInt(Date.now() - RACY_MS) * 1_000_000n)
      row = { ...row, mtimeNs: SMUDGED_MTIME };
    // Positional parameters: binding a row by name cost 1.7x as much (4.5 vs 2.7 µs a row,
    // twice per file of a drop; issue #16).
    this.sql(
      `INSERT INTO files(path, kind, size, mtime_ns, inode, hash, synced_rev, synced_hash, signature, signature_block)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT(path) DO UPDATE SET kind = excluded.kind, size = excluded.size, mtime_ns = excluded.mtime_ns,
           inode = excluded.inode, hash = excluded.hash, synced_rev = excluded.synced_rev,
           synced_hash = excluded.synced_hash, signature = excluded.signature, signature_block = excluded.signature_block`,
    ).run(
      row.path,
      row.kind,
      row.size,
      row.mtimeNs,
      row.inode,
      row.hash,
      row.syncedRev,
      row.syncedHash,
      row.signature,
      row.signatureBlock,
    );
  }

  /**
   * The row at `path`, if there is one, was synced: its synced revision, content hash and
   * signature set, the rest kept. One UPDATE, not the whole row read and written back (every
   * uploaded file's outcome; issue #16).
   */
  setSynced(
    path: string,
    rev: string,
    hash: string,
    signature: Buffer | null,
    signatureBlock: number | null,
  ): void {
    this.sql(
      'UPDATE files SET synced_rev = ?, synced_hash = ?, signature = ?, signature_block = ? WHERE path = ?',
    ).run(rev, hash, signature, signatureBlock, path);
  }

  /**
   * setSynced for many rows without a signature, in one statement (a bundle's outcomes: one
   * statement a file was a measurable share of the agent's CPU per upload, issue #16). A path
   * given twice: the last one holds.
   */
  setSyncedMany(rows: readonly { path: string; rev: string; hash: string }[]): void {
    if (rows.length === 1) {
      const r = rows[0] as (typeof rows)[number];
      return this.setSynced(r.path, r.rev, r.hash, null, null);
    }
    const last = new Map(rows.map((r) => [r.path, [r.path, r.rev, r.hash]]));
    this.runRows(
      (values) =>
        `WITH v(path, rev, hash) AS (VALUES ${values}) UPDATE files SET synced_rev = v.rev, synced_hash = v.hash,
         signature = NULL, signature_block = NULL FROM v WHERE files.path = v.path`,
      [...last.values()],
      3,
    );
  }

  /**
   * Run `text` with its VALUES list for up to ROWS_PER_STATEMENT rows at a time (`width`
   * values each), prepared once per row count: a multi-row statement costs ~1.7-2.4 µs a
   * row against ~2.3-2.7 for one statement a row, and a JSON array through json_each
   * ~2.8-3.7 (the values are parsed again per column; issue #16, measured alone).
   */
  runRows(text: (values: string) => string, rows: readonly (readonly unknown[])[], width: number): void {
    for (let i = 0; i < rows.length; i += ROWS_PER_STATEMENT) {
      const chunk = rows.slice(i, i + ROWS_PER_STATEMENT);
      this.sql(text(valuesList(chunk.length, width))).run(chunk.flat());
    }
  }

  deleteFile(path: string): void {
    this.sql('DELETE FROM files WHERE path = ?').run(path);
  }

  deleteFilesUnder(dir: string): void {
    this.sql('DELETE FROM files WHERE path = ? OR (path >= ? AND path < ?)').run(dir, dir + '/', dir + '0');
  }

  /** Rename the rows of a subtree (after a local or remote move). */
  moveFiles(from: string, to: string): void {
    const rows = this.filesUnder(from);
    this.db.transaction(() => {
      this.deleteFilesUnder(to);
      this.deleteFilesUnder(from);
      for (const r of rows) this.upsertFile({ ...r, path: to + r.path.slice(from.length) });
    })();
  }

  // ---------------------------------------------------------------- queue (op-queue.ts)

  /** The operation queue and its ops table, written once per transaction. */
  private readonly ops: OpQueueStore;
  /** Recent activity, written once per turn (activity.ts). */
  private readonly activity: ActivityLog;
  private readonly records: PathRecords;

  /** Times the queue's changes were written to the ops table (tests: once per transaction). */
  get queueWrites(): number {
    return this.ops.writes;
  }

  /** Add an operation, coalescing it with those waiting (one transaction). */
  enqueue(op: Op): void {
    this.enqueueMany([op]);
  }

  /**
   * Add operations in order, coalescing them with those waiting, in one transaction
   * (together with `alsoInTransaction`, e.g. the index rows the scan produced, so a crash
   * never records a change without the operation that sends it). Returns how many
   * operations the queue has now. Costs O(ops · depth · log queue), not O(queue): callers
   * with very many operations should still pass them in batches (the scan does) so one
   * transaction never holds the event loop for long.
   */
  enqueueMany(ops: readonly Op[], alsoInTransaction?: () => void): number {
    return this.ops.enqueueMany(ops, alsoInTransaction);
  }

  /**
   * The waiting operations in order (from memory: no table read). The same array until the
   * queue next changes: callers that ask once per file of a 100,000-file queue copy it once.
   */
  pendingOps(): readonly QueuedOp[] {
    return this.ops.pendingOps();
  }

  /**
   * Where the file queued at `path` by operation `id` is now on disk: the path carried
   * through every move queued after it whose source is the path or a folder above it.
   * O(queued moves), whatever the length of the queue.
   */
  whereNow(id: number, path: string): string {
    return this.ops.whereNow(id, path);
  }

  /** The queued moves, in queue order: O(moves), whatever the length of the queue. */
  queuedMoves(): QueuedOp[] {
    return this.ops.queuedMoves();
  }

  /** How many operations wait. */
  pendingCount(): number {
    return this.ops.pendingCount();
  }

  /** Remove a finished operation and apply its journal effects in the same transaction. */
  completeOp(id: number, effects: () => void): void {
    this.ops.completeOp(id, effects);
  }

  /**
   * Run `fn` in one transaction; the queue's changes are written once, at its end. Nested
   * calls run inside the outer one (no savepoint of their own: issue #16).
   */
  transaction<T>(fn: () => T): T {
    return this.ops.transaction(fn);
  }

  // ---------------------------------------------------------------- sent contents

  /** Record that these contents are about to be sent (see sql/002_sent.sql). */
  markSent(items: readonly { path: string; sha256: string }[]): void {
    if (items.length === 0) return;
    // One statement per ROWS_PER_STATEMENT files of a bundle, not one a file (issue #16).
    this.db.transaction(() =>
      this.runRows(
        (values) => `INSERT OR IGNORE INTO sent(path, sha256) VALUES ${values}`,
        items.map((i) => [i.path, i.sha256]),
        2,
      ),
    )();
  }

  wasSent(path: string, sha256: string): boolean {
    return this.sql('SELECT 1 FROM sent WHERE path = ? AND sha256 = ?').get(path, sha256) !== undefined;
  }

  /**
   * Contents sent to these paths whose outcome was never recorded (an agent killed with them
   * on the wire, a request cut off), by path, at most MAX_OWN_PER_ENTRY each: a write names
   * them, so the server takes a file holding one as ours (wire/write-rule.ts; issue #16). The
   * content about to be sent may be among them: harmless, the same content there is never a
   * conflict anyway.
   */
  unanswered(paths: readonly string[]): Map<string, string[]> {
    const out = new Map<string, string[]>();
    if (paths.length === 0) return out;
    const rows = this.sql('SELECT path, sha256 FROM sent WHERE path IN (SELECT value FROM json_each(?))')
      .raw(true)
      .all(JSON.stringify(paths)) as [string, string][];
    for (const [path, sha] of rows) {
      const list = out.get(path) ?? [];
      if (list.length < MAX_OWN_PER_ENTRY) list.push(sha);
      out.set(path, list);
    }
    return out;
  }

  clearSent(path: string): void {
    this.sql('DELETE FROM sent WHERE path = ?').run(path);
  }

  /** clearSent for many paths in one statement (a bundle's outcomes, issue #16). */
  clearSentMany(paths: readonly string[]): void {
    if (paths.length === 1) return this.clearSent(paths[0] as string);
    if (paths.length > 0)
      this.sql('DELETE FROM sent WHERE path IN (SELECT value FROM json_each(?))').run(JSON.stringify(paths));
  }

  // ---------------------------------------------------------------- local names, transfers, delta history (path-records.ts)

  /** Record that the remote entry `path` is stored on disk as `localName` (sql/003). */
  recordLocalName(path: string, localName: string, reason: string): void {
    this.records.recordLocalName(path, localName, reason);
  }

  /** Forget the local names of `path` and everything under it. */
  forgetLocalNamesUnder(path: string): void {
    this.records.forgetLocalNamesUnder(path);
  }

  /** Every entry stored under another local name, by remote path. */
  localNames(): { path: string; localName: string; reason: string }[] {
    return this.records.localNames();
  }

  /** The remote name a local (long-form) name stands for, if this journal recorded it. */
  remoteNameOf(localName: string): string | undefined {
    return this.records.remoteNameOf(localName);
  }

  /** The large upload of `path` in progress, if one was started (sql/001 `transfers`). */
  getTransfer(path: string): { transferId: string; hash: string; size: number } | undefined {
    return this.records.getTransfer(path);
  }

  /** Remember a large upload just started, so a restart resumes it instead of starting over. */
  saveTransfer(path: string, transferId: string, hash: string, size: number): void {
    this.records.saveTransfer(path, transferId, hash, size);
  }

  /** The large upload of `path` is committed (or abandoned). */
  clearTransfer(path: string): void {
    this.records.clearTransfer(path);
  }

  /** The block-size history of `path` (HyCloud Eq. 1); undefined when none or unreadable. */
  deltaHistory(path: string): { probs: number[]; n: number } | undefined {
    return this.records.deltaHistory(path);
  }

  setDeltaHistory(path: string, probs: readonly number[], n: number): void {
    this.records.setDeltaHistory(path, probs, n);
  }

  // ---------------------------------------------------------------- activity (activity.ts)

  /** Recent activity kept: the status shows these, and they survive a restart. */
  static readonly ACTIVITY_KEPT = ACTIVITY_KEPT;

  /** Record one activity item, written with the others of this turn (activity.ts). */
  addActivity(item: ActivityRecord): void {
    this.activity.add(item);
  }

  /** Write the recorded activity now (one transaction); how many transactions ran (0 or 1). */
  flushActivity(): number {
    return this.activity.flush();
  }

  /** The last ACTIVITY_KEPT items, newest first. */
  recentActivity(): { atMs: number; kind: string; path: string; detail?: string; row?: string }[] {
    return this.activity.recent();
  }
}
