/**
 * Base for provider wrappers: forwards every call to the inner provider through one
 * hook, `call`, so retry, pacing, concurrency, logging and fault injection each write
 * their policy once. Optional methods exist on the wrapper only when the inner has them.
 */
import { isReplayable } from '../body.ts';
import type { Features } from '../features.ts';
import type {
  Body,
  ChangePage,
  Entry,
  ListOptions,
  Provider,
  ReadOptions,
  RemoveOptions,
  TransferOptions,
  WriteOptions,
} from '../provider.ts';

export type OpName =
  'list' | 'stat' | 'read' | 'write' | 'remove' | 'mkdir' | 'move' | 'copy' | 'latestCursor' | 'changes';

export interface CallInfo {
  readonly op: OpName;
  readonly path: string;
  readonly signal: AbortSignal | undefined;
  /** Whether running `fn` again after a failure is allowed (a consumed stream body is not). */
  readonly retryable: boolean;
}

export abstract class ForwardingProvider implements Provider {
  readonly name: string;
  readonly features: Features;
  move?: Provider['move'];
  copy?: Provider['copy'];
  latestCursor?: Provider['latestCursor'];
  changes?: Provider['changes'];

  constructor(protected readonly inner: Provider) {
    this.name = inner.name;
    this.features = inner.features;
    const move = inner.move?.bind(inner);
    if (move) {
      this.move = (from: string, to: string, o?: TransferOptions): Promise<Entry> =>
        this.call(info('move', `${from} -> ${to}`, o?.signal), () => move(from, to, o));
    }
    const copy = inner.copy?.bind(inner);
    if (copy) {
      this.copy = (from: string, to: string, o?: TransferOptions): Promise<Entry> =>
        this.call(info('copy', `${from} -> ${to}`, o?.signal), () => copy(from, to, o));
    }
    const latest = inner.latestCursor?.bind(inner);
    if (latest) {
      this.latestCursor = (o?: { signal?: AbortSignal }): Promise<string> =>
        this.call(info('latestCursor', '', o?.signal), () => latest(o));
    }
    const changes = inner.changes?.bind(inner);
    if (changes) {
      this.changes = (cursor: string, o?: { signal?: AbortSignal; limit?: number }): Promise<ChangePage> =>
        this.call(info('changes', '', o?.signal), () => changes(cursor, o));
    }
  }

  /** Run one provider call under this wrapper's policy. */
  protected abstract call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T>;

  /**
   * Open a read stream under the policy. Wrappers that can resume a broken stream
   * override this; the default applies `call` to opening the stream only.
   */
  protected openRead(path: string, options: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    return this.call(info('read', path, options.signal), () => this.inner.read(path, options));
  }

  list(dir: string, options?: ListOptions): AsyncIterable<Entry> {
    return this.listUnderPolicy(dir, options);
  }

  /**
   * Listing is retried as a whole only until its first entry is delivered. Each attempt
   * starts a new listing: an async iterator that threw is finished, and asking it again
   * would answer "done" — an empty folder instead of an error.
   */
  private async *listUnderPolicy(dir: string, options?: ListOptions): AsyncIterable<Entry> {
    let it: AsyncIterator<Entry> | undefined;
    const first = await this.call(info('list', dir, options?.signal), () => {
      it = this.inner.list(dir, options)[Symbol.asyncIterator]();
      return it.next();
    });
    if (!it) return;
    if (first.done) return;
    yield first.value;
    for (;;) {
      const next = await it.next();
      if (next.done) return;
      yield next.value;
    }
  }

  stat(path: string, options?: { signal?: AbortSignal }): Promise<Entry> {
    return this.call(info('stat', path, options?.signal), () => this.inner.stat(path, options));
  }

  read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    return this.openRead(path, options);
  }

  write(path: string, body: Body, options?: WriteOptions): Promise<Entry> {
    return this.call({ op: 'write', path, signal: options?.signal, retryable: isReplayable(body) }, () =>
      this.inner.write(path, body, options),
    );
  }

  remove(path: string, options?: RemoveOptions): Promise<void> {
    return this.call(info('remove', path, options?.signal), () => this.inner.remove(path, options));
  }

  mkdir(path: string, options?: { signal?: AbortSignal }): Promise<void> {
    return this.call(info('mkdir', path, options?.signal), () => this.inner.mkdir(path, options));
  }

  async close(): Promise<void> {
    await this.inner.close?.();
  }
}

function info(op: OpName, path: string, signal: AbortSignal | undefined): CallInfo {
  return { op, path, signal, retryable: true };
}
