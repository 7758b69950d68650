/**
 * The server's live feed as a wake-up for remote discovery: a message that changes were
 * recorded (or that the feed was reset) asks for a pull after a short quiet time, so a
 * burst of remote changes (another device dropping thousands of files) becomes one pull of
 * many changes, downloaded in bundles, not one pass per change. The changes themselves are
 * read by pull() (remote.ts) from the journal's cursor.
 */
import type { Disposable } from '../../lifecycle.ts';
import type { RemoteStore } from '../../remote/remote-store.ts';

export interface FeedWakeHandlers {
  /** Quiet time after a message before waking. */
  readonly debounceMs: number;
  /** The server refused this device's token (DEVICE_REVOKED, UNAUTHORIZED). */
  readonly onRefused: (code: string) => void;
  /** Changes were announced (at once, before the quiet time). */
  readonly onAnnounced: () => void;
  /** The quiet time is over: pull. */
  readonly onWake: () => void;
  /** The feed ended by itself (not by dispose): connect again later. */
  readonly onClosed: () => void;
}

export class FeedWake implements Disposable {
  private feed: Disposable | undefined;
  private timer: NodeJS.Timeout | undefined;
  private disposing = false;

  constructor(
    private readonly client: RemoteStore,
    private readonly on: FeedWakeHandlers,
  ) {}

  get connected(): boolean {
    return this.feed !== undefined;
  }

  connect(cursor: number): void {
    this.feed = this.client.openFeed(
      cursor,
      (m) => {
        if (m.type === 'error' && (m.error.code === 'DEVICE_REVOKED' || m.error.code === 'UNAUTHORIZED')) {
          this.on.onRefused(m.error.code);
          return;
        }
        if (m.type === 'changes' || m.type === 'reset') {
          this.on.onAnnounced();
          if (!this.timer) {
            this.timer = setTimeout(() => {
              this.timer = undefined;
              this.on.onWake();
            }, this.on.debounceMs);
          }
        }
      },
      () => {
        this.feed = undefined;
        if (!this.disposing) this.on.onClosed();
      },
    );
  }

  /** Close the feed and drop a pending wake-up; onClosed is not called. */
  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const feed = this.feed;
    this.feed = undefined;
    this.disposing = true;
    try {
      feed?.dispose();
    } finally {
      this.disposing = false;
    }
  }
}
