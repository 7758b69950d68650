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
 */
import type { SyncContext } from './context.ts';
import { releasable } from './discovery/held.ts';
import { type PushControl, push } from './push.ts';

export class EarlyPush {
  private running: Promise<void> | undefined;
  private failure: { error: unknown } | undefined;
  private over = false;
  private wake: ((more: boolean) => void) | undefined;
  /** finish(true): the push stops between requests. */
  private stopNow = false;

  private constructor(
    private readonly ctx: SyncContext,
    private readonly control: PushControl,
  ) {}

  /** An early push for the scan about to begin, or undefined when it must wait for the scan. */
  static forScan(ctx: SyncContext, control: PushControl, online: boolean): EarlyPush | undefined {
    if (!online || control.paused() || control.stopped() || control.storageFull()) return undefined;
    if (ctx.journal.pendingCount() > 0 || releasable(ctx).length > 0) return undefined;
    return new EarlyPush(ctx, control);
  }

  /** The scan queued more operations: start sending, or wake the push waiting for them. */
  queued(): void {
    if (this.over) return;
    if (this.running === undefined) {
      const control: PushControl = {
        ...this.control,
        stopped: () => this.stopNow || this.control.stopped(),
        more: () => this.more(),
      };
      this.running = push(this.ctx, control).catch((error: unknown) => {
        this.failure = { error };
      });
      return;
    }
    this.wake?.(true);
  }

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
