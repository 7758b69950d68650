/**
 * Reads per content (migration 008, docs/cost.md): every download of a small file — whole,
 * ranged, or in a bundle — counts one read of its content. Counts are kept in memory and
 * written in one transaction per batch (when `batchSize` contents wait, every `flushMs`, and
 * on close), so a read costs a map update, not a write. The cost model asks `readsPerMonth`
 * when it decides whether a small file's filesystem-tier copy is kept once its pack is
 * flushed: a content read often stays on the filesystem tier.
 */
import type Database from 'better-sqlite3';
import { MONTH_MS } from '../cost/prices.ts';

export interface ReadCounterOptions {
  /** Write the waiting counts once this many contents wait (default 1,024). */
  readonly batchSize?: number;
  /** …and at least this often (ms, default 10 s; 0: only by size and on close). */
  readonly flushMs?: number;
  readonly now?: () => number;
}

interface Waiting {
  reads: number;
  firstMs: number;
  lastMs: number;
}

export class ReadCounter {
  private waiting = new Map<string, Waiting>();
  private readonly batchSize: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout | undefined;
  private readonly upsert: Database.Statement;
  private readonly select: Database.Statement;

  constructor(
    private readonly db: Database.Database,
    o: ReadCounterOptions = {},
  ) {
    this.batchSize = o.batchSize ?? 1024;
    this.now = o.now ?? Date.now;
    this.upsert = db.prepare(
      `INSERT INTO content_reads (sha256, reads, first_ms, last_ms) VALUES (?, ?, ?, ?)
       ON CONFLICT (sha256) DO UPDATE SET reads = reads + excluded.reads,
         first_ms = MIN(first_ms, excluded.first_ms), last_ms = MAX(last_ms, excluded.last_ms)`,
    );
    this.select = db.prepare(
      'SELECT reads, first_ms AS firstMs, last_ms AS lastMs FROM content_reads WHERE sha256 = ?',
    );
    const flushMs = o.flushMs ?? 10_000;
    if (flushMs > 0) {
      this.timer = setInterval(() => this.flush(), flushMs);
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
    if (this.waiting.size >= this.batchSize) this.flush();
  }

  /** Write the waiting counts (one transaction). */
  flush(): void {
    if (this.waiting.size === 0) return;
    const batch = this.waiting;
    this.waiting = new Map();
    this.db.transaction(() => {
      for (const [sha, w] of batch) this.upsert.run(sha, w.reads, w.firstMs, w.lastMs);
    })();
  }

  /** Reads of this content so far (written and waiting) and when the first was. */
  reads(sha256: string): { reads: number; firstMs: number } {
    const row = this.select.get(sha256) as Waiting | undefined;
    const w = this.waiting.get(sha256);
    const reads = (row?.reads ?? 0) + (w?.reads ?? 0);
    const firstMs = Math.min(row?.firstMs ?? Infinity, w?.firstMs ?? Infinity);
    return { reads, firstMs: Number.isFinite(firstMs) ? firstMs : this.now() };
  }

  /**
   * Reads expected per month: the reads so far over the time since the first, at least a
   * month — ten reads in a minute are ten this month, not 400,000; a file every other device
   * downloads once after its upload is read once or twice a month, not 30 times — and 0 for a
   * content never read.
   */
  readsPerMonth(sha256: string, nowMs = this.now()): number {
    const { reads, firstMs } = this.reads(sha256);
    if (reads === 0) return 0;
    return (reads * MONTH_MS) / Math.max(MONTH_MS, nowMs - firstMs);
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.flush();
  }
}
