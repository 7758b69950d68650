/**
 * The engine's link to the server between passes: the live feed (discovery/feed.ts) that
 * wakes the loop, the retry after a failed pass (retry.ts: Weft's backoff policy; the feed
 * is reconnected on the same schedule), and the end of it all when the server refuses this
 * device's token (revoked or unknown): no retry loop then, only the reason in the status.
 */
import type { EngineOptions } from '../engine-options.ts';
import { DEVICE_REMOVED_MESSAGE, DEVICE_UNKNOWN_MESSAGE } from '../engine-options.ts';
import type { Disposable } from '../lifecycle.ts';
import { FeedWake } from './discovery/feed.ts';
import { RetryTimer } from './retry.ts';

export interface RemoteLinkHooks {
  /** Where the feed starts (the journal's cursor). */
  readonly cursor: () => number;
  /** The server announced a change: pull at the next pass. */
  readonly onAnnounced: () => void;
  /** Run a pass (the feed settled, or a retry is due). */
  readonly onWake: (retry: boolean) => void;
  /** The server refused this device: show `message`; nothing more is tried. */
  readonly onRemoved: (message: string) => void;
  readonly stopped: () => boolean;
}

export class RemoteLink implements Disposable {
  private readonly feed: FeedWake;
  private readonly retry: RetryTimer;
  private readonly live: boolean;
  private removedMessage: string | undefined;

  constructor(
    options: EngineOptions,
    private readonly hooks: RemoteLinkHooks,
  ) {
    this.live = options.liveFeed ?? true;
    const retryMs = options.offlineRetryMs ?? 2000;
    this.retry = new RetryTimer(retryMs, options.offlineRetryCapMs ?? 15 * retryMs, () => {
      if (!this.feed.connected) this.connect();
      hooks.onWake(true);
    });
    this.feed = new FeedWake(options.client, {
      debounceMs: options.feedDebounceMs ?? 250,
      onRefused: (code) => this.halt(code),
      onAnnounced: hooks.onAnnounced,
      onWake: () => hooks.onWake(false),
      onClosed: () => this.retryLater(),
    });
  }

  /** Open the live feed (unless the engine runs without one). */
  connect(): void {
    if (this.live && !this.hooks.stopped() && !this.removed) this.feed.connect(this.hooks.cursor());
  }

  /** True once the server has refused this device's token. */
  get removed(): boolean {
    return this.removedMessage !== undefined;
  }

  /** Why the device no longer syncs (once removed). */
  get message(): string {
    return this.removedMessage ?? DEVICE_REMOVED_MESSAGE;
  }

  /** The server refused this device's token: stop for good and say why. */
  halt(code: string): void {
    if (this.removed) return;
    this.removedMessage = code === 'DEVICE_REVOKED' ? DEVICE_REMOVED_MESSAGE : DEVICE_UNKNOWN_MESSAGE;
    this.retry.dispose();
    this.feed.dispose();
    this.hooks.onRemoved(this.removedMessage);
  }

  /** A pass failed (or the feed closed): try again after the policy's next delay. */
  retryLater(): void {
    if (!this.hooks.stopped() && !this.removed) this.retry.schedule();
  }

  /** A pass succeeded: the next failure waits the shortest delay again. */
  succeeded(): void {
    this.retry.succeeded();
  }

  dispose(): void {
    this.retry.dispose();
    this.feed.dispose();
  }
}
