/**
 * At most `limit` tasks in flight, none of whose failures can go unheard: each task's
 * outcome is observed the moment it starts (a rejection that nobody awaits ends a Node
 * process — a `weft agent` exited that way when the proxy died during a large upload).
 * After the first failure no task starts, the ones in flight are waited for, and the first
 * error is thrown to the caller.
 */
export class BoundedTasks {
  private readonly inFlight = new Set<Promise<void>>();
  private failure: { readonly error: unknown } | undefined;

  constructor(private readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1)
      throw new RangeError(`limit must be a positive integer, not ${limit}`);
  }

  /** Start `task` once fewer than `limit` run; after a failure, throws it (once all settled). */
  async add(task: () => Promise<void>): Promise<void> {
    while (this.inFlight.size >= this.limit && !this.failure) await Promise.race(this.inFlight);
    if (this.failure) await this.drain();
    const run = (async (): Promise<void> => {
      try {
        await task();
      } catch (error) {
        this.failure ??= { error };
      }
    })();
    const tracked = run.finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  /** Wait for every task started; throws the first failure, if any. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all(this.inFlight);
    if (this.failure) throw this.failure.error;
  }
}
