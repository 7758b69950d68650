/**
 * A fault-injecting wrapper for tests: decides per call whether to fail it (before it
 * reaches the inner provider) and can break read streams part-way. No timers involved.
 */
import { TransientError } from '../errors.ts';
import type { Provider, ReadOptions } from '../provider.ts';
import { type CallInfo, ForwardingProvider, type OpName } from '../wrappers/forwarding.ts';

export interface FaultPlan {
  /** Return an error to throw instead of making call number `index` (0-based, all ops). */
  readonly before?: (info: CallInfo, index: number) => Error | undefined;
  /** Break the n-th opened read stream (0-based) after this many bytes, with a TransientError. */
  readonly breakReadAfterBytes?: (readIndex: number) => number | undefined;
}

export class FaultInjectingProvider extends ForwardingProvider {
  /** Every call that reached this wrapper, in order. */
  readonly calls: { op: OpName; path: string; failed: boolean }[] = [];
  private reads = 0;

  constructor(
    inner: Provider,
    private readonly plan: FaultPlan,
  ) {
    super(inner);
  }

  protected async call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    const error = this.plan.before?.(info, this.calls.length);
    this.calls.push({ op: info.op, path: info.path, failed: error !== undefined });
    if (error) throw error;
    return fn();
  }

  protected override async openRead(path: string, options: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    const stream = await this.call({ op: 'read', path, signal: options.signal, retryable: true }, () =>
      this.inner.read(path, options),
    );
    const limit = this.plan.breakReadAfterBytes?.(this.reads++);
    if (limit === undefined) return stream;
    return (async function* () {
      let sent = 0;
      for await (const chunk of stream) {
        if (sent + chunk.byteLength > limit) {
          const keep = limit - sent;
          if (keep > 0) yield chunk.subarray(0, keep);
          throw new TransientError(`injected: connection reset after ${limit} bytes`);
        }
        sent += chunk.byteLength;
        yield chunk;
      }
    })();
  }
}

/** Fail the first `count` calls of the given ops with a TransientError carrying `retryAfterMs`. */
export function failFirst(count: number, ops: readonly OpName[], retryAfterMs?: number): FaultPlan {
  let failed = 0;
  return {
    before(info) {
      if (!ops.includes(info.op) || failed >= count) return undefined;
      failed += 1;
      return new TransientError(`injected transient failure #${failed}`, retryAfterMs);
    },
  };
}
