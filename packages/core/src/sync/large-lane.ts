/**
 * Large files' uploads beside the stream of small files' bundles (issue #16). A large file's
 * transfer, its commit (the server writes the object to its object tier before it answers)
 * and its signature took seconds; the push waited for them with nothing else on its way, so
 * the bundles queued behind one 2.1 MiB file in a 10,029-file drop stopped for ~3 s.
 *
 * The push (push.ts) hands a window's large puts here, after the window's folders went, and
 * goes on with its bundles and later windows of creates; at most LARGE_IN_FLIGHT uploads run
 * at once, the rest wait here in queue order. What may depend on a file on its way waits for
 * the lane to drain first: any run of deletes or moves, a put of a path on its way, the end
 * of the push. A failure stops the lane from starting more (what did not start stays queued
 * for the next pass) and is thrown by `check()` or `drain()`.
 */
import type { Op } from '../ops.ts';
import type { SyncContext } from './context.ts';
import { uploadLarge } from './propagate/upload-large.ts';

/** Large uploads on their way at once (each holds up to blocksInFlight 4 MiB blocks). */
export const LARGE_IN_FLIGHT = 2;

type Put = { id: number; op: Extract<Op, { kind: 'put' }> };

export class LargeLane {
  /** Handed over and not yet started, in queue order. */
  private waiting: Put[] = [];
  /** On their way, by queue id. */
  private readonly running = new Map<number, Promise<void>>();
  /** Queue ids and paths handed over and not done (waiting or on their way). */
  private readonly ids = new Set<number>();
  private readonly paths = new Set<string>();
  private failure: { error: unknown } | undefined;
  /** Uploads started (tests). */
  started = 0;

  constructor(
    private readonly ctx: SyncContext,
    /** Asked before each upload starts: true leaves the rest queued. */
    private readonly halted: () => boolean,
    private readonly limit = LARGE_IN_FLIGHT,
  ) {}

  /** Whether the queue entry `id` is in the lane (the push does not send it again). */
  has(id: number): boolean {
    return this.ids.has(id);
  }

  /** Whether a put of `path` is in the lane. */
  holds(path: string): boolean {
    return this.paths.has(path);
  }

  get busy(): boolean {
    return this.ids.size > 0;
  }

  /** Upload `q` once fewer than the limit are on their way; returns at once. */
  add(q: Put): void {
    this.ids.add(q.id);
    this.paths.add(q.op.path);
    this.waiting.push(q);
    this.pump();
  }

  /** Throws the first failure of an upload, if any. */
  check(): void {
    if (this.failure) throw this.failure.error;
  }

  /** Wait until nothing is on its way (what did not start is dropped: it stays queued), then check(). */
  async drain(): Promise<void> {
    await this.settle();
    this.check();
  }

  /** Wait until nothing is on its way; never throws (for a push that is returning anyway). */
  async settle(): Promise<void> {
    for (;;) {
      if (this.running.size === 0) {
        if (this.waiting.length === 0) return;
        // Not started (halted, or after a failure): it stays queued for the next push.
        for (const q of this.waiting.splice(0)) this.forget(q);
        return;
      }
      await Promise.all(this.running.values());
    }
  }

  private forget(q: Put): void {
    this.ids.delete(q.id);
    this.paths.delete(q.op.path);
  }

  private pump(): void {
    while (this.running.size < this.limit && this.waiting.length > 0) {
      if (this.failure || this.halted()) return;
      const q = this.waiting.shift() as Put;
      this.started += 1;
      const run = (async (): Promise<void> => {
        try {
          this.ctx.commit(await uploadLarge(this.ctx, q.id, q.op));
        } catch (error) {
          this.failure ??= { error };
        } finally {
          this.running.delete(q.id);
          this.forget(q);
          this.pump();
        }
      })();
      this.running.set(q.id, run);
    }
  }
}
