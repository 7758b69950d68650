/**
 * Uploads that start before the scan ends (issue #16). A first sync of 100,000 files used to
 * send nothing until the whole folder was walked, hashed and queued; now the scan hands what
 * it has found to the queue as it goes (ScanOptions.found, discovery/local.ts) and a push runs
 * beside it from the first bundle's worth of creates on.
 *
 * Only when the queue was empty as the scan began (and nothing held back, online, not paused,
 * room on the server): then every operation sent early is one of this scan's, in the order
 * the scan found them, and none that the scan queues later can merge into one on its way —
 * a scan queues each path once (a file turned folder as a delete and a create together), its
 * moves first and its deletions last, after the push beside it has stopped when the scan
 * would delete many files (the mass-delete question comes before any delete goes).
 *
 * The scan stays at most QUEUE_AHEAD operations ahead of the push (`room()`): a walk is
 * faster than an upload, and every queued operation is held in memory (the queue, ~500 B
 * each) — a 1,000,000-file first sync held 800,000 of them, ~400 MiB (issue #16).
 */
import type { SyncContext } from './context.ts';
import { releasable } from './discovery/held.ts';
import { BundleFlight } from './propagate/bundle-flight.ts';
import { type PushControl, push } from './push.ts';

/**
 * While a push runs beside it, the scan waits (`room()`) as long as this many operations or
 * more are queued: enough for dozens of bundles, a few MiB of queue, whatever the folder's size.
 */
export const QUEUE_AHEAD = 20_000;

/** How often a scan waiting for room looks at the queue again (ms). */
const ROOM_POLL_MS = 10;

export class EarlyPush {
  private running: Promise<void> | undefined;
  /** The push has returned (done, paused, stopped, or failed): nothing drains the queue now. */
  private settled = false;
  private failure: { error: unknown } | undefined;
  private over = false;
  private wake: ((more: boolean) => void) | undefined;
  /** finish(true): the push stops between requests. */
  private stopNow = false;
  /** The push's bundles on their way (kept across its windows: push.ts). */
  private readonly bundles = new BundleFlight();

  private constructor(
    private readonly ctx: SyncContext,
    private readonly control: PushControl,
    private readonly ahead: number,
  ) {}

  /**
   * An early push for the scan about to begin, or undefined when it must wait for the scan.
   * `ahead`: the most operations the scan may queue ahead of it (QUEUE_AHEAD; tests).
   */
  static forScan(
    ctx: SyncContext,
    control: PushControl,
    online: boolean,
    ahead = QUEUE_AHEAD,
  ): EarlyPush | undefined {
    if (!online || control.paused() || control.stopped() || control.storageFull()) return undefined;
    if (ctx.journal.pendingCount() > 0 || releasable(ctx).length > 0) return undefined;
    return new EarlyPush(ctx, control, ahead);
  }

  /** The scan queued more operations: start sending, or wake the push waiting for them. */
  queued(): void {
    if (this.over) return;
    if (this.running === undefined) {
      const control: PushControl = {
        ...this.control,
        stopped: () => this.stopNow || this.control.stopped(),
        more: () => this.more(),
        scanning: () => !this.over,
        bundles: this.bundles,
      };
      this.running = push(this.ctx, control)
        .catch((error: unknown) => {
          this.failure = { error };
        })
        .finally(() => {
          this.settled = true;
        });
      return;
    }
    this.wake?.(true);
  }

  /**
   * Resolves once the scan may queue more: fewer than `ahead` operations wait, or nothing
   * would drain them — the push waits for more (a queue of folders and empty files is less
   * than a bundle's worth of bytes) with no bundle on its way (their files are in the queue
   * until answered), has returned (paused, storage full, failed), or the engine stops.
   * Called by the scan after each batch it queued.
   */
  async room(): Promise<void> {
    while (
      this.ctx.journal.pendingCount() >= this.ahead &&
      this.running !== undefined &&
      !this.settled &&
      (this.wake === undefined || this.bundles.unanswered > 0) &&
      !this.stopNow &&
      !this.control.stopped()
    ) {
      this.waits += 1;
      await new Promise<void>((resolve) => setTimeout(resolve, ROOM_POLL_MS));
    }
  }

  /** Times `room()` looked at the queue and found no room (tests). */
  waits = 0;

  /** Whether a push has started (tests). */
  get started(): boolean {
    return this.running !== undefined;
  }

  private more(): Promise<boolean> {
    if (this.over) return Promise.resolve(false);
    return new Promise((resolve) => {
      this.wake = (more) => {
        this.wake = undefined;
        resolve(more);
      };
    });
  }

  /**
   * The scan has queued all it will before this returns (`stopNow`: stop between requests,
   * leaving the rest queued): resolves once the push has returned — with the queue empty, or
   * stopped — and throws what it failed with.
   */
  async finish(stopNow = false): Promise<void> {
    this.over = true;
    if (stopNow) this.stopNow = true;
    this.wake?.(false);
    await this.running;
    if (this.failure) throw this.failure.error;
  }
}
