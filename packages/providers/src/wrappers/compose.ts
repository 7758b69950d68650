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
};

export function wrapProvider(p: Provider, config: WrapConfig = {}): Provider {
  let wrapped = p;
  if (config.logger) wrapped = withLogging(wrapped, config.logger);
  if (config.concurrency !== undefined) wrapped = withConcurrency(wrapped, config.concurrency);
  if (config.pacer) wrapped = withPacer(wrapped, config.pacer);
  return withRetry(wrapped, config.retry);
}
