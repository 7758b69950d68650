/**
 * The SQLite placement store of the redundant tier (issue #17; the PlacementStore interface
 * and its rules: placement-store.ts): a SQLite file of its own (schema in ./sql, run by the
 * shared migration helper) — the embedded default, for one process. Every namespace change
 * is one transaction, so a write becomes visible (and the object it replaces is released)
 * atomically; blobs on the backends are written before and deleted after, so a crash leaves
 * at worst unreferenced blobs, never a reference to a missing one. better-sqlite3 is
 * synchronous: each method runs to its end before it returns its promise, so no two
 * interleave (the fence of background writes is moot in one process).
 */
import { mkdirSync } from 'node:fs';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { AlreadyExistsError, InvalidPathError, NotFoundError, PreconditionFailedError } from '../errors.ts';
import { ancestors, parentPath } from '../paths.ts';
import type { Entry } from '../provider.ts';
import { migrate } from '../sqlite-migrations.ts';
import {
  checkPutAgainst,
  type EntryRow,
  entrySelect,
  type HoldingRow,
  type LocationRow,
  type LogRow,
  type NewObject,
  newRevision,
  type ObjectRow,
  type OwedBlob,
  type PlacementStore,
  type PutConditions,
  toEntry,
} from './placement-store.ts';

const SQL_DIR = fileURLToPath(new URL('./sql/', import.meta.url));

const ENTRY_SELECT = entrySelect('entries', 'objects');

export class SqlitePlacementStore implements PlacementStore {
  readonly shared = false;

  private constructor(private readonly db: Database.Database) {}

  /** Open (creating and migrating) `dir`/placement.sqlite. */
  static open(dir: string): SqlitePlacementStore {
    mkdirSync(dir, { recursive: true });
    const db = new Database(nodePath.join(dir, 'placement.sqlite'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    migrate(db, SQL_DIR, 'redundant placement store');
    return new SqlitePlacementStore(db);
  }

  async close(): Promise<void> {
    this.db.close();
  }

  // ---- namespace -------------------------------------------------------------------

  async entry(path: string): Promise<Entry | undefined> {
    return this.entryNow(path);
  }

  private entryNow(path: string): Entry | undefined {
    const row = this.db.prepare(`${ENTRY_SELECT} WHERE e.path = ?`).get(path) as EntryRow | undefined;
    return row && toEntry(row);
  }

  async objectOf(path: string): Promise<string | undefined> {
    return this.objectOfNow(path);
  }

  private objectOfNow(path: string): string | undefined {
    const row = this.db.prepare('SELECT object_id FROM entries WHERE path = ?').get(path) as
      { object_id: string | null } | undefined;
    return row?.object_id ?? undefined;
  }

  async list(dir: string, recursive: boolean): Promise<Entry[]> {
    return this.listNow(dir, recursive);
  }

  private listNow(dir: string, recursive: boolean): Entry[] {
    if (dir !== '') {
      const e = this.entryNow(dir);
      if (!e || e.kind !== 'dir') throw new NotFoundError(`redundant: no folder ${dir}`);
    }
    const rows = recursive
      ? dir === ''
        ? (this.db.prepare(`${ENTRY_SELECT} ORDER BY e.path`).all() as EntryRow[])
        : (this.db
            .prepare(`${ENTRY_SELECT} WHERE substr(e.path, 1, ?) = ? ORDER BY e.path`)
            .all(dir.length + 1, `${dir}/`) as EntryRow[])
      : (this.db.prepare(`${ENTRY_SELECT} WHERE e.parent = ? ORDER BY e.path`).all(dir) as EntryRow[]);
    return rows.map(toEntry);
  }

  async mkdirs(path: string, modifiedMs: number): Promise<void> {
    this.db.transaction(() => this.ensureFolders([...ancestors(path), path], modifiedMs))();
  }

  private ensureFolders(paths: readonly string[], modifiedMs: number): void {
    const get = this.db.prepare('SELECT kind FROM entries WHERE path = ?');
    const put = this.db.prepare(
      "INSERT INTO entries (path, parent, kind, size, modified_ms, revision, object_id) VALUES (?, ?, 'dir', 0, ?, '', NULL)",
    );
    for (const p of paths) {
      const row = get.get(p) as { kind: string } | undefined;
      if (row?.kind === 'file') throw new AlreadyExistsError(`redundant: a file is at ${p}`);
      if (!row) put.run(p, parentPath(p), Math.round(modifiedMs));
    }
  }

  async commitFile(
    path: string,
    obj: NewObject,
    cond: PutConditions,
    modifiedMs: number,
    owed: readonly OwedBlob[] = [],
  ): Promise<{ entry: Entry; released: ObjectRow[] }> {
    return this.db.transaction(() => {
      const current = this.entryNow(path);
      checkPutAgainst(path, current, cond);
      this.ensureFolders(ancestors(path), modifiedMs);
      const o = obj.row;
      this.db
        .prepare(
          'INSERT INTO objects (id, size, sha256, layout, k, m, shard_bytes, shard_sha, refs, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?)',
        )
        .run(o.id, o.size, o.sha256, o.layout, o.k, o.m, o.shard_bytes, o.shard_sha, Date.now());
      const loc = this.db.prepare(
        'INSERT INTO locations (object_id, slot, backend, blob_sha256, state) VALUES (?, ?, ?, ?, ?)',
      );
      for (const l of obj.locations) loc.run(o.id, l.slot, l.backend, l.blob_sha256, l.state);
      const released = current ? this.dropEntries([path]) : [];
      this.db
        .prepare(
          "INSERT INTO entries (path, parent, kind, size, modified_ms, revision, object_id) VALUES (?, ?, 'file', ?, ?, ?, ?)",
        )
        // Whole milliseconds: the STRICT column refuses a fraction (an fs stat's mtimeMs has one).
        .run(path, parentPath(path), o.size, Math.round(modifiedMs), newRevision(), o.id);
      for (const b of owed) this.logAppendNow(b.backend, 'put', o.id, b.slot, b.blobKey);
      return { entry: this.entryNow(path)!, released };
    })();
  }

  async checkPut(path: string, cond: PutConditions): Promise<void> {
    this.db.transaction(() => {
      checkPutAgainst(path, this.entryNow(path), cond);
      for (const a of ancestors(path)) {
        if (this.entryNow(a)?.kind === 'file') throw new AlreadyExistsError(`redundant: a file is at ${a}`);
      }
    })();
  }

  async remove(path: string, ifRevision?: string): Promise<ObjectRow[]> {
    return this.db.transaction(() => {
      const e = this.entryNow(path);
      if (!e) throw new NotFoundError(`redundant: nothing at ${path}`);
      if (ifRevision !== undefined && e.revision !== ifRevision)
        throw new PreconditionFailedError(`redundant: ${path} is at another revision`, e.revision);
      const below = e.kind === 'dir' ? this.listNow(path, true).map((x) => x.path) : [];
      return this.dropEntries([path, ...below]);
    })();
  }

  async transfer(
    from: string,
    to: string,
    overwrite: boolean,
    mode: 'move' | 'copy',
  ): Promise<{ entry: Entry; released: ObjectRow[] }> {
    return this.db.transaction(() => {
      const src = this.entryNow(from);
      if (!src) throw new NotFoundError(`redundant: nothing at ${from}`);
      if (to === from || to.startsWith(`${from}/`))
        throw new InvalidPathError(`redundant: cannot ${mode} ${from} into itself`, to);
      const dst = this.entryNow(to);
      let released: ObjectRow[] = [];
      if (dst) {
        if (!overwrite || dst.kind === 'dir' || src.kind === 'dir')
          throw new AlreadyExistsError(`redundant: something is at ${to}`);
        released = this.dropEntries([to]);
      }
      const now = Date.now();
      this.ensureFolders(ancestors(to), now);
      const moved = [src, ...(src.kind === 'dir' ? this.listNow(from, true) : [])];
      const insert = this.db.prepare(
        'INSERT INTO entries (path, parent, kind, size, modified_ms, revision, object_id) SELECT ?, ?, kind, size, modified_ms, revision, object_id FROM entries WHERE path = ?',
      );
      for (const e of moved) {
        const target = to + e.path.slice(from.length);
        insert.run(target, parentPath(target), e.path);
        if (mode === 'copy') {
          this.db
            .prepare('UPDATE entries SET revision = ? WHERE path = ? AND kind = ?')
            .run(newRevision(), target, 'file');
          this.db
            .prepare(
              'UPDATE objects SET refs = refs + 1 WHERE id = (SELECT object_id FROM entries WHERE path = ?)',
            )
            .run(e.path);
        }
      }
      if (mode === 'move') {
        const del = this.db.prepare('DELETE FROM entries WHERE path = ?');
        for (const e of moved) del.run(e.path);
      }
      return { entry: this.entryNow(to)!, released };
    })();
  }

  /** Delete entries, decrementing their objects' refs; returns the objects left unreferenced. */
  private dropEntries(paths: readonly string[]): ObjectRow[] {
    const released: ObjectRow[] = [];
    for (const p of paths) {
      const id = this.objectOfNow(p);
      this.db.prepare('DELETE FROM entries WHERE path = ?').run(p);
      if (id === undefined) continue;
      this.db.prepare('UPDATE objects SET refs = refs - 1 WHERE id = ?').run(id);
      const o = this.objectNow(id);
      if (o && o.refs <= 0) released.push(o);
    }
    return released;
  }

  // ---- objects and locations ------------------------------------------------------

  async object(id: string): Promise<ObjectRow | undefined> {
    return this.objectNow(id);
  }

  private objectNow(id: string): ObjectRow | undefined {
    return this.db.prepare('SELECT * FROM objects WHERE id = ?').get(id) as ObjectRow | undefined;
  }

  async locations(id: string): Promise<LocationRow[]> {
    return this.db
      .prepare('SELECT * FROM locations WHERE object_id = ? ORDER BY slot')
      .all(id) as LocationRow[];
  }

  async objectIds(backend?: string): Promise<string[]> {
    const rows = (
      backend === undefined
        ? this.db.prepare('SELECT id FROM objects ORDER BY id').all()
        : this.db
            .prepare('SELECT DISTINCT object_id AS id FROM locations WHERE backend = ? ORDER BY object_id')
            .all(backend)
    ) as { id: string }[];
    return rows.map((r) => r.id);
  }

  async holdings(afterId: string, objects: number): Promise<HoldingRow[]> {
    return this.db
      .prepare(
        'SELECT l.object_id, o.layout, o.k, l.backend, l.state FROM locations l JOIN objects o ON o.id = l.object_id ' +
          'WHERE l.object_id IN (SELECT id FROM objects WHERE id > ? ORDER BY id LIMIT ?) ORDER BY l.object_id, l.slot',
      )
      .all(afterId, objects) as HoldingRow[];
  }

  async backendCounts(): Promise<Map<string, { blobs: number; bad: number }>> {
    const rows = this.db
      .prepare("SELECT backend, count(*) AS blobs, sum(state = 'bad') AS bad FROM locations GROUP BY backend")
      .all() as { backend: string; blobs: number; bad: number }[];
    return new Map(rows.map((r) => [r.backend, { blobs: r.blobs, bad: r.bad }]));
  }

  async setLocation(
    id: string,
    slot: number,
    change: { state?: LocationRow['state']; backend?: string },
  ): Promise<void> {
    const cur = this.db.prepare('SELECT * FROM locations WHERE object_id = ? AND slot = ?').get(id, slot) as
      LocationRow | undefined;
    if (!cur) return;
    this.db
      .prepare('UPDATE locations SET state = ?, backend = ? WHERE object_id = ? AND slot = ?')
      .run(change.state ?? cur.state, change.backend ?? cur.backend, id, slot);
  }

  async forgetObject(id: string): Promise<void> {
    this.db.prepare('DELETE FROM objects WHERE id = ? AND refs <= 0').run(id);
  }

  async unreferenced(): Promise<ObjectRow[]> {
    return this.db.prepare('SELECT * FROM objects WHERE refs <= 0').all() as ObjectRow[];
  }

  // ---- outage log and backend state ------------------------------------------------

  async logAppend(
    backend: string,
    op: LogRow['op'],
    objectId: string,
    slot: number,
    blobKey: string,
  ): Promise<void> {
    this.logAppendNow(backend, op, objectId, slot, blobKey);
  }

  private logAppendNow(backend: string, op: LogRow['op'], objectId: string, slot: number, blobKey: string) {
    this.db
      .prepare(
        'INSERT INTO outage_log (backend, op, object_id, slot, blob_key, at_ms) VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run(backend, op, objectId, slot, blobKey, Date.now());
  }

  async logPending(backend: string, limit = 1000): Promise<LogRow[]> {
    return this.db
      .prepare('SELECT * FROM outage_log WHERE backend = ? ORDER BY seq LIMIT ?')
      .all(backend, limit) as LogRow[];
  }

  async logCount(backend?: string): Promise<number> {
    const row = (
      backend === undefined
        ? this.db.prepare('SELECT count(*) AS n FROM outage_log').get()
        : this.db.prepare('SELECT count(*) AS n FROM outage_log WHERE backend = ?').get(backend)
    ) as { n: number };
    return row.n;
  }

  async logDone(seq: number): Promise<void> {
    this.db.prepare('DELETE FROM outage_log WHERE seq = ?').run(seq);
  }

  async logClear(backend: string): Promise<void> {
    this.db.prepare('DELETE FROM outage_log WHERE backend = ?').run(backend);
  }

  async logRename(from: string, to: string): Promise<void> {
    this.db.prepare('UPDATE outage_log SET backend = ? WHERE backend = ?').run(to, from);
  }

  async downSince(backend: string): Promise<number | undefined> {
    const row = this.db.prepare('SELECT down_since FROM backend_state WHERE backend = ?').get(backend) as
      { down_since: number } | undefined;
    return row?.down_since;
  }

  async setDown(backend: string, since: number): Promise<void> {
    this.db
      .prepare('INSERT OR IGNORE INTO backend_state (backend, down_since) VALUES (?, ?)')
      .run(backend, Math.round(since));
  }

  async setUp(backend: string): Promise<void> {
    this.db.prepare('DELETE FROM backend_state WHERE backend = ?').run(backend);
  }

  // ---- the background jobs' records -----------------------------------------------

  async jobRecord(name: string): Promise<string | undefined> {
    const row = this.db.prepare('SELECT value FROM job_records WHERE name = ?').get(name) as
      { value: string } | undefined;
    return row?.value;
  }

  async setJobRecord(name: string, value: string): Promise<void> {
    this.db
      .prepare(
        'INSERT INTO job_records (name, value, updated_ms) VALUES (?, ?, ?) ' +
          'ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_ms = excluded.updated_ms',
      )
      .run(name, value, Date.now());
  }

  async clearJobRecord(name: string): Promise<void> {
    this.db.prepare('DELETE FROM job_records WHERE name = ?').run(name);
  }

  whileFenced<T>(work: () => Promise<T>): Promise<T> {
    return work();
  }
}
