/**
 * The one place where the wrappers are composed:
 *   retry( pacer( concurrency( logging( provider ) ) ) )
 * Each retry attempt is paced and counted against the concurrency limit; each attempt is logged.
 */
import type { Provider } from '../provider.ts';
import { withConcurrency } from './concurrency.ts';
import { type ProviderLogger, withLogging } from './logging.ts';
import { type PacerOptions, withPacer } from './pacer.ts';
import { type RetryOptions, withRetry } from './retry.ts';

export interface WrapConfig {
  readonly retry?: RetryOptions;
  readonly pacer?: PacerOptions;
  /** Calls in flight at most. */
  readonly concurrency?: number;
  readonly logger?: ProviderLogger;
}

/**
 * Per-provider defaults, from each backend's documented limits (see docs/providers/*.md).
 * Callers may override any field.
 */
export const WRAP_DEFAULTS: Readonly<Record<string, WrapConfig>> = {
  memory: { retry: { maxAttempts: 3 } },
  fs: { retry: { maxAttempts: 3 }, concurrency: 64 },
  // S3 scales to thousands of requests per second per prefix; the SDK's own retries are off.
  s3: { retry: { maxAttempts: 6 }, concurrency: 32 },
  // Dropbox publishes no fixed rate; it answers 429 with Retry-After (honoured by retry and
  // pacer) and serialises writes per namespace. rclone paces at ~100 calls/s; we stay below.
  dropbox: { retry: { maxAttempts: 8 }, pacer: { requestsPerSecond: 50, burst: 50 }, concurrency: 16 },
  // Drive: 12,000 queries per minute per user (200/s) per project quota; sustained writes
  // of a few per second per user; 403 userRateLimitExceeded / 429 rateLimitExceeded.
  gdrive: { retry: { maxAttempts: 8 }, pacer: { requestsPerSecond: 10, burst: 100 }, concurrency: 8 },
  // Graph throttling is dynamic (429/503 with Retry-After); rclone paces OneDrive at ~100/s.
  onedrive: { retry: { maxAttempts: 8 }, pacer: { requestsPerSecond: 20, burst: 40 }, concurrency: 8 },
};

export function wrapProvider(p: Provider, config: WrapConfig = {}): Provider {
  let wrapped = p;
  if (config.logger) wrapped = withLogging(wrapped, config.logger);
  if (config.concurrency !== undefined) wrapped = withConcurrency(wrapped, config.concurrency);
  if (config.pacer) wrapped = withPacer(wrapped, config.pacer);
  return withRetry(wrapped, config.retry);
}
