/**
 * Whether quick filesystem calls (a stat, a realpath) are made on the event loop or through
 * the thread pool. On the loop such a call is a few microseconds when the metadata is cached
 * — four times less CPU than the same call through the pool and its promise (issue #16:
 * 100,000 files asked twice each) — but a disk that answers slowly (a network share, a disk
 * spinning up) would hold the agent's UI for as long as it takes.
 *
 * So calls go on the loop until SLOW_RUN of them in a row take longer than `slowMs`; then
 * through the pool, with one call in every `probeEvery` tried on the loop again, which
 * brings them back once the disk is quick again. One slow call alone does not count: on a
 * loaded machine a process is descheduled in the middle of a call now and then, and a single
 * such call sent every later one to the pool (seen at load 25 on 2 cores).
 */

/** A call on the loop slower than this (ms) counts as slow. */
export const SLOW_CALL_MS = 20;
/** Slow calls in a row that send the next ones to the thread pool. */
export const SLOW_RUN = 3;
/** While in the pool, one call in this many is tried on the loop. */
export const PROBE_EVERY = 1_024;

export class LoopGate {
  private slowInARow = 0;
  private sincePoolStart = 0;
  private onLoopNow = true;
  /** Calls made on the loop and through the pool (tests, benchmarks). */
  readonly calls = { onLoop: 0, inPool: 0 };

  constructor(
    private readonly slowMs = SLOW_CALL_MS,
    private readonly probeEvery = PROBE_EVERY,
  ) {}

  /** Whether the next call goes on the loop (then report its duration with `took`). */
  onLoop(): boolean {
    if (this.onLoopNow || ++this.sincePoolStart % this.probeEvery === 0) {
      this.calls.onLoop += 1;
      return true;
    }
    this.calls.inPool += 1;
    return false;
  }

  /** A call made on the loop took `ms` milliseconds. */
  took(ms: number): void {
    if (ms <= this.slowMs) {
      this.slowInARow = 0;
      this.onLoopNow = true;
      return;
    }
    this.slowInARow += 1;
    if (this.slowInARow >= SLOW_RUN && this.onLoopNow) {
      this.onLoopNow = false;
      this.sincePoolStart = 0;
    }
  }

  /**
   * Run `sync` on the loop (timed) or `async` through the pool, as the gate says. Errors are
   * thrown as they come from either (the same `code`s: both are the same system call).
   */
  async run<T>(sync: () => T, async: () => Promise<T>): Promise<T> {
    if (!this.onLoop()) return async();
    const t = performance.now();
    try {
      return sync();
    } finally {
      this.took(performance.now() - t);
    }
  }
}
