/**
 * Graph failures in the contract's terms: the HTTP status and Graph's error code decide the
 * contract error; Retry-After rides along on TransientError.
 */
import { GraphError } from '@microsoft/microsoft-graph-client';
import { parseRetryAfter } from '../../backoff.ts';
import {
  AlreadyExistsError,
  AuthError,
  InvalidArgumentError,
  NotFoundError,
  PreconditionFailedError,
  ProviderError,
  QuotaExceededError,
  TransientError,
} from '../../errors.ts';

export function graphStatus(e: unknown): { status?: number; code?: string; retryAfterMs?: number } {
  if (e instanceof GraphError) {
    const ra = e.headers?.get('retry-after');
    return {
      status: e.statusCode,
      code: e.code ?? undefined,
      retryAfterMs: parseRetryAfter(ra),
    };
  }
  return {};
}

/** Map a Graph failure to the contract's errors. */
export function classifyGraph(e: unknown, where: string): Error {
  if (e instanceof ProviderError) return e;
  if (e instanceof Error && e.name === 'AbortError') return e;
  const { status, code, retryAfterMs } = graphStatus(e);
  const msg = `${where}: Graph ${status ?? ''} ${code ?? ''} ${e instanceof Error ? e.message : String(e)}`;
  if (status === undefined || status === -1) return new TransientError(msg, undefined, { cause: e });
  if (status === 404) return new NotFoundError(msg, { cause: e });
  if (status === 409 || code === 'nameAlreadyExists') return new AlreadyExistsError(msg, { cause: e });
  if (status === 412) return new PreconditionFailedError(msg, undefined, { cause: e });
  if (status === 401 || status === 403) return new AuthError(msg, { cause: e });
  if (status === 507 || code === 'quotaLimitReached') return new QuotaExceededError(msg, { cause: e });
  if (status === 429 || status >= 500) return new TransientError(msg, retryAfterMs, { cause: e });
  return new InvalidArgumentError(msg, { cause: e });
}
