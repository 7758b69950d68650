/** Drive's failures mapped to the contract's errors (rclone: backend/drive shouldRetry). */
import type { Readable } from 'node:stream';
import { parseRetryAfter } from '../../backoff.ts';
import {
  AuthError,
  InvalidArgumentError,
  NotFoundError,
  PreconditionFailedError,
  ProviderError,
  QuotaExceededError,
  TransientError,
} from '../../errors.ts';

/** The parts of a gaxios error (or a hand-made one from a raw response) that are read. */
export interface GaxiosLike {
  status?: number;
  code?: string;
  message?: string;
  response?: { status?: number; data?: unknown; headers?: { get?: (n: string) => string | null } };
}

function driveReason(data: unknown): string {
  const errors = (data as { error?: { errors?: { reason?: string }[] } } | undefined)?.error?.errors;
  return errors?.[0]?.reason ?? '';
}

/** Map a Drive failure to the contract's errors. */
export function classifyGDrive(e: unknown, where: string): Error {
  if (e instanceof ProviderError) return e;
  if (e instanceof Error && e.name === 'AbortError') return e;
  const err = (e ?? {}) as GaxiosLike;
  const status = err.response?.status ?? err.status;
  const data = err.response?.data;
  const reason = driveReason(data);
  const msg = `${where}: Drive ${status ?? err.code ?? ''} ${reason || err.message || ''}`.trim();
  const retryAfter = parseRetryAfter(err.response?.headers?.get?.('retry-after'));
  if (status === undefined) return new TransientError(msg, undefined, { cause: e });
  if (status === 404) return new NotFoundError(msg, { cause: e });
  if (status === 401) return new AuthError(msg, { cause: e });
  if (status === 429 || status >= 500) return new TransientError(msg, retryAfter, { cause: e });
  if (status === 403) {
    if (['userRateLimitExceeded', 'rateLimitExceeded', 'sharingRateLimitExceeded'].includes(reason)) {
      return new TransientError(msg, retryAfter, { cause: e });
    }
    if (reason === 'storageQuotaExceeded' || reason === 'quotaExceeded')
      return new QuotaExceededError(msg, { cause: e });
    return new AuthError(msg, { cause: e });
  }
  if (status === 412) return new PreconditionFailedError(msg, undefined, { cause: e });
  return new InvalidArgumentError(msg, { cause: e });
}

/** For responseType 'stream' errors the body is a stream: read it so the reason can be classified. */
export async function withBody(e: unknown): Promise<unknown> {
  const err = e as GaxiosLike;
  const data = err.response?.data;
  if (data && typeof (data as Readable).pipe === 'function') {
    const chunks: Buffer[] = [];
    try {
      for await (const c of data as Readable) chunks.push(Buffer.from(c as Uint8Array));
      const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      return { ...err, message: err.message, response: { ...err.response, data: parsed } };
    } catch {
      return e;
    }
  }
  return e;
}

/** A response the adapter read itself (resumable uploads), classified like a client error. */
export async function classifyResponse(res: Response, where: string): Promise<Error> {
  const data: unknown = await res.json().catch(() => undefined);
  return classifyGDrive({ response: { status: res.status, data, headers: res.headers } }, where);
}
