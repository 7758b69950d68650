/**
 * When the pass loop tries again after a pass failed (offline, a server error, the live
 * feed closed): Weft's one retry policy (`@weft/providers/backoff`: exponential with equal
 * jitter and a cap), counted from the last pass that succeeded. With the defaults the first
 * retry comes after 1–2 s and the gap grows to at most 30 s while the server stays away.
 */
import { Backoff } from '@weft/providers/backoff';
import type { Disposable } from '../lifecycle.ts';

export class RetryTimer implements Disposable {
  private readonly backoff: Backoff;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** The first retry's ceiling (the engine's `offlineRetryMs`). */
    baseMs: number,
    /** The longest wait (the engine's `offlineRetryCapMs`). */
    capMs: number,
    private readonly fire: () => void,
  ) {
    this.backoff = new Backoff({ baseMs, capMs: Math.max(baseMs, capMs), jitter: 'equal' });
  }

  /** Try again after the policy's next delay, unless a retry is already waiting. */
  schedule(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.fire();
    }, this.backoff.next());
  }

  /** A pass succeeded: the next failure waits the shortest delay again. */
  succeeded(): void {
    this.backoff.reset();
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}
