/** At most N calls of one provider in flight; the rest wait their turn (FIFO). */
import { abortError } from '../errors.ts';
import type { Provider } from '../provider.ts';
import { type CallInfo, ForwardingProvider } from './forwarding.ts';

export class Semaphore {
  private active = 0;
  private readonly waiting: { resolve: () => void; reject: (e: Error) => void; signal?: AbortSignal }[] = [];
  constructor(readonly limit: number) {
    if (!(limit >= 1)) throw new RangeError('concurrency limit must be >= 1');
  }

  get inFlight(): number {
    return this.active;
  }

  async acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw abortError(signal);
    if (this.active < this.limit) {
      this.active += 1;
      return;
    }
    await new Promise<void>((resolve, reject) => {
      const waiter = { resolve, reject, signal };
      this.waiting.push(waiter);
      signal?.addEventListener(
        'abort',
        () => {
          const i = this.waiting.indexOf(waiter);
          if (i >= 0) {
            this.waiting.splice(i, 1);
            reject(abortError(signal));
          }
        },
        { once: true },
      );
    });
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next.resolve();
    else this.active -= 1;
  }

  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.acquire(signal);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }
}

export class ConcurrencyLimitedProvider extends ForwardingProvider {
  readonly semaphore: Semaphore;
  constructor(inner: Provider, limit: number) {
    super(inner);
    this.semaphore = new Semaphore(limit);
  }

  protected call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    return this.semaphore.run(fn, info.signal);
  }
}

export function withConcurrency(p: Provider, limit: number): Provider {
  return new ConcurrencyLimitedProvider(p, limit);
}
