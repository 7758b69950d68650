// Which PostgreSQL client for the proxy's metadata store (issue #18): `pg` (node-postgres) or
// `postgres` (porsager), on the store's hot pattern — applyChanges (one transaction: lock the
// namespace's seq row, upsert the entry, bump an object refcount, append the change, store
// the seq) followed by changesSince (a feed page read) — from W concurrent writers spread over
// 4 namespaces, each client with a pool of 4 connections, against a throwaway cluster
// (packages/proxy-server/src/testing/postgres.ts; fsync off, as in the tests).
// Prints ops/s (one op = one applyChanges + one changesSince) per client and concurrency.
// Figures are printed, never asserted.
//
//   npx tsx bench/pg-client.bench.ts [opsPerRun=3000]
import pg from 'pg';
import postgres from 'postgres';
import { startPostgres } from '@weft/proxy-server/testing/postgres';

const OPS = Number(process.argv[2] ?? 3000);
const SCHEMA = `
CREATE TABLE users (id TEXT PRIMARY KEY, seq BIGINT NOT NULL DEFAULT 0);
CREATE TABLE entries (user_id TEXT, path TEXT COLLATE "C", sha256 TEXT, size BIGINT, PRIMARY KEY (user_id, path));
CREATE TABLE objects (sha256 TEXT PRIMARY KEY, refcount BIGINT NOT NULL);
CREATE TABLE changes (user_id TEXT, seq BIGINT, path TEXT, entry TEXT, PRIMARY KEY (user_id, seq));
INSERT INTO users (id) VALUES ('u0'), ('u1'), ('u2'), ('u3');`;

interface Client {
  apply(user: string, path: string, sha: string): Promise<number>;
  since(user: string, cursor: number): Promise<number>;
  end(): Promise<void>;
}

function pgClient(url: string): Client {
  const pool = new pg.Pool({ connectionString: url, max: 4 });
  return {
    async apply(user, path, sha) {
      const c = await pool.connect();
      try {
        await c.query('BEGIN');
        const r = await c.query<{ seq: string }>('SELECT seq FROM users WHERE id = $1 FOR UPDATE', [user]);
        const seq = Number(r.rows[0]!.seq) + 1;
        await c.query(
          'INSERT INTO entries VALUES ($1, $2, $3, 1) ON CONFLICT (user_id, path) DO UPDATE SET sha256 = EXCLUDED.sha256',
          [user, path, sha],
        );
        await c.query(
          'INSERT INTO objects VALUES ($1, 1) ON CONFLICT (sha256) DO UPDATE SET refcount = objects.refcount + 1',
          [sha],
        );
        await c.query('INSERT INTO changes VALUES ($1, $2, $3, $4)', [
          user,
          seq,
          path,
          `{"sha256":"${sha}"}`,
        ]);
        await c.query('UPDATE users SET seq = $2 WHERE id = $1', [user, seq]);
        await c.query('COMMIT');
        return seq;
      } catch (e) {
        await c.query('ROLLBACK');
        throw e;
      } finally {
        c.release();
      }
    },
    async since(user, cursor) {
      const r = await pool.query({
        name: 'since',
        text: 'SELECT seq, path, entry FROM changes WHERE user_id = $1 AND seq > $2 ORDER BY seq LIMIT 500',
        values: [user, cursor],
      });
      return r.rowCount ?? 0;
    },
    end: () => pool.end(),
  };
}

function postgresClient(url: string): Client {
  const sql = postgres(url, { max: 4, onnotice: () => undefined });
  return {
    async apply(user, path, sha) {
      return sql.begin(async (tx) => {
        const [u] = await tx<{ seq: string }[]>`SELECT seq FROM users WHERE id = ${user} FOR UPDATE`;
        const seq = Number(u!.seq) + 1;
        await tx`INSERT INTO entries VALUES (${user}, ${path}, ${sha}, 1)
          ON CONFLICT (user_id, path) DO UPDATE SET sha256 = EXCLUDED.sha256`;
        await tx`INSERT INTO objects VALUES (${sha}, 1)
          ON CONFLICT (sha256) DO UPDATE SET refcount = objects.refcount + 1`;
        await tx`INSERT INTO changes VALUES (${user}, ${seq}, ${path}, ${`{"sha256":"${sha}"}`})`;
        await tx`UPDATE users SET seq = ${seq} WHERE id = ${user}`;
        return seq;
      });
    },
    async since(user, cursor) {
      const rows = await sql`SELECT seq, path, entry FROM changes
        WHERE user_id = ${user} AND seq > ${cursor} ORDER BY seq LIMIT 500`;
      return rows.length;
    },
    end: () => sql.end(),
  };
}

async function admin(url: string, statement: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(statement);
  } finally {
    await c.end();
  }
}

async function run(make: (url: string) => Client, url: string, writers: number): Promise<number> {
  const client = make(url);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      const user = `u${w % 4}`;
      let cursor = 0;
      while (next < OPS) {
        const i = next++;
        const seq = await client.apply(user, `dir/file-${i % 200}`, `sha-${i % 50}`);
        await client.since(user, Math.max(cursor, seq - 1));
        cursor = seq;
      }
    }),
  );
  const s = (performance.now() - started) / 1000;
  await client.end();
  return OPS / s;
}

const cluster = await startPostgres(admin);
try {
  console.log(`applyChanges + changesSince, ${OPS} ops per run, pool of 4 connections, 4 namespaces`);
  console.log('client      writers  ops/s');
  for (const writers of [1, 4, 16]) {
    for (const [name, make] of [
      ['pg', pgClient],
      ['postgres', postgresClient],
    ] as const) {
      // Two runs each, the second reported (the first warms the cluster's caches and the JIT).
      const url = await cluster.createDatabase();
      await admin(url, SCHEMA);
      await run(make, url, writers);
      const url2 = await cluster.createDatabase();
      await admin(url2, SCHEMA);
      const opsPerS = await run(make, url2, writers);
      console.log(`${name.padEnd(10)}  ${String(writers).padStart(7)}  ${opsPerS.toFixed(0).padStart(5)}`);
    }
  }
} finally {
  await cluster.stop();
}
