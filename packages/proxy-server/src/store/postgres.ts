/**
 * PostgreSQL implementation of the metadata store, for several proxy processes sharing one
 * database (docs/deployment.md). The schema is src/pg-migrations/ (the SQLite tables, same
 * rows). What one process guaranteed by running synchronously holds here by transactions:
 *
 * - applyChanges locks the namespace's `users` row (SELECT ... FOR UPDATE) for its whole
 *   transaction: the changes of one namespace get consecutive seqs with no gap whichever
 *   process records them, and a feed reader sees a seq only once everything before it is
 *   committed (the seq row is written in the same transaction).
 * - Refcounts change by `refcount = refcount + d` in one statement (row-locked), never
 *   read-modify-write in the client; an object row is deleted only while its refcount is 0,
 *   in the statement that checks it.
 * - Invites are consumed by a conditional UPDATE; a deadlock between two namespaces' refcount
 *   updates aborts one transaction, which is run again (postgres-db.ts).
 */
import type { Logger } from 'pino';
import type { ChangeRecord } from '@weft/wire';
import {
  type ChangeInput,
  type DeviceInfoRow,
  type DeviceRow,
  type EntryRow,
  type InviteRefusal,
  type MetadataStore,
  type ObjectRow,
  publicEntry,
  type TokenLookup,
  type TransferRow,
} from './metadata.ts';
import { adjustRef, connect, inTransaction, migratePostgres, type Sql, type Tx } from './postgres-db.ts';
import { PostgresVersions } from './postgres-versions.ts';
import { below, type ChangeSql, type EntrySql, toChange, toEntry } from './rows.ts';

interface ObjectSql {
  sha256: string;
  size: number;
  refcount: number;
  unreferenced_since_ms: number | null;
}

function toObject(r: ObjectSql): ObjectRow {
  return {
    sha256: r.sha256,
    size: r.size,
    refcount: r.refcount,
    unreferencedSinceMs: r.unreferenced_since_ms,
  };
}

interface TransferSql {
  id: string;
  user_id: string;
  path: string;
  size: number;
  sha256: string;
  mtime_ms: number;
  created_ms: number;
}

function toTransfer(r: TransferSql): TransferRow {
  return {
    id: r.id,
    userId: r.user_id,
    path: r.path,
    size: r.size,
    sha256: r.sha256,
    mtimeMs: r.mtime_ms,
    createdMs: r.created_ms,
  };
}

/** The NOTIFY channel of recorded changes (payload: the namespace). */
const CHANNEL = 'weft_changes';

export class PostgresMetadataStore implements MetadataStore {
  readonly versions: PostgresVersions;
  /**
   * Checked first in the transaction of each controller-only write (an object row's
   * deletion by GC, the refcount recount): refuses unless this instance holds the
   * controller lease now (cluster/lease.ts), and keeps it from changing hands until commit.
   */
  fence: ((tx: Tx) => Promise<void>) | undefined;

  private constructor(private readonly sql: Sql) {
    this.versions = new PostgresVersions(sql);
  }

  /** The pool, for the tables kept beside the metadata (shared-tables.ts). */
  get connection(): Sql {
    return this.sql;
  }

  /** Connect to `url` and bring its schema up to date (src/pg-migrations/). */
  static async open(url: string, options: { maxConnections?: number } = {}): Promise<PostgresMetadataStore> {
    const sql = connect(url, options.maxConnections);
    try {
      await migratePostgres(sql);
    } catch (e) {
      await sql.end({ timeout: 1 });
      throw e;
    }
    return new PostgresMetadataStore(sql);
  }

  async schemaVersion(): Promise<number> {
    const [r] = await this.sql<{ v: number | null }[]>`SELECT MAX(version) AS v FROM schema_migrations`;
    return r?.v ?? 0;
  }

  async ensureUser(userId: string, nowMs: number): Promise<void> {
    await this
      .sql`INSERT INTO users (id, seq, created_ms) VALUES (${userId}, 0, ${nowMs}) ON CONFLICT DO NOTHING`;
  }

  async listUsers(): Promise<string[]> {
    return (await this.sql<{ id: string }[]>`SELECT id FROM users ORDER BY id`).map((r) => r.id);
  }

  async addDevice(device: DeviceRow, tokenSha256: string, nowMs: number): Promise<void> {
    await this.sql`INSERT INTO devices (id, user_id, name, token_sha256, created_ms)
      VALUES (${device.id}, ${device.userId}, ${device.name}, ${tokenSha256}, ${nowMs})`;
  }

  async deviceByTokenHash(tokenSha256: string): Promise<DeviceRow | undefined> {
    const t = await this.lookupToken(tokenSha256);
    return t.state === 'active' ? t.device : undefined;
  }

  async lookupToken(tokenSha256: string): Promise<TokenLookup> {
    const [r] = await this.sql<{ id: string; user_id: string; name: string; revoked_ms: number | null }[]>`
      SELECT id, user_id, name, revoked_ms FROM devices WHERE token_sha256 = ${tokenSha256}`;
    if (!r) return { state: 'unknown' };
    const device = { id: r.id, userId: r.user_id, name: r.name };
    return r.revoked_ms === null ? { state: 'active', device } : { state: 'revoked', device };
  }

  async listDevices(userId: string): Promise<DeviceInfoRow[]> {
    const rows = await this.sql<
      { id: string; user_id: string; name: string; created_ms: number; last_seen_ms: number | null }[]
    >`SELECT id, user_id, name, created_ms, last_seen_ms FROM devices
        WHERE user_id = ${userId} AND revoked_ms IS NULL ORDER BY created_ms, id`;
    return rows.map((r) => ({
      id: r.id,
      userId: r.user_id,
      name: r.name,
      createdMs: r.created_ms,
      lastSeenMs: r.last_seen_ms,
    }));
  }

  async touchDevice(deviceId: string, nowMs: number): Promise<void> {
    await this.sql`UPDATE devices SET last_seen_ms = ${nowMs} WHERE id = ${deviceId} AND revoked_ms IS NULL`;
  }

  async revokeDevice(userId: string, deviceId: string, nowMs: number): Promise<boolean> {
    const r = await this.sql`UPDATE devices SET revoked_ms = ${nowMs}
      WHERE id = ${deviceId} AND user_id = ${userId} AND revoked_ms IS NULL`;
    return r.count === 1;
  }

  async addInvite(inviteSha256: string, userId: string, nowMs: number, expiresMs: number): Promise<void> {
    await this.sql`INSERT INTO invites (invite_sha256, user_id, created_ms, expires_ms)
      VALUES (${inviteSha256}, ${userId}, ${nowMs}, ${expiresMs})`;
  }

  async consumeInvite(
    inviteSha256: string,
    userId: string,
    nowMs: number,
  ): Promise<{ ok: true } | { ok: false; reason: InviteRefusal }> {
    // One conditional UPDATE takes it; when it takes nothing, a read says why.
    const taken = await this.sql`UPDATE invites SET used_ms = ${nowMs}
      WHERE invite_sha256 = ${inviteSha256} AND used_ms IS NULL AND user_id = ${userId} AND expires_ms > ${nowMs}`;
    if (taken.count === 1) return { ok: true };
    const [r] = await this.sql<{ user_id: string; used_ms: number | null; expires_ms: number }[]>`
      SELECT user_id, used_ms, expires_ms FROM invites WHERE invite_sha256 = ${inviteSha256}`;
    if (!r) return { ok: false, reason: 'unknown' };
    if (r.used_ms !== null) return { ok: false, reason: 'used' };
    if (r.user_id !== userId) return { ok: false, reason: 'other-user' };
    return { ok: false, reason: 'expired' };
  }

  async currentSeq(userId: string): Promise<number> {
    const [r] = await this.sql<{ seq: number }[]>`SELECT seq FROM users WHERE id = ${userId}`;
    return r?.seq ?? 0;
  }

  async getEntry(userId: string, path: string): Promise<EntryRow | undefined> {
    const [r] = await this.sql<
      EntrySql[]
    >`SELECT * FROM entries WHERE user_id = ${userId} AND path = ${path}`;
    return r ? toEntry(r) : undefined;
  }

  async listEntries(userId: string, dir: string, recursive: boolean): Promise<EntryRow[]> {
    let rows: EntrySql[];
    if (dir === '') {
      rows = await this.sql<EntrySql[]>`SELECT * FROM entries WHERE user_id = ${userId} ORDER BY path`;
    } else {
      const [lo, hi] = below(dir);
      rows = await this.sql<EntrySql[]>`SELECT * FROM entries
        WHERE user_id = ${userId} AND path >= ${lo} AND path < ${hi} ORDER BY path`;
    }
    if (recursive) return rows.map(toEntry);
    const prefix = dir === '' ? '' : dir + '/';
    return rows.filter((r) => !r.path.slice(prefix.length).includes('/')).map(toEntry);
  }

  async listEntriesPage(userId: string, dir: string, after: string, limit: number): Promise<EntryRow[]> {
    const rows =
      dir === ''
        ? await this.sql<EntrySql[]>`SELECT * FROM entries
            WHERE user_id = ${userId} AND path > ${after} ORDER BY path LIMIT ${limit}`
        : await this.sql<EntrySql[]>`SELECT * FROM entries
            WHERE user_id = ${userId} AND path > ${after} AND path >= ${below(dir)[0]} AND path < ${below(dir)[1]}
            ORDER BY path LIMIT ${limit}`;
    return rows.map(toEntry);
  }

  private async subtree(tx: Tx, userId: string, path: string): Promise<EntrySql[]> {
    const [lo, hi] = below(path);
    return tx<EntrySql[]>`SELECT * FROM entries
      WHERE user_id = ${userId} AND (path = ${path} OR (path >= ${lo} AND path < ${hi}))`;
  }

  private async keepVersion(
    tx: Tx,
    userId: string,
    r: EntrySql,
    deleted: boolean,
    device: string | undefined,
    nowMs: number,
  ): Promise<void> {
    if (r.kind !== 'file' || r.sha256 === null || r.tier === null) return;
    await tx`INSERT INTO versions
        (user_id, path, size, sha256, tier, mtime_ms, written_ms, device, replaced_ms, replaced_by, deleted)
      VALUES (${userId}, ${r.path}, ${r.size}, ${r.sha256}, ${r.tier}, ${r.mtime_ms}, ${r.written_ms ?? null},
        ${r.device ?? null}, ${nowMs}, ${device ?? null}, ${deleted})`;
    if (r.tier === 'large') await adjustRef(tx, r.sha256, r.size, +1, nowMs);
  }

  private async writeEntry(
    tx: Tx,
    userId: string,
    e: EntryRow,
    writtenMs: number | null,
    device: string | null,
  ): Promise<void> {
    await tx`INSERT INTO entries
        (user_id, path, kind, size, mtime_ms, revision, sha256, tier, fs_revision, written_ms, device)
      VALUES (${userId}, ${e.path}, ${e.kind}, ${e.size}, ${e.mtimeMs}, ${e.revision}, ${e.sha256 ?? null},
        ${e.tier ?? null}, ${e.fsRevision}, ${writtenMs}, ${device})
      ON CONFLICT (user_id, path) DO UPDATE SET
        kind = EXCLUDED.kind, size = EXCLUDED.size, mtime_ms = EXCLUDED.mtime_ms,
        revision = EXCLUDED.revision, sha256 = EXCLUDED.sha256, tier = EXCLUDED.tier,
        fs_revision = EXCLUDED.fs_revision, written_ms = EXCLUDED.written_ms, device = EXCLUDED.device`;
  }

  private async putRow(
    tx: Tx,
    userId: string,
    e: EntryRow,
    nowMs: number,
    device: string | undefined,
    keep: boolean,
  ): Promise<void> {
    const [old] = await tx<EntrySql[]>`SELECT * FROM entries WHERE user_id = ${userId} AND path = ${e.path}`;
    if (keep && old && old.sha256 !== (e.sha256 ?? null))
      await this.keepVersion(tx, userId, old, false, device, nowMs);
    if (old?.tier === 'large' && old.sha256) await adjustRef(tx, old.sha256, old.size, -1, nowMs);
    if (e.tier === 'large' && e.sha256) {
      await adjustRef(tx, e.sha256, e.size, +1, nowMs);
      await tx`INSERT INTO user_objects (user_id, sha256, last_linked_ms) VALUES (${userId}, ${e.sha256}, ${nowMs})
        ON CONFLICT (user_id, sha256) DO UPDATE SET last_linked_ms = EXCLUDED.last_linked_ms`;
    }
    await this.writeEntry(tx, userId, e, nowMs, device ?? null);
  }

  private async removeRows(
    tx: Tx,
    userId: string,
    rows: EntrySql[],
    nowMs: number,
    device: string | undefined,
    keep: boolean,
  ): Promise<void> {
    for (const r of rows) {
      if (keep) await this.keepVersion(tx, userId, r, true, device, nowMs);
      if (r.tier === 'large' && r.sha256) await adjustRef(tx, r.sha256, r.size, -1, nowMs);
    }
    if (rows.length > 0)
      await tx`DELETE FROM entries WHERE user_id = ${userId} AND path IN ${tx(rows.map((r) => r.path))}`;
  }

  async applyChanges(
    userId: string,
    changes: ChangeInput[],
    device: string | undefined,
    nowMs: number,
    keepVersions = false,
  ): Promise<ChangeRecord[]> {
    return inTransaction(this.sql, async (tx) => {
      // The namespace's lock: every other applyChanges of this namespace, in any process, waits here.
      await tx`INSERT INTO users (id, seq, created_ms) VALUES (${userId}, 0, ${nowMs}) ON CONFLICT DO NOTHING`;
      const [u] = await tx<{ seq: number }[]>`SELECT seq FROM users WHERE id = ${userId} FOR UPDATE`;
      let seq = u?.seq ?? 0;
      const out: ChangeRecord[] = [];
      const dev = device ? { device } : {};
      const insert = async (type: string, path: string, from: string | null, entry: string | null) => {
        await tx`INSERT INTO changes (user_id, seq, type, path, from_path, entry, device)
          VALUES (${userId}, ${seq}, ${type}, ${path}, ${from}, ${entry}, ${device ?? null})`;
      };
      for (const c of changes) {
        seq += 1;
        if (c.type === 'upsert') {
          const row: EntryRow = { ...c.entry, revision: c.entry.revision ?? `r${seq}` };
          await this.putRow(tx, userId, row, nowMs, device, keepVersions);
          const entry = publicEntry(row);
          await insert('upsert', row.path, null, JSON.stringify(entry));
          out.push({ seq, type: 'upsert', path: row.path, entry, ...dev });
        } else if (c.type === 'delete') {
          await this.removeRows(
            tx,
            userId,
            await this.subtree(tx, userId, c.path),
            nowMs,
            device,
            keepVersions,
          );
          await insert('delete', c.path, null, null);
          out.push({ seq, type: 'delete', path: c.path, ...dev });
        } else {
          const rows = await this.subtree(tx, userId, c.from);
          if (rows.length > 0)
            await tx`DELETE FROM entries WHERE user_id = ${userId} AND path IN ${tx(rows.map((r) => r.path))}`;
          await this.removeRows(
            tx,
            userId,
            await this.subtree(tx, userId, c.path),
            nowMs,
            device,
            keepVersions,
          );
          let root: EntryRow | undefined;
          for (const r of rows) {
            const moved = toEntry({ ...r, path: c.path + r.path.slice(c.from.length) });
            await this.writeEntry(tx, userId, moved, r.written_ms ?? null, r.device ?? null);
            if (r.path === c.from) root = moved;
          }
          if (!root) throw new Error(`move of ${c.from}: not in the index`);
          const entry = publicEntry(root);
          await insert('move', c.path, c.from, JSON.stringify(entry));
          out.push({ seq, type: 'move', from: c.from, path: c.path, entry, ...dev });
        }
      }
      await tx`UPDATE users SET seq = ${seq} WHERE id = ${userId}`;
      // Delivered at commit to every process listening (watchChanges), this one included.
      await tx`SELECT pg_notify(${CHANNEL}, ${userId})`;
      return out;
    });
  }

  async setFsRevision(userId: string, path: string, fsRevision: string): Promise<void> {
    await this
      .sql`UPDATE entries SET fs_revision = ${fsRevision} WHERE user_id = ${userId} AND path = ${path}`;
  }

  async changesSince(userId: string, cursor: number, limit: number): Promise<ChangeRecord[]> {
    const rows = await this.sql<ChangeSql[]>`
      SELECT c.seq, c.type, c.path, c.from_path, c.entry, c.device, d.name AS device_name
        FROM changes c LEFT JOIN devices d ON d.id = c.device
       WHERE c.user_id = ${userId} AND c.seq > ${cursor} ORDER BY c.seq LIMIT ${limit}`;
    return rows.map(toChange);
  }

  async usedBytes(userId: string): Promise<number> {
    const [r] = await this.sql<{ used: number }[]>`
      SELECT COALESCE(SUM(size), 0)::bigint AS used FROM entries WHERE user_id = ${userId} AND kind = 'file'`;
    return r?.used ?? 0;
  }

  async userLargeContent(userId: string, sha256: string): Promise<number | undefined> {
    const [r] = await this.sql<{ size: number }[]>`
      SELECT o.size FROM user_objects u JOIN objects o ON o.sha256 = u.sha256
       WHERE u.user_id = ${userId} AND u.sha256 = ${sha256}`;
    return r?.size;
  }

  async getObject(sha256: string): Promise<ObjectRow | undefined> {
    const [r] = await this.sql<ObjectSql[]>`SELECT * FROM objects WHERE sha256 = ${sha256}`;
    return r ? toObject(r) : undefined;
  }

  async addObject(sha256: string, size: number, nowMs: number): Promise<void> {
    await this.sql`INSERT INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms)
      VALUES (${sha256}, ${size}, 0, ${nowMs}, ${nowMs}) ON CONFLICT DO NOTHING`;
  }

  async collectableObjects(cutoffMs: number): Promise<ObjectRow[]> {
    const rows = await this.sql<ObjectSql[]>`SELECT * FROM objects
      WHERE refcount <= 0 AND unreferenced_since_ms IS NOT NULL AND unreferenced_since_ms < ${cutoffMs}`;
    return rows.map(toObject);
  }

  async deleteObject(sha256: string): Promise<boolean> {
    return inTransaction(this.sql, async (tx) => {
      await this.fence?.(tx);
      const gone = await tx`DELETE FROM objects WHERE sha256 = ${sha256} AND refcount <= 0`;
      if (gone.count > 0) await tx`DELETE FROM user_objects WHERE sha256 = ${sha256}`;
      return gone.count > 0;
    });
  }

  async recomputeRefcounts(nowMs: number): Promise<void> {
    await inTransaction(this.sql, async (tx) => {
      await this.fence?.(tx);
      // Every refcount is rewritten: no applyChanges may run between the count and the write.
      await tx`LOCK TABLE objects, entries, versions IN SHARE ROW EXCLUSIVE MODE`;
      await tx`INSERT INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms)
        SELECT DISTINCT ON (sha256) sha256, size, 0, NULL::bigint, ${nowMs}::bigint FROM entries
         WHERE tier = 'large' AND sha256 IS NOT NULL
        ON CONFLICT DO NOTHING`;
      await tx`INSERT INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms)
        SELECT DISTINCT ON (sha256) sha256, size, 0, NULL::bigint, ${nowMs}::bigint FROM versions
         WHERE tier = 'large'
        ON CONFLICT DO NOTHING`;
      await tx`UPDATE objects SET refcount =
          (SELECT COUNT(*) FROM entries e WHERE e.tier = 'large' AND e.sha256 = objects.sha256)
        + (SELECT COUNT(*) FROM versions v WHERE v.tier = 'large' AND v.sha256 = objects.sha256)`;
      await tx`UPDATE objects SET unreferenced_since_ms = COALESCE(unreferenced_since_ms, ${nowMs}::bigint)
        WHERE refcount = 0`;
      await tx`UPDATE objects SET unreferenced_since_ms = NULL WHERE refcount > 0`;
    });
  }

  async addTransfer(t: TransferRow): Promise<void> {
    await this.sql`INSERT INTO transfers (id, user_id, path, size, sha256, mtime_ms, created_ms, active_ms)
      VALUES (${t.id}, ${t.userId}, ${t.path}, ${t.size}, ${t.sha256}, ${t.mtimeMs}, ${t.createdMs}, ${t.createdMs})`;
  }

  async getTransfer(id: string): Promise<TransferRow | undefined> {
    const [r] = await this.sql<TransferSql[]>`SELECT * FROM transfers WHERE id = ${id}`;
    return r ? toTransfer(r) : undefined;
  }

  async addTransferRange(id: string, offset: number, length: number, nowMs: number): Promise<boolean> {
    // One statement: the activity and the range, or neither when the transfer is gone. The
    // UPDATE locks the transfer's row, so GC's conditional delete (deleteIdleTransfer) waits
    // for it and then sees the new activity.
    const rows = await this.sql`
      WITH t AS (UPDATE transfers SET active_ms = GREATEST(active_ms, ${nowMs}) WHERE id = ${id} RETURNING id)
      INSERT INTO transfer_ranges (transfer_id, "offset", length)
        SELECT t.id, ${offset}::bigint, ${length}::bigint FROM t
      ON CONFLICT (transfer_id, "offset") DO UPDATE SET length = EXCLUDED.length
      RETURNING 1`;
    return rows.length > 0;
  }

  async touchTransfer(id: string, nowMs: number): Promise<boolean> {
    const rows = await this.sql`
      UPDATE transfers SET active_ms = GREATEST(active_ms, ${nowMs}) WHERE id = ${id} RETURNING 1`;
    return rows.length > 0;
  }

  async transferRanges(id: string): Promise<{ offset: number; length: number }[]> {
    const rows = await this.sql<{ offset: number; length: number }[]>`
      SELECT "offset", length FROM transfer_ranges WHERE transfer_id = ${id} ORDER BY "offset"`;
    return rows.map((r) => ({ offset: r.offset, length: r.length }));
  }

  async deleteTransfer(id: string): Promise<void> {
    await inTransaction(this.sql, async (tx) => {
      await tx`DELETE FROM transfer_ranges WHERE transfer_id = ${id}`;
      await tx`DELETE FROM transfers WHERE id = ${id}`;
    });
  }

  async idleTransfers(cutoffMs: number): Promise<TransferRow[]> {
    const rows = await this.sql<TransferSql[]>`SELECT * FROM transfers WHERE active_ms < ${cutoffMs}`;
    return rows.map(toTransfer);
  }

  async deleteIdleTransfer(id: string, cutoffMs: number): Promise<boolean> {
    return inTransaction(this.sql, async (tx) => {
      const gone = await tx`DELETE FROM transfers WHERE id = ${id} AND active_ms < ${cutoffMs} RETURNING 1`;
      if (gone.length === 0) return false;
      await tx`DELETE FROM transfer_ranges WHERE transfer_id = ${id}`;
      return true;
    });
  }

  async openTransferBytes(userId: string, exceptPath: string): Promise<number> {
    const [r] = await this.sql<{ bytes: number }[]>`
      SELECT COALESCE(SUM(size), 0)::bigint AS bytes FROM transfers WHERE user_id = ${userId} AND path != ${exceptPath}`;
    return r?.bytes ?? 0;
  }

  async watchChanges(listener: (userId: string) => void): Promise<() => Promise<void>> {
    const { unlisten } = await this.sql.listen(CHANNEL, listener);
    return unlisten;
  }

  async close(): Promise<void> {
    await this.sql.end({ timeout: 5 });
  }
}

/** The server's PostgreSQL store, logged once opened (the URL without its password). */
export async function openPostgresStore(url: string, log: Logger): Promise<PostgresMetadataStore> {
  const store = await PostgresMetadataStore.open(url);
  const shown = url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
  log.info({ database: shown, schema: await store.schemaVersion() }, 'metadata store on PostgreSQL');
  return store;
}
