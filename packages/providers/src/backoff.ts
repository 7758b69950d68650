/**
 * Weft's one retry-delay policy: exponential backoff with jitter and a cap; a Retry-After
 * from the other side replaces the computed delay (capped as well). The provider retry
 * wrapper, the proxy client's busy retry, the client engine's offline retry, the mirror's
 * replica probe and the inter-proxy reconnect all take their delays from here, so "how long
 * do we wait" has one answer and one test.
 *
 * Jitter: `full` (uniform in [0, ceiling), AWS's "full jitter": best at spreading a crowd of
 * clients that failed together) or `equal` (uniform in [ceiling/2, ceiling): never retries at
 * once, for loops that must not spin) or `none` (the ceiling: deterministic, for tests).
 */
export interface BackoffPolicy {
  /** Ceiling of the first delay; attempt n's ceiling is base·2^(n-1). */
  readonly baseMs: number;
  /** Cap on any delay, a Retry-After included. */
  readonly capMs: number;
  readonly jitter?: 'full' | 'equal' | 'none';
}

/** The delay before retry number `attempt` (1-based). `random` is uniform in [0, 1). */
export function backoffDelay(
  policy: BackoffPolicy,
  attempt: number,
  options: { readonly retryAfterMs?: number; readonly random?: () => number } = {},
): number {
  if (!(policy.baseMs >= 0) || !(policy.capMs >= 0)) throw new RangeError('backoff: negative base or cap');
  const { retryAfterMs } = options;
  if (retryAfterMs !== undefined && Number.isFinite(retryAfterMs) && retryAfterMs >= 0)
    return Math.min(Math.ceil(retryAfterMs), policy.capMs);
  const n = Math.max(1, Math.floor(attempt));
  // 2^(n-1) overflows to Infinity long after the cap is reached; min() keeps it finite.
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** Math.min(n - 1, 60));
  const random = options.random ?? Math.random;
  switch (policy.jitter ?? 'full') {
    case 'none':
      return ceiling;
    case 'equal':
      return Math.floor(ceiling / 2 + random() * (ceiling / 2));
    case 'full':
      return Math.floor(random() * ceiling);
  }
}

/** A failure counter with the policy: `next()` after each failure, `reset()` after a success. */
export class Backoff {
  private count = 0;

  constructor(
    readonly policy: BackoffPolicy,
    private readonly random: () => number = Math.random,
  ) {}

  /** Failures since the last reset. */
  get failures(): number {
    return this.count;
  }

  /** Count one more failure and return the wait before the next try. */
  next(retryAfterMs?: number): number {
    this.count += 1;
    return backoffDelay(this.policy, this.count, { retryAfterMs, random: this.random });
  }

  reset(): void {
    this.count = 0;
  }
}

/**
 * An HTTP `Retry-After` value in milliseconds: delay-seconds or an HTTP-date (RFC 9110
 * §10.2.3). Undefined when absent or unreadable; a date in the past is 0.
 */
export function parseRetryAfter(
  value: string | null | undefined,
  nowMs: number = Date.now(),
): number | undefined {
  if (value === null || value === undefined) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  if (!/[a-z]/i.test(v)) return undefined; // "-1", "1.5": not a delay-seconds, not a date
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, at - nowMs) : undefined;
}
