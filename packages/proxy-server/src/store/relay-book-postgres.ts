/**
 * The relay cache's books on PostgreSQL (relay-book.ts), shared by every proxy instance whose
 * filesystem tier (and so relay directory) is the same: tables `relay_entries` and
 * `relay_pins` (pg-migrations/003). Every change runs in one transaction under one advisory
 * lock, so a pin and an eviction never interleave: a copy some instance reads is never
 * claimed, and a claimed copy is pinned by nobody. Recency is a database sequence, one order
 * for all instances. A holder's pins count while it renews them; an instance that died
 * holding some stops counting after the stale bound the cache passes in.
 */
import type { RelayBook, RelayEntry, RelayTotals } from './relay-book.ts';
import { connect, inTransaction, type Sql, type Tx } from './postgres-db.ts';

/** Advisory lock of the relay books (any fixed 64-bit number, distinct from the migration lock). */
const RELAY_LOCK = 0x77656674_0003n;

interface EntrySql {
  sha256: string;
  file: string;
  size: number;
}

function entryOf(r: EntrySql): RelayEntry {
  return { sha256: r.sha256, file: r.file, size: r.size };
}

export class PostgresRelayBook implements RelayBook {
  readonly shared = true;

  /** On a pool of its own (`url`), or on `sql` (closed by its owner). */
  constructor(
    private readonly sql: Sql,
    private readonly owned = false,
  ) {}

  static open(url: string): PostgresRelayBook {
    return new PostgresRelayBook(connect(url, 2), true);
  }

  private locked<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return inTransaction(this.sql, async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${String(RELAY_LOCK)}::bigint)`;
      return fn(tx);
    });
  }

  private static async pinIn(tx: Tx, sha256: string, holder: string, nowMs: number): Promise<void> {
    await tx`INSERT INTO relay_pins (sha256, holder, pins, renewed_ms) VALUES (${sha256}, ${holder}, 1, ${nowMs})
      ON CONFLICT (sha256, holder) DO UPDATE SET pins = relay_pins.pins + 1, renewed_ms = ${nowMs}`;
  }

  pin(sha256: string, holder: string, nowMs: number): Promise<RelayEntry | undefined> {
    return this.locked(async (tx) => {
      const [r] = await tx<EntrySql[]>`UPDATE relay_entries SET last_used = nextval('relay_use_seq')
        WHERE sha256 = ${sha256} RETURNING sha256, file, size`;
      if (!r) return undefined;
      await PostgresRelayBook.pinIn(tx, sha256, holder, nowMs);
      return entryOf(r);
    });
  }

  add(entry: RelayEntry, holder: string, nowMs: number): Promise<RelayEntry> {
    return this.locked(async (tx) => {
      await tx`INSERT INTO relay_entries (sha256, file, size, last_used, staged_ms)
        VALUES (${entry.sha256}, ${entry.file}, ${entry.size}, nextval('relay_use_seq'), ${nowMs})
        ON CONFLICT (sha256) DO UPDATE SET last_used = nextval('relay_use_seq')`;
      const [r] = await tx<
        EntrySql[]
      >`SELECT sha256, file, size FROM relay_entries WHERE sha256 = ${entry.sha256}`;
      await PostgresRelayBook.pinIn(tx, entry.sha256, holder, nowMs);
      return entryOf(r!);
    });
  }

  async unpin(sha256: string, holder: string): Promise<void> {
    await this.locked(async (tx) => {
      await tx`UPDATE relay_pins SET pins = pins - 1 WHERE sha256 = ${sha256} AND holder = ${holder}`;
      await tx`DELETE FROM relay_pins WHERE sha256 = ${sha256} AND holder = ${holder} AND pins <= 0`;
    });
  }

  async drop(entry: RelayEntry): Promise<void> {
    await this.locked(
      (tx) => tx`DELETE FROM relay_entries WHERE sha256 = ${entry.sha256} AND file = ${entry.file}`,
    );
  }

  evict(maxBytes: number, staleBeforeMs: number): Promise<RelayEntry[]> {
    return this.locked(async (tx) => {
      const [t] = await tx<
        { bytes: number }[]
      >`SELECT COALESCE(SUM(size), 0)::bigint AS bytes FROM relay_entries`;
      let total = t?.bytes ?? 0;
      if (total <= maxBytes) return [];
      const candidates = await tx<EntrySql[]>`SELECT e.sha256, e.file, e.size FROM relay_entries e
        WHERE NOT EXISTS (SELECT 1 FROM relay_pins p
          WHERE p.sha256 = e.sha256 AND p.pins > 0 AND p.renewed_ms >= ${staleBeforeMs})
        ORDER BY e.last_used`;
      const out: RelayEntry[] = [];
      for (const c of candidates) {
        if (total <= maxBytes) break;
        total -= c.size;
        out.push(entryOf(c));
      }
      if (out.length > 0) {
        const shas = out.map((e) => e.sha256);
        await tx`DELETE FROM relay_entries WHERE sha256 IN ${tx(shas)}`;
        await tx`DELETE FROM relay_pins WHERE sha256 IN ${tx(shas)}`;
      }
      return out;
    });
  }

  forget(sha256: string, staleBeforeMs: number): Promise<RelayEntry | undefined> {
    return this.locked(async (tx) => {
      const [r] = await tx<EntrySql[]>`DELETE FROM relay_entries e WHERE sha256 = ${sha256}
        AND NOT EXISTS (SELECT 1 FROM relay_pins p
          WHERE p.sha256 = e.sha256 AND p.pins > 0 AND p.renewed_ms >= ${staleBeforeMs})
        RETURNING sha256, file, size`;
      if (r) await tx`DELETE FROM relay_pins WHERE sha256 = ${sha256}`;
      return r ? entryOf(r) : undefined;
    });
  }

  async has(sha256: string): Promise<boolean> {
    const [r] = await this.sql`SELECT 1 FROM relay_entries WHERE sha256 = ${sha256}`;
    return r !== undefined;
  }

  async files(): Promise<Set<string>> {
    return new Set((await this.sql<{ file: string }[]>`SELECT file FROM relay_entries`).map((r) => r.file));
  }

  async totals(): Promise<RelayTotals> {
    const [r] = await this.sql<RelayTotals[]>`
      SELECT COALESCE(SUM(size), 0)::bigint AS bytes, COUNT(*)::bigint AS files FROM relay_entries`;
    return r ?? { bytes: 0, files: 0 };
  }

  async renew(holder: string, nowMs: number): Promise<void> {
    await this.sql`UPDATE relay_pins SET renewed_ms = ${nowMs} WHERE holder = ${holder}`;
  }

  async close(): Promise<void> {
    if (this.owned) await this.sql.end({ timeout: 5 });
  }
}
