/**
 * The placement store of the redundant tier (issue #17): a SQLite file of its own (schema in
 * ./sql, run by the shared migration helper) holding the namespace the tier presents, each
 * object's layout and where its replicas or fragments are, and the outage log. Every
 * namespace change is one transaction, so a write becomes visible (and the object it
 * replaces is released) atomically; blobs on the backends are written before and deleted
 * after, so a crash leaves at worst unreferenced blobs, never a reference to a missing one.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { AlreadyExistsError, InvalidPathError, NotFoundError, PreconditionFailedError } from '../errors.ts';
import { ancestors, parentPath } from '../paths.ts';
import type { Entry } from '../provider.ts';
import { migrate } from '../sqlite-migrations.ts';

const SQL_DIR = fileURLToPath(new URL('./sql/', import.meta.url));

export interface ObjectRow {
  readonly id: string;
  readonly size: number;
  readonly sha256: string;
  readonly layout: 'replicated' | 'striped';
  readonly k: number;
  readonly m: number;
  readonly shard_bytes: number;
  readonly shard_sha: Buffer | null;
  readonly refs: number;
}

export interface LocationRow {
  readonly object_id: string;
  readonly slot: number;
  readonly backend: string;
  readonly blob_sha256: string;
  readonly state: 'ok' | 'owed' | 'bad';
}

/** One location with its object's layout (PlacementStore.holdings). */
export interface HoldingRow {
  readonly object_id: string;
  readonly layout: ObjectRow['layout'];
  readonly k: number;
  readonly backend: string;
  readonly state: LocationRow['state'];
}

export interface LogRow {
  readonly seq: number;
  readonly backend: string;
  readonly op: 'put' | 'delete';
  readonly object_id: string;
  readonly slot: number;
  readonly blob_key: string;
  readonly at_ms: number;
}

interface EntryRow {
  path: string;
  kind: 'file' | 'dir';
  size: number;
  modified_ms: number;
  revision: string;
  object_id: string | null;
  sha256: string | null;
}

export interface NewObject {
  readonly row: Omit<ObjectRow, 'refs'>;
  readonly locations: readonly Omit<LocationRow, 'object_id'>[];
}

export interface PutConditions {
  readonly ifNotExists?: boolean;
  readonly ifRevision?: string;
}

const ENTRY_SELECT =
  'SELECT e.path, e.kind, e.size, e.modified_ms, e.revision, e.object_id, o.sha256 ' +
  'FROM entries e LEFT JOIN objects o ON o.id = e.object_id';

export function newRevision(): string {
  return randomBytes(12).toString('hex');
}

export class PlacementStore {
  private constructor(private readonly db: Database.Database) {}

  /** Open (creating and migrating) `dir`/placement.sqlite. */
  static open(dir: string): PlacementStore {
    mkdirSync(dir, { recursive: true });
    const db = new Database(nodePath.join(dir, 'placement.sqlite'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.pragma('foreign_keys = ON');
    migrate(db, SQL_DIR, 'redundant placement store');
    return new PlacementStore(db);
  }

  close(): void {
    this.db.close();
  }

  // ---- namespace -------------------------------------------------------------------

  entry(path: string): Entry | undefined {
    const row = this.db.prepare(`${ENTRY_SELECT} WHERE e.path = ?`).get(path) as EntryRow | undefined;
    return row && toEntry(row);
  }

  objectOf(path: string): string | undefined {
    const row = this.db.prepare('SELECT object_id FROM entries WHERE path = ?').get(path) as
      { object_id: string | null } | undefined;
    return row?.object_id ?? undefined;
  }

  /** Children of `dir` (or everything below with `recursive`), by path. NotFound when `dir` is no folder. */
  list(dir: string, recursive: boolean): Entry[] {
    if (dir !== '') {
      const e = this.entry(dir);
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

  /** Create `path` and its missing parents as folders. AlreadyExists where a file is in the way. */
  mkdirs(path: string, modifiedMs: number): void {
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

  /**
   * Point `path` at a newly stored object (inserting it with refs 1), checking the write's
   * conditions against the current state in the same transaction. Returns the new entry and
   * the objects no entry references any more (to delete from the backends).
   */
  commitFile(
    path: string,
    obj: NewObject,
    cond: PutConditions,
    modifiedMs: number,
  ): { entry: Entry; released: ObjectRow[] } {
    return this.db.transaction(() => {
      const current = this.entry(path);
      checkPut(path, current, cond);
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
      return { entry: this.entry(path)!, released };
    })();
  }

  /** Check a put's conditions without changing anything (before uploading). */
  checkPut(path: string, cond: PutConditions): void {
    this.db.transaction(() => {
      checkPut(path, this.entry(path), cond);
      for (const a of ancestors(path)) {
        if (this.entry(a)?.kind === 'file') throw new AlreadyExistsError(`redundant: a file is at ${a}`);
      }
    })();
  }

  /** Remove a file or a folder with its content. */
  remove(path: string, ifRevision?: string): ObjectRow[] {
    return this.db.transaction(() => {
      const e = this.entry(path);
      if (!e) throw new NotFoundError(`redundant: nothing at ${path}`);
      if (ifRevision !== undefined && e.revision !== ifRevision)
        throw new PreconditionFailedError(`redundant: ${path} is at another revision`, e.revision);
      const below = e.kind === 'dir' ? this.list(path, true).map((x) => x.path) : [];
      return this.dropEntries([path, ...below]);
    })();
  }

  /** Move (or copy) `from` — a file or a folder with its content — to `to`. */
  transfer(
    from: string,
    to: string,
    overwrite: boolean,
    mode: 'move' | 'copy',
  ): { entry: Entry; released: ObjectRow[] } {
    return this.db.transaction(() => {
      const src = this.entry(from);
      if (!src) throw new NotFoundError(`redundant: nothing at ${from}`);
      if (to === from || to.startsWith(`${from}/`))
        throw new InvalidPathError(`redundant: cannot ${mode} ${from} into itself`, to);
      const dst = this.entry(to);
      let released: ObjectRow[] = [];
      if (dst) {
        if (!overwrite || dst.kind === 'dir' || src.kind === 'dir')
          throw new AlreadyExistsError(`redundant: something is at ${to}`);
        released = this.dropEntries([to]);
      }
      const now = Date.now();
      this.ensureFolders(ancestors(to), now);
      const moved = [src, ...(src.kind === 'dir' ? this.list(from, true) : [])];
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
      return { entry: this.entry(to)!, released };
    })();
  }

  /** Delete entries, decrementing their objects' refs; returns the objects left unreferenced. */
  private dropEntries(paths: readonly string[]): ObjectRow[] {
    const released: ObjectRow[] = [];
    for (const p of paths) {
      const id = this.objectOf(p);
      this.db.prepare('DELETE FROM entries WHERE path = ?').run(p);
      if (id === undefined) continue;
      this.db.prepare('UPDATE objects SET refs = refs - 1 WHERE id = ?').run(id);
      const o = this.object(id);
      if (o && o.refs <= 0) released.push(o);
    }
    return released;
  }

  // ---- objects and locations ------------------------------------------------------

  object(id: string): ObjectRow | undefined {
    return this.db.prepare('SELECT * FROM objects WHERE id = ?').get(id) as ObjectRow | undefined;
  }

  locations(id: string): LocationRow[] {
    return this.db
      .prepare('SELECT * FROM locations WHERE object_id = ? ORDER BY slot')
      .all(id) as LocationRow[];
  }

  /** Ids of objects with any location on `backend`, or every object when omitted. */
  objectIds(backend?: string): string[] {
    const rows = (
      backend === undefined
        ? this.db.prepare('SELECT id FROM objects ORDER BY id').all()
        : this.db
            .prepare('SELECT DISTINCT object_id AS id FROM locations WHERE backend = ? ORDER BY object_id')
            .all(backend)
    ) as { id: string }[];
    return rows.map((r) => r.id);
  }

  /**
   * Every location with its object's layout and k, grouped by object (slot order): one pass
   * for the tier's status and risk report (status.ts).
   */
  holdings(): IterableIterator<HoldingRow> {
    return this.db
      .prepare(
        'SELECT l.object_id, o.layout, o.k, l.backend, l.state FROM locations l JOIN objects o ON o.id = l.object_id ORDER BY l.object_id, l.slot',
      )
      .iterate() as IterableIterator<HoldingRow>;
  }

  /** Per backend: the replicas and fragments placed on it, and how many of them are `bad`. */
  backendCounts(): Map<string, { blobs: number; bad: number }> {
    const rows = this.db
      .prepare("SELECT backend, count(*) AS blobs, sum(state = 'bad') AS bad FROM locations GROUP BY backend")
      .all() as { backend: string; blobs: number; bad: number }[];
    return new Map(rows.map((r) => [r.backend, { blobs: r.blobs, bad: r.bad }]));
  }

  setLocation(id: string, slot: number, change: { state?: LocationRow['state']; backend?: string }): void {
    const cur = this.db.prepare('SELECT * FROM locations WHERE object_id = ? AND slot = ?').get(id, slot) as
      LocationRow | undefined;
    if (!cur) return;
    this.db
      .prepare('UPDATE locations SET state = ?, backend = ? WHERE object_id = ? AND slot = ?')
      .run(change.state ?? cur.state, change.backend ?? cur.backend, id, slot);
  }

  /** Forget an object whose entries are all gone (its blobs already deleted or logged). */
  forgetObject(id: string): void {
    this.db.prepare('DELETE FROM objects WHERE id = ? AND refs <= 0').run(id);
  }

  /** Objects with refs 0 still recorded (a crash between commit and blob deletion). */
  unreferenced(): ObjectRow[] {
    return this.db.prepare('SELECT * FROM objects WHERE refs <= 0').all() as ObjectRow[];
  }

  // ---- outage log and backend state ------------------------------------------------

  logAppend(backend: string, op: LogRow['op'], objectId: string, slot: number, blobKey: string): void {
    this.db
      .prepare(
        'INSERT INTO outage_log (backend, op, object_id, slot, blob_key, at_ms) VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run(backend, op, objectId, slot, blobKey, Date.now());
  }

  logPending(backend: string, limit = 1000): LogRow[] {
    return this.db
      .prepare('SELECT * FROM outage_log WHERE backend = ? ORDER BY seq LIMIT ?')
      .all(backend, limit) as LogRow[];
  }

  logCount(backend?: string): number {
    const row = (
      backend === undefined
        ? this.db.prepare('SELECT count(*) AS n FROM outage_log').get()
        : this.db.prepare('SELECT count(*) AS n FROM outage_log WHERE backend = ?').get(backend)
    ) as { n: number };
    return row.n;
  }

  logDone(seq: number): void {
    this.db.prepare('DELETE FROM outage_log WHERE seq = ?').run(seq);
  }

  /** Move every pending log entry of one backend to another (replacement). */
  logRename(from: string, to: string): void {
    this.db.prepare('UPDATE outage_log SET backend = ? WHERE backend = ?').run(to, from);
  }

  downSince(backend: string): number | undefined {
    const row = this.db.prepare('SELECT down_since FROM backend_state WHERE backend = ?').get(backend) as
      { down_since: number } | undefined;
    return row?.down_since;
  }

  setDown(backend: string, since: number): void {
    this.db
      .prepare('INSERT OR IGNORE INTO backend_state (backend, down_since) VALUES (?, ?)')
      .run(backend, since);
  }

  setUp(backend: string): void {
    this.db.prepare('DELETE FROM backend_state WHERE backend = ?').run(backend);
  }

  /** Run `fn` as one transaction. */
  atomically<T>(fn: () => T): T {
    return this.db.transaction(fn)();
  }
}

function checkPut(path: string, current: Entry | undefined, cond: PutConditions): void {
  if (current?.kind === 'dir') throw new AlreadyExistsError(`redundant: a folder is at ${path}`);
  if (cond.ifNotExists && current) throw new AlreadyExistsError(`redundant: ${path} exists`);
  if (cond.ifRevision !== undefined) {
    if (!current) throw new NotFoundError(`redundant: nothing at ${path}`);
    if (current.revision !== cond.ifRevision)
      throw new PreconditionFailedError(`redundant: ${path} is at another revision`, current.revision);
  }
}

function toEntry(r: EntryRow): Entry {
  const base = { path: r.path, kind: r.kind, size: r.size, modifiedMs: r.modified_ms, revision: r.revision };
  return r.kind === 'file' && r.sha256 ? { ...base, hash: { algorithm: 'sha256', value: r.sha256 } } : base;
}
