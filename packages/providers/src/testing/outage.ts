/**
 * A backend with a switchable sustained outage, for tests of the redundant tier: while
 * `down`, every call is refused (TransientError) and streams already open break at their
 * next chunk, until `restore()`; while `stalled`, read streams deliver nothing until
 * restored or aborted (a slow backend, for hedged reads). No timers.
 */
import { abortError, TransientError } from '../errors.ts';
import type { Provider, ReadOptions } from '../provider.ts';
import { type CallInfo, ForwardingProvider } from '../wrappers/forwarding.ts';

export class OutageProvider extends ForwardingProvider {
  private mode: 'up' | 'down' | 'stalled' = 'up';
  private readonly waiting = new Set<() => void>();
  /** Calls refused while down. */
  refused = 0;

  constructor(inner: Provider) {
    super(inner);
  }

  /** Refuse everything until restore(). */
  goDown(): void {
    this.mode = 'down';
    this.wake();
  }

  /** Reads hang (no bytes) until restore() or their signal aborts. */
  stall(): void {
    this.mode = 'stalled';
  }

  restore(): void {
    this.mode = 'up';
    this.wake();
  }

  get state(): 'up' | 'down' | 'stalled' {
    return this.mode;
  }

  private wake(): void {
    for (const w of [...this.waiting]) w();
  }

  private refuse(what: string): TransientError {
    this.refused += 1;
    return new TransientError(`${this.name}: outage (${what} refused)`);
  }

  protected async call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    if (this.mode === 'down') throw this.refuse(info.op);
    return fn();
  }

  protected override async openRead(path: string, options: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    if (this.mode === 'down') throw this.refuse('read');
    return this.watch(await this.inner.read(path, options), options.signal);
  }

  private async *watch(stream: AsyncIterable<Uint8Array>, signal?: AbortSignal): AsyncIterable<Uint8Array> {
    for await (const chunk of stream) {
      while (this.mode === 'stalled') await this.pause(signal);
      if (this.mode === 'down') throw this.refuse('read stream');
      yield chunk;
    }
  }

  private pause(signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      const done = (): void => {
        this.waiting.delete(done);
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = (): void => {
        this.waiting.delete(done);
        reject(abortError(signal!));
      };
      if (signal?.aborted) return reject(abortError(signal));
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.add(done);
    });
  }
}
