/**
 * Pacing: a token bucket (requests per second with a burst) shared by every call of one
 * provider, plus a pause for everyone when the backend sends Retry-After — one throttled
 * call slows the whole account down, as the providers ask (rclone's pacer does the same).
 */
import { isTransient } from '../errors.ts';
import type { Provider } from '../provider.ts';
import { type CallInfo, ForwardingProvider } from './forwarding.ts';
import { type Sleep, realSleep } from './sleep.ts';

export interface PacerOptions {
  /** Sustained requests per second. */
  readonly requestsPerSecond: number;
  /** Requests allowed at once after an idle spell. Default 1. */
  readonly burst?: number;
  readonly sleep?: Sleep;
  readonly now?: () => number;
}

export class TokenBucket {
  private tokens: number;
  private last: number;
  private pausedUntil = 0;
  private readonly rate: number;
  private readonly burst: number;
  private readonly sleep: Sleep;
  private readonly now: () => number;

  constructor(options: PacerOptions) {
    if (!(options.requestsPerSecond > 0)) throw new RangeError('requestsPerSecond must be > 0');
    this.rate = options.requestsPerSecond / 1000;
    this.burst = Math.max(1, options.burst ?? 1);
    this.tokens = this.burst;
    this.sleep = options.sleep ?? realSleep;
    this.now = options.now ?? Date.now;
    this.last = this.now();
  }

  /** Wait for a token (and for any pause to end). */
  async take(signal?: AbortSignal): Promise<void> {
    for (;;) {
      const now = this.now();
      if (now < this.pausedUntil) {
        await this.sleep(this.pausedUntil - now, signal);
        continue;
      }
      this.tokens = Math.min(this.burst, this.tokens + (now - this.last) * this.rate);
      this.last = now;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      await this.sleep(Math.ceil((1 - this.tokens) / this.rate), signal);
    }
  }

  /** Hold every caller back for `ms`. */
  pause(ms: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, this.now() + ms);
  }
}

export class PacedProvider extends ForwardingProvider {
  readonly bucket: TokenBucket;
  constructor(inner: Provider, options: PacerOptions) {
    super(inner);
    this.bucket = new TokenBucket(options);
  }

  protected async call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    await this.bucket.take(info.signal);
    try {
      return await fn();
    } catch (error) {
      if (isTransient(error) && error.retryAfterMs !== undefined) this.bucket.pause(error.retryAfterMs);
      throw error;
    }
  }
}

export function withPacer(p: Provider, options: PacerOptions): Provider {
  return new PacedProvider(p, options);
}
