/**
 * A set of integers kept in order, with the one query the coalescing queue needs: the
 * largest member below a bound. Members are kept in sorted runs (plain arrays of at most
 * `runLength` numbers, every member of a run below every member of the next), found by a
 * binary search over the runs' last members and then within the run: insert, delete and the
 * query take O(log n + runLength). The queue's keys mostly arrive in ascending order, which
 * fills the last run and opens a new one, so the runs stay full.
 *
 * Runs instead of a tree: a tree node per member (an object of four fields, ~48 bytes) made
 * the queue's folder indexes the largest thing it held — three per queued file, one per
 * folder above it — and every insert allocated the split's arrays (issue #16: a queue of
 * 100,000 files). A member of a run costs one array slot.
 */

/** Members per run: the splice of a run stays a short copy. */
const RUN_LENGTH = 512;

/** The first index of sorted `a` whose member is ≥ key (a.length if none). */
function lowerBound(a: readonly number[], key: number): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((a[mid] as number) < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class OrderedIds {
  /** Sorted, non-empty runs; every member of one below every member of the next. */
  private readonly runs: number[][] = [];
  private count = 0;

  /** @param runLength members per run (tests use small runs to split and empty them often). */
  constructor(private readonly runLength = RUN_LENGTH) {
    if (!Number.isInteger(runLength) || runLength < 2)
      throw new RangeError('runLength must be an integer ≥ 2');
  }

  get size(): number {
    return this.count;
  }

  /** How many runs hold the members (memory; tests). */
  get runCount(): number {
    return this.runs.length;
  }

  /** The index of the first run whose last member is ≥ key (runs.length if none). */
  private runFor(key: number): number {
    let lo = 0;
    let hi = this.runs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const run = this.runs[mid] as number[];
      if ((run[run.length - 1] as number) < key) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  has(key: number): boolean {
    const run = this.runs[this.runFor(key)];
    return run !== undefined && run[lowerBound(run, key)] === key;
  }

  add(key: number): void {
    const i = this.runFor(key);
    const run = this.runs[i];
    if (run === undefined) {
      // Above every member (the usual case): onto the last run, or a new one when it is full.
      const last = this.runs[this.runs.length - 1];
      if (last !== undefined && last.length < this.runLength) last.push(key);
      else this.runs.push([key]);
      this.count += 1;
      return;
    }
    const j = lowerBound(run, key);
    if (run[j] === key) return;
    run.splice(j, 0, key);
    this.count += 1;
    if (run.length > this.runLength) this.runs.splice(i + 1, 0, run.splice(run.length >>> 1));
  }

  delete(key: number): boolean {
    const i = this.runFor(key);
    const run = this.runs[i];
    if (run === undefined) return false;
    const j = lowerBound(run, key);
    if (run[j] !== key) return false;
    run.splice(j, 1);
    if (run.length === 0) this.runs.splice(i, 1);
    this.count -= 1;
    return true;
  }

  /** The largest member strictly below `bound`, if any. */
  maxBelow(bound: number): number | undefined {
    const i = this.runFor(bound);
    const run = this.runs[i];
    if (run !== undefined) {
      const j = lowerBound(run, bound);
      if (j > 0) return run[j - 1];
    }
    const before = this.runs[i - 1];
    return before === undefined ? undefined : before[before.length - 1];
  }

  /** Members in ascending order. */
  *[Symbol.iterator](): IterableIterator<number> {
    for (const run of this.runs) yield* run;
  }
}
