/**
 * SQLite implementation of the metadata store (better-sqlite3, WAL). The schema lives in
 * numbered files under src/migrations/ (NNN_name.sql produces schema version NNN, tracked
 * with PRAGMA user_version), applied by the shared runner in @weft/providers/sqlite-migrations.
 */
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { migrate } from '@weft/providers/sqlite-migrations';
import type { ChangeRecord } from '@weft/wire';
import {
  type ChangeInput,
  type DeviceInfoRow,
  type DeviceRow,
  type EntryRow,
  type InviteRefusal,
  type MetadataStore,
  publicEntry,
  type TokenLookup,
} from './metadata.ts';
import { openMetadataDatabase, SqliteTables } from './sqlite-tables.ts';
import { below, type ChangeSql, type EntrySql, toChange, toEntry } from './rows.ts';
import { VersionIndex } from './version-index.ts';

const MIGRATIONS_DIR = nodePath.resolve(fileURLToPath(import.meta.url), '../../migrations');

export class SqliteMetadataStore extends SqliteTables implements MetadataStore {
  /**
   * Each namespace's used bytes once summed (usedBytes), kept by applyChanges, the only writer
   * of sizes: under a quota every bundle asks it twice, and a SUM over the namespace per bundle
   * made a 1,000,000-file upload quadratic (issue #16). Summed again once another connection
   * wrote the file (`PRAGMA data_version` moved).
   */
  private readonly used = new Map<string, number>();
  private usedVersion: unknown;

  /** `trace`: called with every statement run (better-sqlite3 `verbose`; tests count them). */
  constructor(file: string, options: { trace?: (sql: string) => void } = {}) {
    super(openMetadataDatabase(file, options.trace));
    this.migrate();
    this.versions = new VersionIndex(this.db);
  }

  /** Kept versions and deleted files (migration 007, version-index.ts). */
  readonly versions: VersionIndex;

  private migrate(): void {
    migrate(this.db, MIGRATIONS_DIR, 'proxy metadata');
  }

  /** The connection, for the stores keeping their own tables in this database (cost ledger). */
  get database(): Database.Database {
    return this.db;
  }

  schemaVersion(): number {
    return this.db.pragma('user_version', { simple: true }) as number;
  }

  async ensureUser(userId: string, nowMs: number): Promise<void> {
    this.stmt('INSERT OR IGNORE INTO users (id, seq, created_ms) VALUES (?, 0, ?)').run(userId, nowMs);
  }

  async listUsers(): Promise<string[]> {
    return (this.stmt('SELECT id FROM users ORDER BY id').all() as { id: string }[]).map((r) => r.id);
  }

  async addDevice(device: DeviceRow, tokenSha256: string, nowMs: number): Promise<void> {
    this.stmt('INSERT INTO devices (id, user_id, name, token_sha256, created_ms) VALUES (?, ?, ?, ?, ?)').run(
      device.id,
      device.userId,
      device.name,
      tokenSha256,
      nowMs,
    );
  }

  async deviceByTokenHash(tokenSha256: string): Promise<DeviceRow | undefined> {
    const t = await this.lookupToken(tokenSha256);
    return t.state === 'active' ? t.device : undefined;
  }

  async lookupToken(tokenSha256: string): Promise<TokenLookup> {
    const r = this.stmt('SELECT id, user_id, name, revoked_ms FROM devices WHERE token_sha256 = ?').get(
      tokenSha256,
    ) as { id: string; user_id: string; name: string; revoked_ms: number | null } | undefined;
    if (!r) return { state: 'unknown' };
    const device = { id: r.id, userId: r.user_id, name: r.name };
    return r.revoked_ms === null ? { state: 'active', device } : { state: 'revoked', device };
  }

  async listDevices(userId: string): Promise<DeviceInfoRow[]> {
    const rows = this.stmt(
      'SELECT id, user_id, name, created_ms, last_seen_ms FROM devices WHERE user_id = ? AND revoked_ms IS NULL ORDER BY created_ms, id',
    ).all(userId) as {
      id: string;
      user_id: string;
      name: string;
      created_ms: number;
      last_seen_ms: number | null;
    }[];
    return rows.map((r) => ({
      id: r.id,
      userId: r.user_id,
      name: r.name,
      createdMs: r.created_ms,
      lastSeenMs: r.last_seen_ms,
    }));
  }

  async touchDevice(deviceId: string, nowMs: number): Promise<void> {
    this.stmt('UPDATE devices SET last_seen_ms = ? WHERE id = ? AND revoked_ms IS NULL').run(nowMs, deviceId);
  }

  async revokeDevice(userId: string, deviceId: string, nowMs: number): Promise<boolean> {
    const r = this.stmt(
      'UPDATE devices SET revoked_ms = ? WHERE id = ? AND user_id = ? AND revoked_ms IS NULL',
    ).run(nowMs, deviceId, userId);
    return r.changes === 1;
  }

  async addInvite(inviteSha256: string, userId: string, nowMs: number, expiresMs: number): Promise<void> {
    this.stmt('INSERT INTO invites (invite_sha256, user_id, created_ms, expires_ms) VALUES (?, ?, ?, ?)').run(
      inviteSha256,
      userId,
      nowMs,
      expiresMs,
    );
  }

  async consumeInvite(
    inviteSha256: string,
    userId: string,
    nowMs: number,
  ): Promise<{ ok: true } | { ok: false; reason: InviteRefusal }> {
    return this.db.transaction((): { ok: true } | { ok: false; reason: InviteRefusal } => {
      const r = this.stmt('SELECT user_id, used_ms, expires_ms FROM invites WHERE invite_sha256 = ?').get(
        inviteSha256,
      ) as { user_id: string; used_ms: number | null; expires_ms: number } | undefined;
      if (!r) return { ok: false, reason: 'unknown' };
      if (r.used_ms !== null) return { ok: false, reason: 'used' };
      if (r.user_id !== userId) return { ok: false, reason: 'other-user' };
      if (nowMs >= r.expires_ms) return { ok: false, reason: 'expired' };
      const u = this.stmt('UPDATE invites SET used_ms = ? WHERE invite_sha256 = ? AND used_ms IS NULL').run(
        nowMs,
        inviteSha256,
      );
      return u.changes === 1 ? { ok: true } : { ok: false, reason: 'used' };
    })();
  }

  async currentSeq(userId: string): Promise<number> {
    return this.seqOf(userId);
  }

  private seqOf(userId: string): number {
    const r = this.stmt('SELECT seq FROM users WHERE id = ?').get(userId) as { seq: number } | undefined;
    return r?.seq ?? 0;
  }

  async getEntry(userId: string, path: string): Promise<EntryRow | undefined> {
    const r = this.stmt('SELECT * FROM entries WHERE user_id = ? AND path = ?').get(userId, path) as
      EntrySql | undefined;
    return r ? toEntry(r) : undefined;
  }

  async listEntries(userId: string, dir: string, recursive: boolean): Promise<EntryRow[]> {
    let rows: EntrySql[];
    if (dir === '') {
      rows = this.stmt('SELECT * FROM entries WHERE user_id = ? ORDER BY path').all(userId) as EntrySql[];
    } else {
      const [lo, hi] = below(dir);
      rows = this.stmt(
        'SELECT * FROM entries WHERE user_id = ? AND path >= ? AND path < ? ORDER BY path',
      ).all(userId, lo, hi) as EntrySql[];
    }
    if (recursive) return rows.map(toEntry);
    const prefix = dir === '' ? '' : dir + '/';
    return rows.filter((r) => !r.path.slice(prefix.length).includes('/')).map(toEntry);
  }

  async listEntriesPage(userId: string, dir: string, after: string, limit: number): Promise<EntryRow[]> {
    const rows = (
      dir === ''
        ? this.stmt('SELECT * FROM entries WHERE user_id = ? AND path > ? ORDER BY path LIMIT ?').all(
            userId,
            after,
            limit,
          )
        : this.stmt(
            'SELECT * FROM entries WHERE user_id = ? AND path > ? AND path >= ? AND path < ? ORDER BY path LIMIT ?',
          ).all(userId, after, ...below(dir), limit)
    ) as EntrySql[];
    return rows.map(toEntry);
  }

  private subtree(userId: string, path: string): EntrySql[] {
    const [lo, hi] = below(path);
    return this.stmt(
      'SELECT * FROM entries WHERE user_id = ? AND (path = ? OR (path >= ? AND path < ?))',
    ).all(userId, path, lo, hi) as EntrySql[];
  }

  private adjustRef(sha256: string, size: number, delta: number, nowMs: number): void {
    this.stmt(
      'INSERT OR IGNORE INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms) VALUES (?, ?, 0, ?, ?)',
    ).run(sha256, size, nowMs, nowMs);
    this.stmt(
      `UPDATE objects SET refcount = refcount + ?,
           unreferenced_since_ms = CASE WHEN refcount + ? <= 0 THEN ? ELSE NULL END
         WHERE sha256 = ?`,
    ).run(delta, delta, nowMs, sha256);
  }

  /** Keep a file row that stops being current as a version (when versions are kept). */
  private keepVersion(
    userId: string,
    r: EntrySql,
    deleted: boolean,
    device: string | undefined,
    nowMs: number,
  ): void {
    if (r.kind !== 'file' || r.sha256 === null || r.tier === null) return;
    this.versions.keep(
      userId,
      {
        path: r.path,
        size: r.size,
        sha256: r.sha256,
        tier: r.tier,
        mtimeMs: r.mtime_ms,
        writtenMs: r.written_ms ?? null,
        device: r.device ?? null,
      },
      deleted,
      device,
      nowMs,
    );
  }

  private putRow(
    userId: string,
    e: EntryRow,
    nowMs: number,
    device?: string,
    keep = false,
    absent = false,
  ): number {
    const old = absent
      ? undefined
      : (this.stmt('SELECT * FROM entries WHERE user_id = ? AND path = ?').get(userId, e.path) as
          EntrySql | undefined);
    if (keep && old && old.sha256 !== (e.sha256 ?? null)) this.keepVersion(userId, old, false, device, nowMs);
    if (old?.tier === 'large' && old.sha256) this.adjustRef(old.sha256, old.size, -1, nowMs);
    if (e.tier === 'large' && e.sha256) {
      this.adjustRef(e.sha256, e.size, +1, nowMs);
      this.stmt('INSERT OR REPLACE INTO user_objects (user_id, sha256, last_linked_ms) VALUES (?, ?, ?)').run(
        userId,
        e.sha256,
        nowMs,
      );
    }
    this.stmt(
      `INSERT OR REPLACE INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision, written_ms, device)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      userId,
      e.path,
      e.kind,
      e.size,
      e.mtimeMs,
      e.revision,
      e.sha256 ?? null,
      e.tier ?? null,
      e.fsRevision,
      nowMs,
      device ?? null,
    );
    // The bytes the namespace grew by (a folder counts none).
    return (e.kind === 'file' ? e.size : 0) - (old?.kind === 'file' ? old.size : 0);
  }

  /** Returns the bytes the namespace shrank by. */
  private removeRows(userId: string, rows: EntrySql[], nowMs: number, device?: string, keep = false): number {
    const del = this.stmt('DELETE FROM entries WHERE user_id = ? AND path = ?');
    let freed = 0;
    for (const r of rows) {
      if (keep) this.keepVersion(userId, r, true, device, nowMs);
      if (r.tier === 'large' && r.sha256) this.adjustRef(r.sha256, r.size, -1, nowMs);
      del.run(userId, r.path);
      if (r.kind === 'file') freed += r.size;
    }
    return freed;
  }

  async applyChanges(
    userId: string,
    changes: ChangeInput[],
    device: string | undefined,
    nowMs: number,
    keepVersions = false,
  ): Promise<ChangeRecord[]> {
    let grew = 0;
    const out = this.db.transaction(() => {
      let seq = this.seqOf(userId);
      const out: ChangeRecord[] = [];
      const insert = this.stmt(
        'INSERT INTO changes (user_id, seq, type, path, from_path, entry, device) VALUES (?, ?, ?, ?, ?, ?, ?)',
      );
      for (const c of changes) {
        seq += 1;
        if (c.type === 'upsert') {
          const row: EntryRow = { ...c.entry, revision: c.entry.revision ?? `r${seq}` };
          grew += this.putRow(userId, row, nowMs, device, keepVersions, c.absent === true);
          const entry = publicEntry(row);
          insert.run(userId, seq, 'upsert', row.path, null, JSON.stringify(entry), device ?? null);
          out.push({ seq, type: 'upsert', path: row.path, entry, ...(device ? { device } : {}) });
        } else if (c.type === 'delete') {
          grew -= this.removeRows(userId, this.subtree(userId, c.path), nowMs, device, keepVersions);
          insert.run(userId, seq, 'delete', c.path, null, null, device ?? null);
          out.push({ seq, type: 'delete', path: c.path, ...(device ? { device } : {}) });
        } else {
          const rows = this.subtree(userId, c.from);
          const del = this.stmt('DELETE FROM entries WHERE user_id = ? AND path = ?');
          for (const r of rows) del.run(userId, r.path);
          grew -= this.removeRows(userId, this.subtree(userId, c.path), nowMs, device, keepVersions);
          let root: EntryRow | undefined;
          for (const r of rows) {
            const moved = toEntry({ ...r, path: c.path + r.path.slice(c.from.length) });
            this.stmt(
              `INSERT INTO entries (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision, written_ms, device)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
            ).run(
              userId,
              moved.path,
              moved.kind,
              moved.size,
              moved.mtimeMs,
              moved.revision,
              moved.sha256 ?? null,
              moved.tier ?? null,
              moved.fsRevision,
              r.written_ms ?? null,
              r.device ?? null,
            );
            if (r.path === c.from) root = moved;
          }
          if (!root) throw new Error(`move of ${c.from}: not in the index`);
          const entry = publicEntry(root);
          insert.run(userId, seq, 'move', c.path, c.from, JSON.stringify(entry), device ?? null);
          out.push({ seq, type: 'move', from: c.from, path: c.path, entry, ...(device ? { device } : {}) });
        }
      }
      this.stmt('UPDATE users SET seq = ? WHERE id = ?').run(seq, userId);
      return out;
    })();
    // Committed (a failed transaction threw above and changed nothing).
    const used = this.used.get(userId);
    if (used !== undefined) this.used.set(userId, used + grew);
    return out;
  }

  /** Update a moved entry's tier revision without a change record (the rename changed ctime). */
  async setFsRevision(userId: string, path: string, fsRevision: string): Promise<void> {
    this.stmt('UPDATE entries SET fs_revision = ? WHERE user_id = ? AND path = ?').run(
      fsRevision,
      userId,
      path,
    );
  }

  async changesSince(userId: string, cursor: number, limit: number): Promise<ChangeRecord[]> {
    const rows = this.stmt(
      `SELECT c.seq, c.type, c.path, c.from_path, c.entry, c.device, d.name AS device_name
         FROM changes c LEFT JOIN devices d ON d.id = c.device
        WHERE c.user_id = ? AND c.seq > ? ORDER BY c.seq LIMIT ?`,
    ).all(userId, cursor, limit) as ChangeSql[];
    return rows.map(toChange);
  }

  async usedBytes(userId: string): Promise<number> {
    const version: unknown = this.db.pragma('data_version', { simple: true });
    if (version !== this.usedVersion) {
      this.used.clear();
      this.usedVersion = version;
    }
    let used = this.used.get(userId);
    if (used === undefined) {
      used = (
        this.stmt(
          "SELECT COALESCE(SUM(size), 0) AS used FROM entries WHERE user_id = ? AND kind = 'file'",
        ).get(userId) as { used: number }
      ).used;
      this.used.set(userId, used);
    }
    return used;
  }

  async userLargeContent(userId: string, sha256: string): Promise<number | undefined> {
    const r = this.stmt(
      'SELECT o.size FROM user_objects u JOIN objects o ON o.sha256 = u.sha256 WHERE u.user_id = ? AND u.sha256 = ?',
    ).get(userId, sha256) as { size: number } | undefined;
    return r?.size;
  }

  async watchChanges(_listener: (userId: string) => void): Promise<() => Promise<void>> {
    return async () => undefined;
  }

  async close(): Promise<void> {
    this.db.close();
  }
}
