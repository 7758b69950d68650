/**
 * Dropbox requests made outside the SDK, through the provider's fetch (base URL rewrite,
 * current token): content downloads with Range (the SDK buffers whole files and cannot send
 * Range) and list_folder/longpoll.
 */
import { z } from 'zod';
import { TransientError } from '../../errors.ts';
import { CURSOR_PREFIX } from './api.ts';
import { classifyResponse } from './errors.ts';

/** The provider's fetch: the API hosts pointed at the base URL, the bearer token current. */
export type DropboxFetch = (url: string, init?: RequestInit) => Promise<Response>;

/** A raw request to a content endpoint (downloads with Range); a network failure is Transient. */
export async function contentRequest(
  http: DropboxFetch,
  name: string,
  endpoint: string,
  arg: unknown,
  headers: Record<string, string>,
  signal?: AbortSignal,
): Promise<Response> {
  const argHeader = JSON.stringify(arg).replace(
    /[\u007f-\uffff]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'),
  );
  let res: Response;
  try {
    res = await http(`https://content.dropboxapi.com/2/${endpoint}`, {
      method: 'POST',
      headers: { authorization: 'Bearer -', 'dropbox-api-arg': argHeader, ...headers },
      signal,
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new TransientError(`${name}: ${endpoint}: ${String(e)}`, undefined, { cause: e });
  }
  return res;
}

/**
 * list_folder/longpoll (no auth): whether something changed after `cursor` within
 * `timeoutSeconds` (30–480), and the backoff in ms Dropbox asks for before the next call.
 */
export async function longpoll(
  http: DropboxFetch,
  name: string,
  cursor: string,
  timeoutSeconds: number,
  signal?: AbortSignal,
): Promise<{ changes: boolean; backoffMs: number }> {
  if (!cursor.startsWith(CURSOR_PREFIX)) return { changes: true, backoffMs: 0 };
  let res: Response;
  try {
    res = await http('https://notify.dropboxapi.com/2/files/list_folder/longpoll', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        cursor: cursor.slice(CURSOR_PREFIX.length),
        timeout: Math.max(30, Math.min(480, timeoutSeconds)),
      }),
      signal,
    });
  } catch (e) {
    if (signal?.aborted) throw e;
    throw new TransientError(`${name}: longpoll: ${String(e)}`, undefined, { cause: e });
  }
  if (res.status === 409) {
    await res.body?.cancel();
    return { changes: true, backoffMs: 0 }; // reset: the caller's changes() reports it
  }
  if (!res.ok) throw await classifyResponse(res, `${name}: longpoll`);
  const body = z.object({ changes: z.boolean(), backoff: z.number().optional() }).parse(await res.json());
  return { changes: body.changes, backoffMs: (body.backoff ?? 0) * 1000 };
}
