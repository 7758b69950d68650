/**
 * The redundant object tier's placement store on PostgreSQL (issue #17 across instances,
 * issue #18): the PlacementStore of @weft/providers/redundant over the `redundant_*` tables
 * of pg-migrations/008, so every proxy instance sharing the database serves one redundant
 * tier — a file written through one reads through any other, and the outage log is one log.
 *
 * The providers package defines the interface and takes a store; this one lives here, beside
 * the proxy's other PostgreSQL books, because the proxy already carries the client
 * (`postgres`) and the cluster's fencing: @weft/providers stays free of a database driver.
 *
 * Every namespace change runs in one transaction under one advisory lock (the tier's
 * namespace is a handful of keys per large file, so one lock costs little and keeps the
 * check-then-change of a conditional write, and refs, exact across instances). Reads take
 * no lock. Writes a background job marks `fenced` call `fence(tx)` (the controller lease,
 * cluster/lease.ts) inside their transaction, so a controller that lost the role commits
 * nothing.
 */
import {
  AlreadyExistsError,
  InvalidPathError,
  NotFoundError,
  PreconditionFailedError,
} from '@weft/providers/errors';
import { ancestors, parentPath } from '@weft/providers/paths';
import type { Entry } from '@weft/providers';
import {
  checkPutAgainst,
  entrySelect,
  type HoldingRow,
  type LocationRow,
  type LogRow,
  type NewObject,
  newRevision,
  type ObjectRow,
  type OwedBlob,
  type PlacementEntryRow,
  type PlacementStore,
  type PlacementWriteOptions,
  type PutConditions,
  toEntry,
} from '@weft/providers/redundant';
import { connect, inTransaction, migratePostgres, type Sql, type Tx } from './postgres-db.ts';

/** Advisory lock of the tier's namespace (any fixed 64-bit number, distinct from the others). */
const NAMESPACE_LOCK = 0x77656674_0008n;

type Run = Sql | Tx;

export class PostgresPlacementStore implements PlacementStore {
  readonly shared = true;
  /** Checks the controller lease inside a fenced write's transaction (set by the server). */
  fence: ((tx: Tx) => Promise<void>) | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly owned = false,
  ) {}

  /** A pool of its own on `url`, the schema brought up to date first. */
  static async open(url: string, max = 4): Promise<PostgresPlacementStore> {
    const sql = connect(url, max);
    try {
      await migratePostgres(sql);
    } catch (e) {
      await sql.end();
      throw e;
    }
    return new PostgresPlacementStore(sql, true);
  }

  async close(): Promise<void> {
    if (this.owned) await this.sql.end();
  }

  private locked<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return inTransaction(this.sql, async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${String(NAMESPACE_LOCK)}::bigint)`;
      return fn(tx);
    });
  }

  /** One statement; a fenced one in a transaction with the lease check. */
  private async write(
    options: PlacementWriteOptions | undefined,
    fn: (run: Run) => Promise<unknown>,
  ): Promise<void> {
    const fence = options?.fenced ? this.fence : undefined;
    if (!fence) {
      await fn(this.sql);
      return;
    }
    await inTransaction(this.sql, async (tx) => {
      await fence(tx);
      await fn(tx);
    });
  }

  // ---- namespace -------------------------------------------------------------------

  entry(path: string): Promise<Entry | undefined> {
    return entryIn(this.sql, path);
  }

  async objectOf(path: string): Promise<string | undefined> {
    const [r] = await this.sql<{ object_id: string | null }[]>`
      SELECT object_id FROM redundant_entries WHERE path = ${path}`;
    return r?.object_id ?? undefined;
  }

  list(dir: string, recursive: boolean): Promise<Entry[]> {
    return listIn(this.sql, dir, recursive);
  }

  async mkdirs(path: string, modifiedMs: number): Promise<void> {
    await this.locked((tx) => ensureFolders(tx, [...ancestors(path), path], modifiedMs));
  }

  commitFile(
    path: string,
    obj: NewObject,
    cond: PutConditions,
    modifiedMs: number,
    owed: readonly OwedBlob[] = [],
  ): Promise<{ entry: Entry; released: ObjectRow[] }> {
    return this.locked(async (tx) => {
      const current = await entryIn(tx, path);
      checkPutAgainst(path, current, cond);
      await ensureFolders(tx, ancestors(path), modifiedMs);
      const o = obj.row;
      await tx`INSERT INTO redundant_objects
          (id, size, sha256, layout, k, m, shard_bytes, shard_sha, refs, created_ms)
        VALUES (${o.id}, ${o.size}, ${o.sha256}, ${o.layout}, ${o.k}, ${o.m}, ${o.shard_bytes},
          ${o.shard_sha}, 1, ${Date.now()})`;
      for (const l of obj.locations)
        await tx`INSERT INTO redundant_locations (object_id, slot, backend, blob_sha256, state)
          VALUES (${o.id}, ${l.slot}, ${l.backend}, ${l.blob_sha256}, ${l.state})`;
      const released = current ? await dropEntries(tx, [path]) : [];
      await tx`INSERT INTO redundant_entries (path, parent, kind, size, modified_ms, revision, object_id)
        VALUES (${path}, ${parentPath(path)}, 'file', ${o.size}, ${Math.round(modifiedMs)},
          ${newRevision()}, ${o.id})`;
      for (const b of owed) await logAppendIn(tx, b.backend, 'put', o.id, b.slot, b.blobKey);
      return { entry: (await entryIn(tx, path))!, released };
    });
  }

  async checkPut(path: string, cond: PutConditions): Promise<void> {
    checkPutAgainst(path, await entryIn(this.sql, path), cond);
    const up = ancestors(path);
    if (up.length === 0) return;
    const [file] = await this.sql<{ path: string }[]>`
      SELECT path FROM redundant_entries WHERE path IN ${this.sql(up)} AND kind = 'file' LIMIT 1`;
    if (file) throw new AlreadyExistsError(`redundant: a file is at ${file.path}`);
  }

  remove(path: string, ifRevision?: string): Promise<ObjectRow[]> {
    return this.locked(async (tx) => {
      const e = await entryIn(tx, path);
      if (!e) throw new NotFoundError(`redundant: nothing at ${path}`);
      if (ifRevision !== undefined && e.revision !== ifRevision)
        throw new PreconditionFailedError(`redundant: ${path} is at another revision`, e.revision);
      const below = e.kind === 'dir' ? (await listIn(tx, path, true)).map((x) => x.path) : [];
      return dropEntries(tx, [path, ...below]);
    });
  }

  transfer(
    from: string,
    to: string,
    overwrite: boolean,
    mode: 'move' | 'copy',
  ): Promise<{ entry: Entry; released: ObjectRow[] }> {
    return this.locked(async (tx) => {
      const src = await entryIn(tx, from);
      if (!src) throw new NotFoundError(`redundant: nothing at ${from}`);
      if (to === from || to.startsWith(`${from}/`))
        throw new InvalidPathError(`redundant: cannot ${mode} ${from} into itself`, to);
      const dst = await entryIn(tx, to);
      let released: ObjectRow[] = [];
      if (dst) {
        if (!overwrite || dst.kind === 'dir' || src.kind === 'dir')
          throw new AlreadyExistsError(`redundant: something is at ${to}`);
        released = await dropEntries(tx, [to]);
      }
      await ensureFolders(tx, ancestors(to), Date.now());
      const moved = [src, ...(src.kind === 'dir' ? await listIn(tx, from, true) : [])];
      for (const e of moved) {
        const target = to + e.path.slice(from.length);
        await tx`INSERT INTO redundant_entries (path, parent, kind, size, modified_ms, revision, object_id)
          SELECT ${target}, ${parentPath(target)}, kind, size, modified_ms,
            CASE WHEN ${mode} = 'copy' AND kind = 'file' THEN ${newRevision()} ELSE revision END, object_id
          FROM redundant_entries WHERE path = ${e.path}`;
        if (mode === 'copy')
          await tx`UPDATE redundant_objects SET refs = refs + 1
            WHERE id = (SELECT object_id FROM redundant_entries WHERE path = ${e.path})`;
      }
      if (mode === 'move')
        await tx`DELETE FROM redundant_entries WHERE path IN ${tx(moved.map((e) => e.path))}`;
      return { entry: (await entryIn(tx, to))!, released };
    });
  }

  // ---- objects and locations ------------------------------------------------------

  async object(id: string): Promise<ObjectRow | undefined> {
    const [r] = await this.sql<ObjectRow[]>`SELECT * FROM redundant_objects WHERE id = ${id}`;
    return r && objectRow(r);
  }

  async locations(id: string): Promise<LocationRow[]> {
    return [
      ...(await this.sql<LocationRow[]>`
        SELECT object_id, slot, backend, blob_sha256, state FROM redundant_locations
        WHERE object_id = ${id} ORDER BY slot`),
    ];
  }

  async objectIds(backend?: string): Promise<string[]> {
    const rows =
      backend === undefined
        ? await this.sql<{ id: string }[]>`SELECT id FROM redundant_objects ORDER BY id`
        : await this.sql<{ id: string }[]>`
            SELECT DISTINCT object_id AS id FROM redundant_locations WHERE backend = ${backend} ORDER BY id`;
    return rows.map((r) => r.id);
  }

  async holdings(afterId: string, objects: number): Promise<HoldingRow[]> {
    return [
      ...(await this.sql<HoldingRow[]>`
        SELECT l.object_id, o.layout, o.k, l.backend, l.state
        FROM redundant_locations l JOIN redundant_objects o ON o.id = l.object_id
        WHERE l.object_id IN (SELECT id FROM redundant_objects WHERE id > ${afterId} ORDER BY id LIMIT ${objects})
        ORDER BY l.object_id, l.slot`),
    ];
  }

  async backendCounts(): Promise<Map<string, { blobs: number; bad: number }>> {
    const rows = await this.sql<{ backend: string; blobs: number; bad: number }[]>`
      SELECT backend, count(*)::int AS blobs, count(*) FILTER (WHERE state = 'bad')::int AS bad
      FROM redundant_locations GROUP BY backend`;
    return new Map(rows.map((r) => [r.backend, { blobs: r.blobs, bad: r.bad }]));
  }

  async setLocation(
    id: string,
    slot: number,
    change: { state?: LocationRow['state']; backend?: string },
    options?: PlacementWriteOptions,
  ): Promise<void> {
    await this.write(
      options,
      (tx) => tx`UPDATE redundant_locations
        SET state = COALESCE(${change.state ?? null}, state), backend = COALESCE(${change.backend ?? null}, backend)
        WHERE object_id = ${id} AND slot = ${slot}`,
    );
  }

  async forgetObject(id: string): Promise<void> {
    await this.sql`DELETE FROM redundant_objects WHERE id = ${id} AND refs <= 0`;
  }

  async unreferenced(): Promise<ObjectRow[]> {
    return (await this.sql<ObjectRow[]>`SELECT * FROM redundant_objects WHERE refs <= 0`).map(objectRow);
  }

  // ---- outage log and backend state ------------------------------------------------

  async logAppend(
    backend: string,
    op: LogRow['op'],
    objectId: string,
    slot: number,
    blobKey: string,
  ): Promise<void> {
    await logAppendIn(this.sql, backend, op, objectId, slot, blobKey);
  }

  async logPending(backend: string, limit = 1000): Promise<LogRow[]> {
    return [
      ...(await this.sql<LogRow[]>`
        SELECT seq, backend, op, object_id, slot, blob_key, at_ms FROM redundant_outage_log
        WHERE backend = ${backend} ORDER BY seq LIMIT ${Math.min(limit, 2 ** 31 - 1)}`),
    ];
  }

  async logCount(backend?: string): Promise<number> {
    const [r] =
      backend === undefined
        ? await this.sql<{ n: number }[]>`SELECT count(*)::int AS n FROM redundant_outage_log`
        : await this.sql<{ n: number }[]>`
            SELECT count(*)::int AS n FROM redundant_outage_log WHERE backend = ${backend}`;
    return r?.n ?? 0;
  }

  async logDone(seq: number, options?: PlacementWriteOptions): Promise<void> {
    await this.write(options, (tx) => tx`DELETE FROM redundant_outage_log WHERE seq = ${seq}`);
  }

  async logClear(backend: string, options?: PlacementWriteOptions): Promise<void> {
    await this.write(options, (tx) => tx`DELETE FROM redundant_outage_log WHERE backend = ${backend}`);
  }

  async logRename(from: string, to: string): Promise<void> {
    await this.sql`UPDATE redundant_outage_log SET backend = ${to} WHERE backend = ${from}`;
  }

  async downSince(backend: string): Promise<number | undefined> {
    const [r] = await this.sql<{ down_since: number }[]>`
      SELECT down_since FROM redundant_backend_state WHERE backend = ${backend}`;
    return r?.down_since;
  }

  async setDown(backend: string, since: number): Promise<void> {
    await this.sql`INSERT INTO redundant_backend_state (backend, down_since)
      VALUES (${backend}, ${Math.round(since)}) ON CONFLICT (backend) DO NOTHING`;
  }

  async setUp(backend: string): Promise<void> {
    await this.sql`DELETE FROM redundant_backend_state WHERE backend = ${backend}`;
  }

  // ---- the background jobs' records (pg-migrations/010) --------------------------------

  async jobRecord(name: string): Promise<string | undefined> {
    const [r] = await this.sql<{ value: string }[]>`
      SELECT value FROM redundant_job_records WHERE name = ${name}`;
    return r?.value;
  }

  async setJobRecord(name: string, value: string, options?: PlacementWriteOptions): Promise<void> {
    await this.write(
      options,
      (tx) => tx`
        INSERT INTO redundant_job_records (name, value, updated_ms)
        VALUES (${name}, ${value}, ${Date.now()})
        ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, updated_ms = EXCLUDED.updated_ms`,
    );
  }

  async clearJobRecord(name: string, options?: PlacementWriteOptions): Promise<void> {
    await this.write(options, (tx) => tx`DELETE FROM redundant_job_records WHERE name = ${name}`);
  }

  /**
   * `work` inside a transaction that checked the lease first: the lease row stays locked
   * (FOR SHARE) until `work` ends, so no other instance takes the role meanwhile. Not
   * retried (work's effects are outside the database). Keep `work` short: the holder's
   * own renewal waits for it too.
   */
  async whileFenced<T>(work: () => Promise<T>): Promise<T> {
    const fence = this.fence;
    if (!fence) return work();
    return (await this.sql.begin(async (tx) => {
      await fence(tx);
      return work();
    })) as T;
  }
}

const ENTRY_SELECT = entrySelect('redundant_entries', 'redundant_objects');

async function entryIn(run: Run, path: string): Promise<Entry | undefined> {
  const [r] = await run.unsafe<PlacementEntryRow[]>(`${ENTRY_SELECT} WHERE e.path = $1`, [path]);
  return r && toEntry(r);
}

async function listIn(run: Run, dir: string, recursive: boolean): Promise<Entry[]> {
  if (dir !== '') {
    const e = await entryIn(run, dir);
    if (!e || e.kind !== 'dir') throw new NotFoundError(`redundant: no folder ${dir}`);
  }
  const rows = recursive
    ? dir === ''
      ? await run.unsafe<PlacementEntryRow[]>(`${ENTRY_SELECT} ORDER BY e.path`)
      : await run.unsafe<PlacementEntryRow[]>(`${ENTRY_SELECT} WHERE left(e.path, $1) = $2 ORDER BY e.path`, [
          dir.length + 1,
          `${dir}/`,
        ])
    : await run.unsafe<PlacementEntryRow[]>(`${ENTRY_SELECT} WHERE e.parent = $1 ORDER BY e.path`, [dir]);
  return rows.map(toEntry);
}

async function ensureFolders(tx: Tx, paths: readonly string[], modifiedMs: number): Promise<void> {
  for (const p of paths) {
    const [row] = await tx<{ kind: string }[]>`SELECT kind FROM redundant_entries WHERE path = ${p}`;
    if (row?.kind === 'file') throw new AlreadyExistsError(`redundant: a file is at ${p}`);
    if (!row)
      await tx`INSERT INTO redundant_entries (path, parent, kind, size, modified_ms, revision, object_id)
        VALUES (${p}, ${parentPath(p)}, 'dir', 0, ${Math.round(modifiedMs)}, '', NULL)`;
  }
}

/** Delete entries, decrementing their objects' refs; returns the objects left unreferenced. */
async function dropEntries(tx: Tx, paths: readonly string[]): Promise<ObjectRow[]> {
  const released: ObjectRow[] = [];
  for (const p of paths) {
    const [e] = await tx<{ object_id: string | null }[]>`
      DELETE FROM redundant_entries WHERE path = ${p} RETURNING object_id`;
    if (!e?.object_id) continue;
    const [o] = await tx<ObjectRow[]>`
      UPDATE redundant_objects SET refs = refs - 1 WHERE id = ${e.object_id} RETURNING *`;
    if (o && o.refs <= 0) released.push(objectRow(o));
  }
  return released;
}

async function logAppendIn(
  run: Run,
  backend: string,
  op: LogRow['op'],
  objectId: string,
  slot: number,
  blobKey: string,
): Promise<void> {
  await run`INSERT INTO redundant_outage_log (backend, op, object_id, slot, blob_key, at_ms)
    VALUES (${backend}, ${op}, ${objectId}, ${slot}, ${blobKey}, ${Date.now()})`;
}

/** The row as SQLite gives it: `created_ms` left out of the interface's fields is harmless; shard_sha a Buffer. */
function objectRow(r: ObjectRow): ObjectRow {
  return {
    id: r.id,
    size: r.size,
    sha256: r.sha256,
    layout: r.layout,
    k: r.k,
    m: r.m,
    shard_bytes: r.shard_bytes,
    shard_sha: r.shard_sha === null ? null : Buffer.from(r.shard_sha),
    refs: r.refs,
  };
}
