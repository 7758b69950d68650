/**
 * The journal's small per-path records beside the files: names stored locally under another
 * name (sql/003 `local_names`), large uploads in progress (sql/001 `transfers`) and the
 * block-size history of deltas (HyCloud Eq. 1, `delta_history`). The Journal owns the
 * database and delegates these methods here, as it does for the op queue and the activity.
 */
import type Database from 'better-sqlite3';

export class PathRecords {
  constructor(
    /** The journal's prepared statement for a text (prepared once). */
    private readonly sql: (text: string) => Database.Statement,
  ) {}

  // ---------------------------------------------------------------- local names

  /** Record that the remote entry `path` is stored on disk as `localName` (sql/003). */
  recordLocalName(path: string, localName: string, reason: string): void {
    this.sql(
      'INSERT INTO local_names(path, local_name, reason) VALUES (?, ?, ?) ON CONFLICT(path) DO UPDATE SET local_name = excluded.local_name, reason = excluded.reason',
    ).run(path, localName, reason);
  }

  /** Forget the local names of `path` and everything under it. */
  forgetLocalNamesUnder(path: string): void {
    this.sql('DELETE FROM local_names WHERE path = ? OR (path >= ? AND path < ?)').run(
      path,
      path + '/',
      path + '0',
    );
  }

  /** Every entry stored under another local name, by remote path. */
  localNames(): { path: string; localName: string; reason: string }[] {
    const rows = this.sql('SELECT path, local_name, reason FROM local_names ORDER BY path').all() as {
      path: string;
      local_name: string;
      reason: string;
    }[];
    return rows.map((r) => ({ path: r.path, localName: r.local_name, reason: r.reason }));
  }

  /** The remote name a local (long-form) name stands for, if this journal recorded it. */
  remoteNameOf(localName: string): string | undefined {
    const r = this.sql('SELECT path FROM local_names WHERE local_name = ? LIMIT 1').get(localName) as
      { path: string } | undefined;
    return r === undefined ? undefined : r.path.slice(r.path.lastIndexOf('/') + 1);
  }

  // ---------------------------------------------------------------- transfers

  /** The large upload of `path` in progress, if one was started (sql/001 `transfers`). */
  getTransfer(path: string): { transferId: string; hash: string; size: number } | undefined {
    const r = this.sql('SELECT transfer_id, hash, size FROM transfers WHERE path = ?').get(path) as
      { transfer_id: string; hash: string; size: bigint } | undefined;
    return r && { transferId: r.transfer_id, hash: r.hash, size: Number(r.size) };
  }

  /** Remember a large upload just started, so a restart resumes it instead of starting over. */
  saveTransfer(path: string, transferId: string, hash: string, size: number): void {
    this.sql(
      'INSERT INTO transfers(path, transfer_id, hash, size) VALUES (?, ?, ?, ?) ON CONFLICT(path) DO UPDATE SET transfer_id = excluded.transfer_id, hash = excluded.hash, size = excluded.size',
    ).run(path, transferId, hash, size);
  }

  /** The large upload of `path` is committed (or abandoned). */
  clearTransfer(path: string): void {
    this.sql('DELETE FROM transfers WHERE path = ?').run(path);
  }

  // ---------------------------------------------------------------- delta history

  /**
   * The block-size history of `path` (HyCloud Eq. 1), as stored: undefined when there is
   * none or the stored row is unreadable.
   */
  deltaHistory(path: string): { probs: number[]; n: number } | undefined {
    const r = this.sql('SELECT block_probs, n FROM delta_history WHERE path = ?').get(path) as
      { block_probs: string; n: bigint } | undefined;
    if (!r) return undefined;
    try {
      const probs = JSON.parse(r.block_probs) as unknown;
      if (Array.isArray(probs) && probs.every((x) => typeof x === 'number')) return { probs, n: Number(r.n) };
    } catch {
      /* corrupt row: treated as none */
    }
    return undefined;
  }

  setDeltaHistory(path: string, probs: readonly number[], n: number): void {
    this.sql(
      'INSERT INTO delta_history(path, block_probs, n) VALUES (?, ?, ?) ON CONFLICT(path) DO UPDATE SET block_probs = excluded.block_probs, n = excluded.n',
    ).run(path, JSON.stringify(probs), n);
  }
}
