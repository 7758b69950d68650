/**
 * Retry with exponential backoff and full jitter; a Retry-After from the backend
 * (TransientError.retryAfterMs) replaces the computed delay. Only TransientError is
 * retried, only while the call can be repeated, and never past the AbortSignal.
 * A read stream that breaks mid-way is reopened at the byte where it stopped.
 */
import { type BackoffPolicy, backoffDelay } from '../backoff.ts';
import { NotFoundError, isTransient } from '../errors.ts';
import type { Provider, ReadOptions } from '../provider.ts';
import { type CallInfo, ForwardingProvider } from './forwarding.ts';
import { type Sleep, realSleep } from './sleep.ts';

export interface RetryOptions {
  /** Attempts in all, including the first. Default 5. */
  readonly maxAttempts?: number;
  /** Backoff base: attempt n waits up to base·2^(n-1). Default 200 ms. */
  readonly baseDelayMs?: number;
  /** Cap on one computed delay (and on a Retry-After). Default 30 s. */
  readonly maxDelayMs?: number;
  /** Injected for tests. */
  readonly sleep?: Sleep;
  /** Uniform [0,1), injected for tests. */
  readonly random?: () => number;
  /** Observes each retry (for logs and tests). */
  readonly onRetry?: (info: {
    op: string;
    path: string;
    attempt: number;
    delayMs: number;
    error: Error;
  }) => void;
}

export class RetryingProvider extends ForwardingProvider {
  private readonly maxAttempts: number;
  private readonly policy: BackoffPolicy;
  private readonly sleep: Sleep;
  private readonly random: () => number;

  constructor(
    inner: Provider,
    private readonly options: RetryOptions = {},
  ) {
    super(inner);
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 5);
    this.policy = { baseMs: options.baseDelayMs ?? 200, capMs: options.maxDelayMs ?? 30_000, jitter: 'full' };
    this.sleep = options.sleep ?? realSleep;
    this.random = options.random ?? Math.random;
  }

  /** The wait before retry number `attempt` (1-based) after `error`. */
  delayFor(attempt: number, error: unknown): number {
    const retryAfterMs = isTransient(error) ? error.retryAfterMs : undefined;
    return backoffDelay(this.policy, attempt, { retryAfterMs, random: this.random });
  }

  protected async call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (error) {
        // A remove whose earlier attempt reached the server before failing finds nothing now: done.
        if (info.op === 'remove' && attempt > 1 && error instanceof NotFoundError) return undefined as T;
        if (!isTransient(error) || !info.retryable || attempt >= this.maxAttempts) throw error;
        const delayMs = this.delayFor(attempt, error);
        this.options.onRetry?.({ op: info.op, path: info.path, attempt, delayMs, error });
        await this.sleep(delayMs, info.signal);
      }
    }
  }

  protected override async openRead(path: string, options: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    const info: CallInfo = { op: 'read', path, signal: options.signal, retryable: true };
    const first = await this.call(info, () => this.inner.read(path, options));
    return this.resumingStream(first, path, options, info);
  }

  /** Pass a read stream through; when it breaks with a TransientError, reopen it where it stopped. */
  private async *resumingStream(
    first: AsyncIterable<Uint8Array>,
    path: string,
    options: ReadOptions,
    info: CallInfo,
  ): AsyncIterable<Uint8Array> {
    const start = options.offset ?? 0;
    let stream = first;
    let delivered = 0;
    let failures = 0;
    for (;;) {
      try {
        for await (const chunk of stream) {
          delivered += chunk.byteLength;
          yield chunk;
        }
        return;
      } catch (error) {
        failures += 1;
        if (!isTransient(error) || failures >= this.maxAttempts) throw error;
        const delayMs = this.delayFor(failures, error);
        this.options.onRetry?.({ op: 'read', path, attempt: failures, delayMs, error });
        await this.sleep(delayMs, options.signal);
        const length = options.length === undefined ? undefined : options.length - delivered;
        stream = await this.call(info, () =>
          this.inner.read(path, { ...options, offset: start + delivered, length }),
        );
      }
    }
  }
}

export function withRetry(p: Provider, options?: RetryOptions): Provider {
  return new RetryingProvider(p, options);
}
