/**
 * Reads per content (SQLite migration 008, pg-migrations/002; docs/cost.md): every download
 * of a small file — whole, ranged, or in a bundle — counts one read of its content. Counts are
 * kept in memory and added to the table in one transaction per batch (when `batchSize`
 * contents wait, every `flushMs`, and on close), so a read costs a map update, not a write.
 * Each proxy process adds its own counts (`reads = reads + n`), so on a shared PostgreSQL the
 * table holds every process's reads. The cost model asks `readsPerMonth` when it decides
 * whether a small file's filesystem-tier copy is kept once its pack is flushed: a content read
 * often stays on the filesystem tier.
 */
import type Database from 'better-sqlite3';
import { MONTH_MS } from '../cost/prices.ts';
import { inTransaction, type Sql } from './postgres-db.ts';

export interface ContentReads {
  reads: number;
  firstMs: number;
  lastMs: number;
}

/** The `content_reads` table: one implementation per metadata store. */
export interface ReadCountStore {
  /** Add a batch of counts (one transaction). */
  add(batch: ReadonlyMap<string, ContentReads>): Promise<void>;
  get(sha256: string): Promise<ContentReads | undefined>;
}

export class SqliteReadCounts implements ReadCountStore {
  private readonly upsert: Database.Statement;
  private readonly select: Database.Statement;

  constructor(private readonly db: Database.Database) {
    this.upsert = db.prepare(
      `INSERT INTO content_reads (sha256, reads, first_ms, last_ms) VALUES (?, ?, ?, ?)
       ON CONFLICT (sha256) DO UPDATE SET reads = reads + excluded.reads,
         first_ms = MIN(first_ms, excluded.first_ms), last_ms = MAX(last_ms, excluded.last_ms)`,
    );
    this.select = db.prepare(
      'SELECT reads, first_ms AS firstMs, last_ms AS lastMs FROM content_reads WHERE sha256 = ?',
    );
  }

  async add(batch: ReadonlyMap<string, ContentReads>): Promise<void> {
    this.db.transaction(() => {
      for (const [sha, w] of batch) this.upsert.run(sha, w.reads, w.firstMs, w.lastMs);
    })();
  }

  async get(sha256: string): Promise<ContentReads | undefined> {
    return this.select.get(sha256) as ContentReads | undefined;
  }
}

export class PostgresReadCounts implements ReadCountStore {
  constructor(private readonly sql: Sql) {}

  async add(batch: ReadonlyMap<string, ContentReads>): Promise<void> {
    // Sorted: two processes adding overlapping batches lock the rows in the same order.
    const rows = JSON.stringify(
      [...batch]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([sha256, w]) => ({ sha256, reads: w.reads, first_ms: w.firstMs, last_ms: w.lastMs })),
    );
    await inTransaction(
      this.sql,
      (tx) => tx`
        INSERT INTO content_reads (sha256, reads, first_ms, last_ms)
        SELECT * FROM jsonb_to_recordset(${rows}::text::jsonb)
          AS x(sha256 TEXT, reads BIGINT, first_ms BIGINT, last_ms BIGINT)
        ON CONFLICT (sha256) DO UPDATE SET reads = content_reads.reads + excluded.reads,
          first_ms = LEAST(content_reads.first_ms, excluded.first_ms),
          last_ms = GREATEST(content_reads.last_ms, excluded.last_ms)`,
    );
  }

  async get(sha256: string): Promise<ContentReads | undefined> {
    const [r] = await this.sql<ContentReads[]>`
      SELECT reads, first_ms AS "firstMs", last_ms AS "lastMs" FROM content_reads WHERE sha256 = ${sha256}`;
    return r;
  }
}

export interface ReadCounterOptions {
  /** Write the waiting counts once this many contents wait (default 1,024). */
  readonly batchSize?: number;
  /** …and at least this often (ms, default 10 s; 0: only by size and on close). */
  readonly flushMs?: number;
  readonly now?: () => number;
  /** A batch that could not be written (its counts are lost; they only steer a cost choice). */
  readonly onError?: (e: unknown) => void;
}

export class ReadCounter {
  private waiting = new Map<string, ContentReads>();
  /** The batch being written now (still counted by `reads`). */
  private writing = new Map<string, ContentReads>();
  private written: Promise<void> = Promise.resolve();
  private readonly batchSize: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: ReadCountStore,
    private readonly o: ReadCounterOptions = {},
  ) {
    this.batchSize = o.batchSize ?? 1024;
    this.now = o.now ?? Date.now;
    const flushMs = o.flushMs ?? 10_000;
    if (flushMs > 0) {
      this.timer = setInterval(() => void this.flush(), flushMs);
      this.timer.unref();
    }
  }

  /** One read of this content (whole or a range of it). */
  count(sha256: string): void {
    const t = this.now();
    const w = this.waiting.get(sha256);
    if (w) {
      w.reads += 1;
      w.lastMs = t;
    } else this.waiting.set(sha256, { reads: 1, firstMs: t, lastMs: t });
    if (this.waiting.size >= this.batchSize) void this.flush();
  }

  /** Write the waiting counts (one transaction, after the batch before it). */
  flush(): Promise<void> {
    if (this.waiting.size === 0) return this.written;
    const batch = this.waiting;
    this.waiting = new Map();
    const write = async (): Promise<void> => {
      this.writing = batch;
      try {
        await this.store.add(batch);
      } catch (e) {
        this.o.onError?.(e);
      } finally {
        this.writing = new Map();
      }
    };
    // The first batch is written at once (SQLite: before flush returns); later ones in turn.
    this.written = this.writing.size === 0 ? write() : this.written.then(write);
    return this.written;
  }

  /** Resolves once every batch handed to the store so far is written (or failed). */
  settled(): Promise<void> {
    return this.written;
  }

  /** Reads of this content so far (written and waiting) and when the first was. */
  async reads(sha256: string): Promise<{ reads: number; firstMs: number }> {
    const pending = [this.waiting.get(sha256), this.writing.get(sha256)];
    const row = await this.store.get(sha256);
    let reads = row?.reads ?? 0;
    let firstMs = row?.firstMs ?? Infinity;
    for (const w of pending)
      if (w) {
        reads += w.reads;
        firstMs = Math.min(firstMs, w.firstMs);
      }
    return { reads, firstMs: Number.isFinite(firstMs) ? firstMs : this.now() };
  }

  /**
   * Reads expected per month: the reads so far over the time since the first, at least a
   * month — ten reads in a minute are ten this month, not 400,000; a file every other device
   * downloads once after its upload is read once or twice a month, not 30 times — and 0 for a
   * content never read.
   */
  async readsPerMonth(sha256: string, nowMs = this.now()): Promise<number> {
    const { reads, firstMs } = await this.reads(sha256);
    if (reads === 0) return 0;
    return (reads * MONTH_MS) / Math.max(MONTH_MS, nowMs - firstMs);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}
