/**
 * The fixed set of errors a provider may throw. Providers only classify what
 * their backend said into one of these; retrying, pacing and logging happen in
 * the wrappers (see wrappers/compose.ts). Anything else escaping a provider is a
 * bug in that provider.
 */
export type ProviderErrorCode =
  | 'NotFound'
  | 'AlreadyExists'
  | 'PreconditionFailed'
  | 'QuotaExceeded'
  | 'Auth'
  | 'InvalidPath'
  | 'Transient'
  | 'InvalidArgument'
  | 'NotSupported';

export abstract class ProviderError extends Error {
  abstract readonly code: ProviderErrorCode;
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The path (or one of its parents) does not exist. */
export class NotFoundError extends ProviderError {
  readonly code = 'NotFound' as const;
}

/** A must-not-exist write or a create found something at the path (or a file where a folder is needed). */
export class AlreadyExistsError extends ProviderError {
  readonly code = 'AlreadyExists' as const;
}

/** A conditional operation lost: the current revision is not the one the caller named. */
export class PreconditionFailedError extends ProviderError {
  readonly code = 'PreconditionFailed' as const;
  constructor(
    message: string,
    /** The revision now stored, when the backend told us. */
    readonly currentRevision?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The account or the volume is out of space. */
export class QuotaExceededError extends ProviderError {
  readonly code = 'QuotaExceeded' as const;
}

/** Credentials missing, expired or refused. Not retried. */
export class AuthError extends ProviderError {
  readonly code = 'Auth' as const;
}

/** The path breaks the path rules (see paths.ts). Nothing was touched. */
export class InvalidPathError extends ProviderError {
  readonly code = 'InvalidPath' as const;
  constructor(
    message: string,
    readonly path: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Worth retrying: network failure, 5xx, throttling. `retryAfterMs` comes from Retry-After when present. */
export class TransientError extends ProviderError {
  readonly code = 'Transient' as const;
  constructor(
    message: string,
    readonly retryAfterMs?: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The request itself is wrong (e.g. a body shorter or longer than its declared size). Not retried. */
export class InvalidArgumentError extends ProviderError {
  readonly code = 'InvalidArgument' as const;
}

/** The operation is not among the provider's declared features. A programming error, never retried. */
export class NotSupportedError extends ProviderError {
  readonly code = 'NotSupported' as const;
}

export function isProviderError(e: unknown): e is ProviderError {
  return e instanceof ProviderError;
}

export function isTransient(e: unknown): e is TransientError {
  return e instanceof TransientError;
}

/** The standard error thrown when an AbortSignal fires. */
export function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  const err = new Error('The operation was aborted');
  err.name = 'AbortError';
  return err;
}
