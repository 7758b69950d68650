/**
 * The journal's recent activity (the status's history, kept across restarts): items recorded
 * in memory and written together, one transaction per turn of the event loop. The Journal
 * owns the database and delegates its activity methods here.
 */
import type Database from 'better-sqlite3';
import { ROWS_PER_STATEMENT, valuesList } from './rows.ts';

/** One activity item as the journal keeps it (status.ts ActivityItem). */
export interface ActivityRecord {
  readonly atMs: number;
  readonly kind: string;
  readonly path: string;
  readonly detail?: string | undefined;
  readonly row?: string | undefined;
}

/** Recent activity kept: the status shows these, and they survive a restart. */
export const ACTIVITY_KEPT = 200;

export class ActivityLog {
  constructor(
    private readonly db: Database.Database,
    /** The journal's prepared statement for a text (prepared once). */
    private readonly sql: (text: string) => Database.Statement,
  ) {}

  /** Activity recorded but not written yet (written together: see add). */
  private buffer: ActivityRecord[] = [];
  private timer: NodeJS.Immediate | undefined;

  /**
   * Record one activity item (the oldest beyond ACTIVITY_KEPT are dropped). Items are written
   * together, in one transaction, on the next turn of the event loop (or before the activity
   * is read and before the journal closes): one autocommitted INSERT per uploaded file was
   * 5 s of a 100,000-file drop's main thread (issue #16). Activity is the UI's history — a
   * crash may lose the last turn's items, never a file or an operation.
   */
  add(item: ActivityRecord): void {
    this.buffer.push(item);
    this.timer ??= setImmediate(() => this.flush());
  }

  /** Write the recorded activity now (one transaction); how many transactions ran (0 or 1). */
  flush(): number {
    if (this.timer !== undefined) clearImmediate(this.timer);
    this.timer = undefined;
    // Only the last ACTIVITY_KEPT can survive the trim: the older ones are not written at all.
    const items = this.buffer.slice(-ACTIVITY_KEPT);
    this.buffer = [];
    if (items.length === 0 || !this.db.open) return 0;
    // Multi-row statements, in their order (one a item was ~1 % of the agent's CPU per
    // uploaded file, issue #16; journal.ts runRows).
    this.db.transaction(() => {
      for (let i = 0; i < items.length; i += ROWS_PER_STATEMENT) {
        const chunk = items.slice(i, i + ROWS_PER_STATEMENT);
        this.sql(
          `INSERT INTO activity(at_ms, kind, path, detail, row_id) VALUES ${valuesList(chunk.length, 5)}`,
        ).run(chunk.flatMap((t) => [t.atMs, t.kind, t.path, t.detail ?? null, t.row ?? null]));
      }
      this.sql('DELETE FROM activity WHERE id <= (SELECT MAX(id) FROM activity) - ?').run(ACTIVITY_KEPT);
    })();
    return 1;
  }

  /** The last ACTIVITY_KEPT items, newest first. */
  recent(): { atMs: number; kind: string; path: string; detail?: string; row?: string }[] {
    this.flush();
    const rows = this.sql(
      'SELECT at_ms, kind, path, detail, row_id FROM activity ORDER BY id DESC LIMIT ?',
    ).all(ACTIVITY_KEPT) as {
      at_ms: bigint;
      kind: string;
      path: string;
      detail: string | null;
      row_id: string | null;
    }[];
    return rows.map((r) => ({
      atMs: Number(r.at_ms),
      kind: r.kind,
      path: r.path,
      ...(r.detail === null ? {} : { detail: r.detail }),
      ...(r.row_id === null ? {} : { row: r.row_id }),
    }));
  }
}
