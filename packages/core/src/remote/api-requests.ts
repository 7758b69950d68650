/**
 * How one proxy API request is sent (proxy-client.ts builds the calls on it): the device
 * token, the upload limit, waiting as asked when the server pushes back (503 SLOW_DOWN or
 * 429 with Retry-After), and — with several instances (server-pool.ts) — moving on to the
 * next instance when one cannot be reached or keeps answering 502/503/504. The pool decides
 * where requests go; this module only reports what happened and asks it.
 */
import { type BackoffPolicy, backoffDelay, parseRetryAfter } from '@weft/providers/backoff';
import { API_PREFIX } from '@weft/wire';
import { OfflineError, connectionDropped, safeFetch } from './http-errors.ts';
import type { ByteRateLimiter } from './rate-limit.ts';
import type { ServerPool } from './server-pool.ts';

/** How often one request is re-sent after SLOW_DOWN before the error surfaces. */
const MAX_BUSY_RETRIES = 40;
/** Waits between busy retries when the server names none (Retry-After wins, capped at 30 s). */
const BUSY_BACKOFF: BackoffPolicy = { baseMs: 200, capMs: 30_000, jitter: 'equal' };

/** Wait before sending a request again to an instance that answered 502/503/504 once. */
const UNAVAILABLE_RETRY_MS = 250;

export type Query = Record<string, string | number | undefined>;

export interface ApiRequest {
  query?: Query;
  json?: unknown;
  body?: Uint8Array;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Send to this instance only: no moving on when it fails (the caller falls back). */
  at?: string;
}

export interface ApiRequestsOptions {
  /** The server when there is no pool. */
  readonly baseUrl: string;
  readonly token: string;
  readonly servers?: ServerPool;
  /** The upload limit in force, read at each request (the settings screen changes it). */
  readonly upLimit: () => ByteRateLimiter | undefined;
  readonly onRequest?: (info: { method: string; route: string; bytesOut: number; bytesIn: number }) => void;
}

/** `route` under the API prefix at `base`, with the defined query values. */
export function apiUrl(base: string, route: string, query?: Query): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) q.set(k, String(v));
  const qs = q.toString();
  return `${base}${API_PREFIX}${route}${qs ? `?${qs}` : ''}`;
}

/**
 * A request body for fetch. Bytes go as a one-chunk stream of themselves with their length
 * stated: fetch copies a Uint8Array body into a fresh buffer (undici's extractBody; an async
 * iterable's chunks are copied too), and at 100,000 files those 4 MiB copies of the bundles
 * piled up as dead native memory between collections — the agent's RSS spike at the start of
 * an upload (issue #16). A stream is read once: each attempt gets its own, over the same bytes.
 */
export function requestBody(
  body: string | Uint8Array | undefined,
): Pick<RequestInit, 'body'> & { duplex?: 'half' } {
  if (body === undefined || typeof body === 'string') return { body };
  const chunk = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  return {
    body: new ReadableStream<Uint8Array>({
      start(c) {
        if (chunk.byteLength > 0) c.enqueue(chunk);
        c.close();
      },
    }),
    duplex: 'half',
  };
}

export class ApiRequests {
  private readonly fixedUrl: string;
  readonly servers: ServerPool | undefined;
  requests = 0;
  /** Times the server asked us to slow down and we waited. */
  busyWaits = 0;
  bytesSent = 0;
  /** Requests waiting for an answer, by instance: abandoned when it is found down. */
  private readonly waiting = new Map<string, Set<AbortController>>();

  constructor(private readonly options: ApiRequestsOptions) {
    this.fixedUrl = options.baseUrl.replace(/\/+$/, '');
    this.servers = options.servers;
    // A hung instance answers nothing, not even a refusal: when the pool finds it down (a
    // probe timed out, or another request failed), the requests still waiting on it are
    // abandoned with OfflineError and sent again to the instance the pool moved to.
    this.servers?.onDown((url) => {
      for (const c of this.waiting.get(url) ?? []) c.abort(new OfflineError(`${url} stopped answering`));
    });
  }

  /** The instance requests go to now (the pool's current one, else the configured URL). */
  get baseUrl(): string {
    return this.servers?.current ?? this.fixedUrl;
  }

  get token(): string {
    return this.options.token;
  }

  async send(method: string, route: string, options: ApiRequest = {}): Promise<Response> {
    const body = options.json !== undefined ? JSON.stringify(options.json) : options.body;
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.options.token}`,
      ...options.headers,
    };
    const upLimit = this.options.upLimit();
    if (upLimit && body !== undefined) {
      await upLimit.take(
        typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength,
        options.signal,
      );
    }
    if (options.json !== undefined) headers['content-type'] = 'application/json';
    else if (options.body !== undefined) {
      headers['content-type'] = 'application/octet-stream';
      // Sent as a stream (requestBody): with its length stated, not chunked.
      headers['content-length'] = String(options.body.byteLength);
    }
    // The server pushes back with 503 SLOW_DOWN (or 429) and Retry-After when its queue is
    // deep: wait as asked and send the same request again; our operations stay queued meanwhile.
    // With several instances (options.servers), one that cannot be reached or keeps answering
    // 502/503/504 is left for the next and the request is sent there: writes are safe to
    // repeat (a put of the content already there is answered applied, unchanged; a delete of
    // what is gone likewise), and the feed cursor is the caller's, so nothing is skipped.
    let res: Response;
    let base = options.at ?? this.baseUrl;
    let hops = 0;
    let unavailableRetried = false;
    const pool = options.at === undefined ? this.servers : undefined;
    const moveOn = (kind: 'unreachable' | 'unavailable'): boolean => {
      const next = pool?.failed(base, kind);
      if (!next?.moved || hops >= pool!.view().length) return false;
      hops += 1;
      base = next.current;
      unavailableRetried = false;
      return true;
    };
    for (let attempt = 1; ; attempt++) {
      // Registered for a pinned request too, so that an instance found down abandons it.
      const leave = this.servers ? new AbortController() : undefined;
      const target = base;
      try {
        if (leave) {
          const set = this.waiting.get(target) ?? new Set();
          set.add(leave);
          this.waiting.set(target, set);
        }
        const signal =
          leave && options.signal
            ? AbortSignal.any([options.signal, leave.signal])
            : (leave?.signal ?? options.signal);
        res = await safeFetch(apiUrl(target, route, options.query), {
          method,
          headers,
          ...requestBody(body),
          signal,
        });
      } catch (e) {
        if (leave) this.forget(target, leave);
        // A kept-alive connection the server closed just as we sent on it (its idle timer
        // and ours race) dies before any answer: send once more on a fresh connection.
        // Writes are safe to repeat: the server answers a repeated one as already applied.
        if (attempt === 1 && e instanceof OfflineError && connectionDropped(e)) continue;
        if (e instanceof OfflineError && moveOn('unreachable')) continue;
        // A pinned instance that cannot be reached is down for the pool too: no steering to it.
        if (e instanceof OfflineError && options.at !== undefined)
          this.servers?.failed(target, 'unreachable');
        throw e;
      }
      if (leave) this.forget(target, leave);
      const busy = res.status === 503 || res.status === 429;
      const text = busy ? await res.text().catch(() => '') : '';
      const unavailable =
        res.status === 502 || res.status === 504 || (res.status === 503 && !text.includes('SLOW_DOWN'));
      if (pool && unavailable) {
        const moved = moveOn('unavailable');
        // Once is not yet down: ask the same instance again before giving up on it.
        const again = !moved && !unavailableRetried && pool.current === base;
        if (moved || again) {
          if (!busy) await res.body?.cancel().catch(() => undefined);
          if (again) {
            unavailableRetried = true;
            await new Promise((r) => setTimeout(r, UNAVAILABLE_RETRY_MS));
          }
          continue;
        }
      } else pool?.answered(base);
      if (!busy || attempt >= MAX_BUSY_RETRIES || unavailable) {
        if (busy) res = new Response(text, { status: res.status, headers: res.headers });
        break;
      }
      this.busyWaits += 1;
      const waitMs = backoffDelay(BUSY_BACKOFF, attempt, {
        retryAfterMs: parseRetryAfter(res.headers.get('retry-after')),
      });
      await new Promise((r) => setTimeout(r, waitMs));
    }
    this.requests += 1;
    const out = typeof body === 'string' ? Buffer.byteLength(body) : (body?.byteLength ?? 0);
    this.bytesSent += out;
    const len = Number(res.headers.get('content-length') ?? 0);
    this.options.onRequest?.({ method, route, bytesOut: out, bytesIn: len });
    return res;
  }

  private forget(url: string, c: AbortController): void {
    const set = this.waiting.get(url);
    set?.delete(c);
    if (set?.size === 0) this.waiting.delete(url);
  }
}
