/**
 * How the proxy client (proxy-client.ts) reads the server's failures: RemoteError with the
 * server's error code, OfflineError when the server could not be reached (or answered a 5xx
 * without an error body), and the fetch, status check and JSON validation they come from.
 */
import { ApiErrorBody, type ErrorCode } from '@weft/wire';

type Schema<T> = { parse(input: unknown): T };

export class RemoteError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode | 'UNKNOWN',
    message: string,
    readonly details?: Record<string, unknown>,
    readonly retryAfterMs?: number,
  ) {
    super(message);
    this.name = 'RemoteError';
  }
}

/** The server could not be reached (or the connection broke): stay queued, retry later. */
export class OfflineError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'OfflineError';
  }
}

/** The connection was reset or closed under a request (not refused, not a timeout). */
export function connectionDropped(e: unknown): boolean {
  for (let c: unknown = e; c instanceof Error; c = c.cause) {
    const code = (c as NodeJS.ErrnoException).code;
    if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET') return true;
  }
  return false;
}

export async function safeFetch(url: string, init: RequestInit): Promise<Response> {
  try {
    return await fetch(url, init);
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new OfflineError(`cannot reach ${new URL(url).origin}: ${(e as Error).message}`, { cause: e });
  }
}

export async function ensureOk(res: Response): Promise<void> {
  if (res.ok) return;
  const text = await res.text().catch(() => '');
  let parsed: ApiErrorBody | undefined;
  try {
    parsed = ApiErrorBody.parse(JSON.parse(text));
  } catch {
    parsed = undefined;
  }
  const retryAfter = res.headers.get('retry-after');
  const retryAfterMs =
    retryAfter && Number.isFinite(Number(retryAfter)) ? Number(retryAfter) * 1000 : undefined;
  if (res.status >= 500 && !parsed)
    throw new OfflineError(`server error ${res.status}: ${text.slice(0, 200)}`);
  throw new RemoteError(
    res.status,
    parsed?.error.code ?? 'UNKNOWN',
    parsed?.error.message ?? `HTTP ${res.status}: ${text.slice(0, 200)}`,
    parsed?.error.details,
    retryAfterMs,
  );
}

/** A response's JSON body checked against its schema (`body` reads it: a client may meter it). */
export async function parseJson<T>(
  res: Response,
  schema: Schema<T>,
  body: (res: Response) => Promise<string> = (r) => r.text(),
): Promise<T> {
  await ensureOk(res);
  const text = await body(res); // a dropped connection is not "not JSON"
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new RemoteError(res.status, 'UNKNOWN', `response is not JSON: ${(e as Error).message}`);
  }
  try {
    return schema.parse(json);
  } catch (e) {
    throw new RemoteError(
      res.status,
      'UNKNOWN',
      `response does not match the API schema: ${(e as Error).message}`,
    );
  }
}
