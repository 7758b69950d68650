/**
 * The PostgreSQL connection of the metadata store: the client (`postgres`, porsager's; as fast
 * as `pg` on bench/pg-client.bench.ts, kept for its parameter-only tagged templates: see
 * docs/deployment.md), BIGINT read as a JS number,
 * transactions retried on a deadlock or serialization failure, and the schema kept current
 * from the numbered files in src/pg-migrations/ (NNN_name.sql produces version NNN, recorded
 * in `schema_migrations`), applied under an advisory lock so proxies starting together
 * migrate once.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { watchedSocketFactory } from './pg-link-watch.ts';

export const PG_MIGRATIONS_DIR = nodePath.resolve(fileURLToPath(import.meta.url), '../../pg-migrations');

/** The advisory lock key proxies take while they migrate (any fixed 64-bit number). */
const MIGRATION_LOCK = 0x77656674_0001n;

export type Sql = postgres.Sql;
export type Tx = postgres.TransactionSql;

/**
 * Server-side TCP keepalives (seconds) for the cluster's connections (lease, ordering locks):
 * PostgreSQL notices a vanished instance within about 10 s and lets go of what its session
 * held, instead of after the system default of hours.
 */
export const CLUSTER_KEEPALIVES = {
  tcp_keepalives_idle: 4,
  tcp_keepalives_interval: 2,
  tcp_keepalives_count: 3,
} as const;

/**
 * How long a pool waits on PostgreSQL. `statementTimeoutMs`: the server's statement_timeout
 * (a statement running longer is cancelled with SQLSTATE 57014); `responseTimeoutMs`: a
 * connection awaiting an answer that hears nothing for this long is dropped and its queries
 * fail (pg-link-watch.ts: a link gone dark); 0 turns either off.
 */
export interface PgTimeouts {
  readonly statementTimeoutMs?: number;
  readonly responseTimeoutMs?: number;
}

/**
 * Every pool's defaults: no proxy statement is meant to run near a minute, and the response
 * limit leaves a statement_timeout's error time to arrive. Pools whose statements wait on
 * purpose (the cluster's ordering locks) turn both off.
 */
export const DEFAULT_PG_TIMEOUTS = { statementTimeoutMs: 60_000, responseTimeoutMs: 75_000 } as const;

/** Open a pool; BIGINT (int8) columns come back as numbers (they hold ms and byte counts). */
export function connect(
  url: string,
  max = 8,
  extra: postgres.Options<never> = {},
  timeouts: PgTimeouts = {},
): Sql {
  const statementMs = timeouts.statementTimeoutMs ?? DEFAULT_PG_TIMEOUTS.statementTimeoutMs;
  const responseMs = timeouts.responseTimeoutMs ?? DEFAULT_PG_TIMEOUTS.responseTimeoutMs;
  // `socket` is a documented option the client's types leave out.
  const socket = responseMs > 0 && !('socket' in extra) ? { socket: watchedSocketFactory(responseMs) } : {};
  return postgres(url, {
    ...extra,
    ...(socket as object),
    connection: {
      ...(statementMs > 0 ? { statement_timeout: statementMs } : {}),
      ...extra.connection,
    },
    max,
    onnotice: () => undefined,
    types: {
      bigint: {
        to: 20,
        from: [20],
        serialize: (x: number | bigint) => String(x),
        parse: (x: string) => Number(x),
      },
    },
  });
}

/** Errors worth running the whole transaction again for (PostgreSQL SQLSTATE). */
const RETRY = new Set(['40001', '40P01']);

/** Run `fn` in a transaction, again (up to 5 times) when PostgreSQL aborted it for a deadlock. */
export async function inTransaction<T>(sql: Sql, fn: (tx: Tx) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    let failed: { error: unknown } | undefined;
    try {
      return (await sql.begin(async (tx) => {
        try {
          return await fn(tx);
        } catch (error) {
          failed = { error };
          throw error;
        }
      })) as T;
    } catch (e) {
      const code = (e as { code?: string }).code;
      // A connection lost mid-transaction also fails the ROLLBACK after it: the statement's
      // own error (say, the link's timeout) says what happened, not the rollback's.
      if (failed && failed.error !== e && code?.startsWith('CONNECTION_')) throw failed.error;
      if (attempt >= 5 || code === undefined || !RETRY.has(code)) throw e;
      await new Promise((r) => setTimeout(r, attempt * 5 * Math.random()));
    }
  }
}

/**
 * The migration files in `dir`, in order. Unlike SQLite's folder, numbers may have gaps: the
 * schema parts of issue #18 (002 packs, 003 shares, 004 lease, 005 instances) land in any
 * order, each independent of the others, so each file is applied once by its number.
 */
export function readPgMigrations(dir: string): { version: number; file: string; sql: string }[] {
  const out: { version: number; file: string; sql: string }[] = [];
  for (const file of fs.readdirSync(dir).sort()) {
    if (!file.endsWith('.sql')) continue;
    const m = /^(\d{3})_[a-z0-9_]+\.sql$/.exec(file);
    if (!m)
      throw new Error(
        `${nodePath.join(dir, file)}: a migration is named NNN_name.sql (lower case, digits, _)`,
      );
    const version = Number(m[1]);
    if (out.at(-1)?.version === version)
      throw new Error(`${nodePath.join(dir, file)}: migration ${m[1]} twice`);
    out.push({ version, file, sql: fs.readFileSync(nodePath.join(dir, file), 'utf8') });
  }
  return out;
}

/**
 * Bring the database to the newest schema in `dir`: every file whose version is not yet in
 * `schema_migrations` runs, in order (a file that landed after a higher-numbered one still
 * runs). A database holding a version no file here has was written by a newer Weft: refused,
 * unchanged. Returns the highest version.
 */
export async function migratePostgres(sql: Sql, dir = PG_MIGRATIONS_DIR): Promise<number> {
  const all = readPgMigrations(dir);
  const newest = all.at(-1)?.version ?? 0;
  return inTransaction(sql, async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${String(MIGRATION_LOCK)}::bigint)`;
    await tx`CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL)`;
    const rows = await tx<{ version: number }[]>`SELECT version FROM schema_migrations`;
    const applied = new Set(rows.map((r) => r.version));
    const known = new Set(all.map((m) => m.version));
    const unknown = [...applied].filter((v) => !known.has(v)).sort((a, b) => b - a)[0];
    if (unknown !== undefined)
      throw new Error(`proxy metadata schema ${unknown} is newer than this Weft understands (${newest})`);
    for (const m of all) {
      if (applied.has(m.version)) continue;
      await tx.unsafe(m.sql);
      await tx`INSERT INTO schema_migrations (version, applied_ms) VALUES (${m.version}, ${Date.now()})`;
    }
    return newest;
  });
}

/** Add `delta` to an object's refcount (the row made at 0 if absent), dating it when it reaches 0. */
export async function adjustRef(
  tx: Tx | Sql,
  sha256: string,
  size: number,
  delta: number,
  nowMs: number,
): Promise<void> {
  await tx`
    INSERT INTO objects (sha256, size, refcount, unreferenced_since_ms, created_ms)
      VALUES (${sha256}, ${size}, ${delta}, ${delta <= 0 ? nowMs : null}, ${nowMs})
    ON CONFLICT (sha256) DO UPDATE SET
      refcount = objects.refcount + ${delta},
      unreferenced_since_ms = CASE WHEN objects.refcount + ${delta} <= 0 THEN ${nowMs}::bigint ELSE NULL END`;
}
