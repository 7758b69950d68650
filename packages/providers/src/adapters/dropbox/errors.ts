/**
 * Dropbox failures in the contract's terms. Dropbox reports an error as an HTTP status and a
 * Stone-encoded union whose `error_summary` names the chain of tags
 * ('path/conflict/file/..'); the tags decide the contract error, and Retry-After (header or
 * `error.retry_after`) rides along on TransientError.
 */
import { DropboxResponseError } from 'dropbox';
import { z } from 'zod';
import { parseRetryAfter } from '../../backoff.ts';
import {
  AlreadyExistsError,
  AuthError,
  InvalidArgumentError,
  InvalidPathError,
  NotFoundError,
  ProviderError,
  QuotaExceededError,
  TransientError,
} from '../../errors.ts';

const ErrorBody = z
  .object({ error_summary: z.string().optional(), error: z.unknown().optional() })
  .passthrough();

/** The chain of tags in an error_summary, e.g. 'path/conflict/file/..' → ['path','conflict','file']. */
export function summaryTags(summary: string | undefined): string[] {
  if (!summary) return [];
  return summary.split('/').filter((t) => t !== '' && !t.startsWith('.'));
}

export class DropboxApiError extends Error {
  constructor(
    readonly status: number,
    readonly tags: string[],
    readonly body: unknown,
    readonly retryAfterMs: number | undefined,
  ) {
    super(`Dropbox ${status} ${tags.join('/')}`);
  }
  has(...tags: string[]): boolean {
    return tags.every((t) => this.tags.includes(t));
  }
}

export function retryAfterMs(header: string | null | undefined, body?: unknown): number | undefined {
  const fromHeader = parseRetryAfter(header);
  if (fromHeader !== undefined) return fromHeader;
  const ra = (body as { error?: { retry_after?: unknown } } | undefined)?.error?.retry_after;
  return typeof ra === 'number' ? ra * 1000 : undefined;
}

export function toApiError(e: unknown): DropboxApiError | undefined {
  if (e instanceof DropboxApiError) return e;
  if (e instanceof ProviderError && e.cause !== undefined) return toApiError(e.cause);
  if (e instanceof DropboxResponseError) {
    const err = e as DropboxResponseError<unknown> & { status: number; headers: Headers; error: unknown };
    const body = ErrorBody.safeParse(err.error);
    const tags = body.success ? summaryTags(body.data.error_summary) : [];
    const headers = err.headers as { get?: (n: string) => string | null } | undefined;
    return new DropboxApiError(
      err.status,
      tags,
      err.error,
      retryAfterMs(headers?.get?.('retry-after'), err.error),
    );
  }
  return undefined;
}

/** Map a Dropbox failure to the contract's errors (conflicts → AlreadyExists; callers refine). */
export function classifyDropbox(e: unknown, where: string): Error {
  if (e instanceof ProviderError) return e;
  if (e instanceof Error && e.name === 'AbortError') return e;
  const api = toApiError(e);
  if (!api) return new TransientError(`${where}: ${String(e)}`, undefined, { cause: e });
  const msg = `${where}: Dropbox ${api.status} ${api.tags.join('/') || String(JSON.stringify(api.body) ?? '').slice(0, 200)}`;
  const t = api.tags;
  if (api.status === 401 || api.status === 403) return new AuthError(msg, { cause: e });
  if (
    api.status === 429 ||
    api.status >= 500 ||
    t.includes('too_many_write_operations') ||
    t.includes('too_many_requests')
  ) {
    return new TransientError(msg, api.retryAfterMs, { cause: e });
  }
  if (api.status === 409) {
    if (t.includes('not_found') || t.includes('not_file') || t.includes('not_folder'))
      return new NotFoundError(msg, { cause: e });
    if (t.includes('conflict')) return new AlreadyExistsError(msg, { cause: e });
    if (t.includes('insufficient_space') || t.includes('insufficient_quota'))
      return new QuotaExceededError(msg, { cause: e });
    if (t.includes('content_hash_mismatch')) return new TransientError(msg, undefined, { cause: e });
    if (
      t.includes('disallowed_name') ||
      t.includes('malformed_path') ||
      t.includes('cant_move_folder_into_itself')
    ) {
      return new InvalidPathError(msg, where, { cause: e });
    }
  }
  return new InvalidArgumentError(msg, { cause: e });
}

/** The contract error for a failed raw request (downloads, longpoll), from its status and body. */
export async function classifyResponse(res: Response, where: string): Promise<Error> {
  const text = await res.text().catch(() => '');
  let body: unknown = text;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    /* plain text body */
  }
  const parsed = ErrorBody.safeParse(body);
  const tags = parsed.success ? summaryTags(parsed.data.error_summary) : [];
  return classifyDropbox(
    new DropboxApiError(res.status, tags, body, retryAfterMs(res.headers.get('retry-after'), body)),
    where,
  );
}

/** Tags of a Stone-encoded union value, outermost first: {".tag":"path","path":{".tag":"conflict",…}}. */
export function flattenTags(value: unknown): string[] {
  const tags: string[] = [];
  let cur: unknown = value;
  for (let depth = 0; depth < 6 && cur && typeof cur === 'object'; depth++) {
    const tag = (cur as Record<string, unknown>)['.tag'];
    if (typeof tag !== 'string') break;
    tags.push(tag);
    const o = cur as Record<string, unknown>;
    cur = o[tag] ?? o.reason ?? undefined;
  }
  return tags;
}
