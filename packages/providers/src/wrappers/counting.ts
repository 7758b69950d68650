/**
 * Counts every call to a backend by billing class, for the cost model (docs/cost.md):
 * 'put' (S3's PUT, COPY, POST and LIST class: write, copy, mkdir, list, change feeds),
 * 'get' (GET and HEAD: read, stat) and 'delete'. A move is a copy and a delete (what S3 bills
 * for it). Bytes are the payload: written for a write, received for a read (as the stream is
 * consumed). A listing counts one request per 1,000 entries (S3's page size), at least one.
 * Placed innermost (below retry), every attempt is counted: a failed request is billed too.
 */
import type { Body, Entry, ListOptions, Provider, ReadOptions, WriteOptions } from '../provider.ts';
import { type CallInfo, ForwardingProvider, type OpName } from './forwarding.ts';

export type RequestClass = 'put' | 'get' | 'delete';

/** Receives the counts; called synchronously on the request path, so it must be cheap. */
export type RequestSink = (kind: RequestClass, requests: number, bytes: number) => void;

const CLASS: Readonly<Record<OpName, RequestClass>> = {
  list: 'put',
  stat: 'get',
  read: 'get',
  write: 'put',
  remove: 'delete',
  mkdir: 'put',
  move: 'put',
  copy: 'put',
  latestCursor: 'put',
  changes: 'put',
};

/** Entries per LIST request. */
export const LIST_PAGE = 1000;

export class CountingProvider extends ForwardingProvider {
  constructor(
    inner: Provider,
    private readonly sink: RequestSink,
  ) {
    super(inner);
  }

  protected call<T>(info: CallInfo, fn: () => Promise<T>): Promise<T> {
    this.sink(CLASS[info.op], 1, 0);
    if (info.op === 'move') this.sink('delete', 1, 0);
    return fn();
  }

  override write(path: string, body: Body, options?: WriteOptions): Promise<Entry> {
    const size = options?.size ?? (body instanceof Uint8Array ? body.byteLength : undefined);
    if (size !== undefined) return super.write(path, body, options).finally(() => this.sink('put', 0, size));
    // A stream of unknown length: count its bytes as the backend reads them.
    return super.write(path, this.countedBody(body), options);
  }

  private countedBody(body: Body): Body {
    if (body instanceof Uint8Array) return body;
    const open = typeof body === 'function' ? body : () => body;
    const count = (n: number): void => this.sink('put', 0, n);
    const counted = async function* (): AsyncIterable<Uint8Array> {
      for await (const chunk of open()) {
        count(chunk.byteLength);
        yield chunk;
      }
    };
    return typeof body === 'function' ? counted : counted();
  }

  protected override async openRead(path: string, options: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    const stream = await super.openRead(path, options);
    const count = (n: number): void => this.sink('get', 0, n);
    return (async function* () {
      for await (const chunk of stream) {
        count(chunk.byteLength);
        yield chunk;
      }
    })();
  }

  override list(dir: string, options?: ListOptions): AsyncIterable<Entry> {
    const entries = super.list(dir, options);
    const count = (): void => this.sink('put', 1, 0);
    return (async function* () {
      let n = 0;
      for await (const e of entries) {
        if (++n > LIST_PAGE && n % LIST_PAGE === 1) count();
        yield e;
      }
    })();
  }
}

export function withCounting(p: Provider, sink: RequestSink): Provider {
  return new CountingProvider(p, sink);
}
