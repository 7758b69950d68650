/**
 * The wait before a resumable-upload chunk is sent again (Drive's resumable uploads, Graph's
 * upload sessions). These retries happen inside one write, below the retry wrapper, so that
 * a refused chunk does not cost the session; they follow the same rule as the wrapper: a
 * 429 or 5xx answer's Retry-After (delay-seconds or HTTP-date) sets the wait, capped
 * (Graph: "wait the number of seconds specified in the Retry-After header"; Drive: resume
 * with exponential backoff), else exponential backoff.
 */
import { type BackoffPolicy, backoffDelay, parseRetryAfter } from '../backoff.ts';
import { type Sleep, realSleep } from '../wrappers/sleep.ts';

/** What an adapter's options may set about chunk retries. */
export interface ChunkRetryOptions {
  /** Cap on a Retry-After wait between chunk attempts. Default 60 s. */
  readonly maxRetryAfterMs?: number;
  /** Injected for tests. */
  readonly sleep?: Sleep;
}

/** Attempt n without a Retry-After waits 100·2^(n-1) ms, at most 2 s (no jitter: one client, one session). */
const CHUNK_BACKOFF: BackoffPolicy = { baseMs: 100, capMs: 2000, jitter: 'none' };
export const DEFAULT_MAX_RETRY_AFTER_MS = 60_000;

export class ChunkRetry {
  private readonly maxRetryAfterMs: number;
  private readonly sleep: Sleep;

  constructor(options: ChunkRetryOptions = {}) {
    const cap = options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
    if (!(cap >= 0)) throw new RangeError('maxRetryAfterMs must be 0 or more');
    this.maxRetryAfterMs = cap;
    this.sleep = options.sleep ?? realSleep;
  }

  /** The wait before attempt `attempt + 1` after answer `res` (undefined: the connection failed). */
  delayMs(attempt: number, res: Response | undefined): number {
    const throttled = res !== undefined && (res.status === 429 || res.status >= 500);
    const retryAfterMs = throttled ? parseRetryAfter(res.headers.get('retry-after')) : undefined;
    if (retryAfterMs !== undefined) return Math.min(retryAfterMs, this.maxRetryAfterMs);
    return backoffDelay(CHUNK_BACKOFF, attempt);
  }

  /** Wait before the next attempt; an abort cuts the wait short. */
  wait(attempt: number, res: Response | undefined, signal?: AbortSignal): Promise<void> {
    return this.sleep(this.delayMs(attempt, res), signal);
  }
}
