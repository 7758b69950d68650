/**
 * The feed sequence numbers of this agent's own writes, as the server's answers named them
 * (OpResult.seq), kept so that a pull can step its cursor over a run of them without
 * fetching their bodies (issue #16: after a 10,029-file drop the agent read back every one
 * of its own changes, eleven GET /v1/changes, before it reported idle).
 *
 * Only a write whose outcome the agent recorded as its synced state is noted: its echo would
 * change nothing here (remote.ts observes such an echo as "ours, nothing changed"). A
 * conflict, a narrowed folder delete (several records, one seq answered), a move whose
 * content was newer there: not noted, their records are read as before.
 *
 * Only a run right after the cursor is stepped over: the first sequence number not noted —
 * another device's change, a server-made one, or one of ours not noted — is read from the
 * server, with the page that follows it, exactly as before. The order of everything read is
 * unchanged; what is skipped comes before all of it. Kept in memory only: after a restart the
 * echoes are read as before.
 */

/** At most this many disjoint runs are kept; past it, all are dropped (the echoes are then read). */
const MAX_RUNS = 10_000;

export class OwnChanges {
  /** Disjoint runs [first, last] of noted sequence numbers, sorted, none touching the next. */
  private runs: [number, number][] = [];
  /** Sequence numbers stepped over so far (tests, bench). */
  skipped = 0;

  /** The change `seq` was this agent's own write, its outcome recorded. 0 (no change): ignored. */
  note(seq: number): void {
    if (!Number.isSafeInteger(seq) || seq <= 0) return;
    const runs = this.runs;
    // The first run whose last is ≥ seq - 1 (the one seq may join or fall into).
    let lo = 0;
    let hi = runs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((runs[mid] as [number, number])[1] < seq - 1) lo = mid + 1;
      else hi = mid;
    }
    const at = runs[lo];
    if (at === undefined || at[0] > seq + 1) {
      if (runs.length >= MAX_RUNS) {
        this.runs = [];
        return;
      }
      runs.splice(lo, 0, [seq, seq]);
      return;
    }
    if (seq < at[0]) at[0] = seq;
    if (seq > at[1]) at[1] = seq;
    const next = runs[lo + 1];
    if (next && next[0] <= at[1] + 1) {
      at[1] = Math.max(at[1], next[1]);
      runs.splice(lo + 1, 1);
    }
  }

  /**
   * The cursor moved past every noted change right after `cursor` (none: `cursor` itself).
   * Runs at or below the result are forgotten: the feed is read from there on.
   */
  skip(cursor: number): number {
    let out = cursor;
    let drop = 0;
    for (const [first, last] of this.runs) {
      if (first > out + 1) break;
      if (last > out) {
        this.skipped += last - out;
        out = last;
      }
      drop += 1;
    }
    if (drop > 0) this.runs.splice(0, drop);
    return out;
  }

  /** Runs held (tests). */
  get size(): number {
    return this.runs.length;
  }
}
