/**
 * S3 failures in the contract's terms: the HTTP status and the S3 error code decide the
 * contract error (a 412 is PreconditionFailed here; a write under If-None-Match turns it into
 * AlreadyExists), and Retry-After rides along on TransientError.
 */
import {
  AuthError,
  InvalidArgumentError,
  NotFoundError,
  PreconditionFailedError,
  ProviderError,
  QuotaExceededError,
  TransientError,
} from '../../errors.ts';

/** GetObject with a range starting past the end (416). */
export class InvalidRangeError extends ProviderError {
  readonly code = 'InvalidArgument' as const;
}

interface S3ErrorShape {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number };
  $response?: { headers?: Record<string, string | undefined> };
}

/** Map an SDK or network error to the contract's errors. */
export function classifyS3(e: unknown, name: string, p: string): Error {
  if (e instanceof ProviderError) return e;
  const err = (e ?? {}) as S3ErrorShape;
  const status = err.$metadata?.httpStatusCode;
  const code = err.name ?? err.code ?? '';
  const msg = `${name}: ${p}: ${code} ${err.message ?? ''}`.trim();
  if (code === 'AbortError') return e as Error;
  if (status === 404 || code === 'NoSuchKey' || code === 'NotFound' || code === 'NoSuchBucket') {
    return new NotFoundError(msg, { cause: e });
  }
  if (status === 412 || code === 'PreconditionFailed')
    return new PreconditionFailedError(msg, undefined, { cause: e });
  if (status === 416 || code === 'InvalidRange') return new InvalidRangeError(msg, { cause: e });
  if (
    status === 401 ||
    status === 403 ||
    ['AccessDenied', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'ExpiredToken'].includes(code)
  ) {
    return new AuthError(msg, { cause: e });
  }
  if (code === 'EntityTooLarge' || code === 'QuotaExceeded' || status === 507) {
    return new QuotaExceededError(msg, { cause: e });
  }
  if (status === 409 && code === 'ConditionalRequestConflict')
    return new TransientError(msg, undefined, { cause: e });
  if (status === 429 || status === 503 || code === 'SlowDown' || (status !== undefined && status >= 500)) {
    return new TransientError(msg, retryAfter(err.$response?.headers?.['retry-after']), { cause: e });
  }
  if (status === undefined) return new TransientError(msg, undefined, { cause: e }); // network-level failure
  return new InvalidArgumentError(msg, { cause: e });
}

function retryAfter(header: string | undefined): number | undefined {
  if (!header) return undefined;
  const secs = Number(header);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
