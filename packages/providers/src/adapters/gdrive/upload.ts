/**
 * Writes. Small writes are multipart uploads; larger ones use the resumable protocol, sent
 * through the auth client (the generated client has no resumable support): chunks of a
 * multiple of 256 KiB, and after a dropped chunk the session's status (`bytes *∕N`) says
 * where to resume. A failed or aborted upload cancels its session.
 *
 * A conditional write (ifRevision) goes through v2, which carries etags and honours
 * If-Match: one v2 files.get gives etag and headRevisionId together (etagAt), and the
 * write carries `If-Match: <etag>`; Drive's 412 is PreconditionFailed.
 */
import type { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { checkBody, throwIfAborted } from '../../body.ts';
import { PreconditionFailedError, TransientError } from '../../errors.ts';
import { baseName } from '../../paths.ts';
import type { WriteOptions } from '../../provider.ts';
import { type DriveApi, type DriveFile, type DriveFileV2, FILE_FIELDS, fromV2, V2_FIELDS } from './api.ts';
import { classifyResponse } from './errors.ts';

/** Where a write goes: a new item, or an existing one (under If-Match: `etag`, through v2). */
export type WriteTarget =
  | { readonly kind: 'create'; readonly parentId: string }
  | { readonly kind: 'update'; readonly fileId: string; readonly etag?: string };

/** Last byte + 1 from a 308's `Range: bytes=0-N` (0 when absent). */
function rangeEnd(header: string | null): number {
  const m = header ? /bytes=0-(\d+)/.exec(header) : null;
  return m ? Number(m[1]) + 1 : 0;
}

/**
 * The etag of file `fileId` if it is still at `p` (in `parentId`) and at revision `want`:
 * etag and revision come from one v2 read, so a write under If-Match on that etag makes
 * the revision check and the write one step on the server. Else PreconditionFailed
 * (NotFound when the file is gone).
 */
export async function etagAt(
  api: DriveApi,
  p: string,
  fileId: string,
  parentId: string | undefined,
  want: string,
  signal?: AbortSignal,
): Promise<string> {
  const o = await api.opts(signal);
  const cur = await api.call(
    'files.get (v2)',
    () => api.driveV2.files.get({ fileId, fields: V2_FIELDS }, o),
    signal,
  );
  if (
    cur.labels?.trashed ||
    cur.title !== baseName(p) ||
    (parentId !== undefined && !cur.parents?.some((r) => r.id === parentId))
  ) {
    throw new PreconditionFailedError(`${api.name}: ${p} was moved, renamed or trashed meanwhile`);
  }
  if (cur.headRevisionId !== want) {
    throw new PreconditionFailedError(
      `${api.name}: ${p} is at revision ${cur.headRevisionId ?? ''}, not ${want}`,
      cur.headRevisionId ?? undefined,
    );
  }
  if (!cur.etag) throw new TransientError(`${api.name}: Drive gave no etag for ${p}`);
  return cur.etag;
}

/** Drive's 412 to a request under If-Match: the file changed after its etag was read. */
function changed(api: DriveApi, p: string, e: PreconditionFailedError): PreconditionFailedError {
  return new PreconditionFailedError(
    `${api.name}: ${p} changed after its revision was checked (If-Match refused)`,
    undefined,
    { cause: e },
  );
}

/** A v2 request under If-Match. */
export async function underIfMatch<T>(
  api: DriveApi,
  p: string,
  where: string,
  fn: () => Promise<{ data: T }>,
  signal?: AbortSignal,
): Promise<T> {
  try {
    return await api.call(where, fn, signal);
  } catch (e) {
    throw e instanceof PreconditionFailedError ? changed(api, p, e) : e;
  }
}

/** A write in one request: v3 create or update, or v2 update under If-Match. */
export async function upload(
  api: DriveApi,
  p: string,
  target: WriteTarget,
  modifiedTime: string | undefined,
  data: Buffer,
  signal?: AbortSignal,
): Promise<DriveFile> {
  const o = await api.opts(signal);
  // A fresh stream per attempt (call() repeats the request after a refreshed token).
  const media = (): { mimeType: string; body: Readable } => ({
    mimeType: 'application/octet-stream',
    body: Readable.from([data]),
  });
  if (target.kind === 'create') {
    const { parentId } = target;
    return api.call(
      'files.create',
      () =>
        api.drive.files.create(
          {
            requestBody: {
              ...(modifiedTime ? { modifiedTime } : {}),
              name: baseName(p),
              parents: [parentId],
            },
            media: media(),
            fields: FILE_FIELDS,
          },
          o,
        ),
      signal,
    );
  }
  const { fileId, etag } = target;
  if (etag === undefined) {
    return api.call(
      'files.update',
      () =>
        api.drive.files.update(
          {
            fileId,
            requestBody: modifiedTime ? { modifiedTime } : {},
            media: media(),
            fields: FILE_FIELDS,
          },
          o,
        ),
      signal,
    );
  }
  const f = await underIfMatch(
    api,
    p,
    'files.update (v2, If-Match)',
    () =>
      api.driveV2.files.update(
        {
          fileId,
          media: media(),
          fields: V2_FIELDS,
          // v2 keeps the body's modifiedDate only when asked to.
          ...(modifiedTime ? { setModifiedDate: true, requestBody: { modifiedDate: modifiedTime } } : {}),
        },
        { ...o, headers: { 'If-Match': etag } },
      ),
    signal,
  );
  return fromV2(f);
}

/**
 * Resumable upload: chunks sent through the auth client, resuming from the session's
 * status. An update under If-Match (v2) opens the session with it; Drive may also refuse
 * the last chunk with 412 when the file changed while the chunks were sent.
 */
export async function resumable(
  api: DriveApi,
  p: string,
  target: WriteTarget,
  modifiedTime: string | undefined,
  first: Buffer,
  second: Buffer,
  rest: AsyncIterator<Buffer>,
  sha: ReturnType<typeof createHash>,
  options: WriteOptions,
): Promise<DriveFile> {
  const v2 = target.kind === 'update' && target.etag !== undefined;
  const headers: Record<string, string> = {
    'x-upload-content-type': 'application/octet-stream',
    ...(options.size !== undefined ? { 'x-upload-content-length': String(options.size) } : {}),
  };
  let url: string;
  let method: string;
  let meta: Record<string, unknown>;
  if (target.kind === 'create') {
    url = `${api.rootUrl}upload/drive/v3/files?uploadType=resumable&fields=${FILE_FIELDS}`;
    method = 'POST';
    meta = { ...(modifiedTime ? { modifiedTime } : {}), name: baseName(p), parents: [target.parentId] };
  } else if (target.etag === undefined) {
    url = `${api.rootUrl}upload/drive/v3/files/${encodeURIComponent(target.fileId)}?uploadType=resumable&fields=${FILE_FIELDS}`;
    method = 'PATCH';
    meta = modifiedTime ? { modifiedTime } : {};
  } else {
    // v2 files.update is a PUT.
    url =
      `${api.rootUrl}upload/drive/v2/files/${encodeURIComponent(target.fileId)}?uploadType=resumable` +
      `&fields=${encodeURIComponent(V2_FIELDS)}${modifiedTime ? '&setModifiedDate=true' : ''}`;
    method = 'PUT';
    meta = modifiedTime ? { modifiedDate: modifiedTime } : {};
    headers['if-match'] = target.etag;
  }
  const init = await api.request(url, method, meta, headers, options.signal);
  if (init.status !== 200) {
    const e = await classifyResponse(init, `${api.name}: start resumable upload ${p}`);
    throw v2 && e instanceof PreconditionFailedError ? changed(api, p, e) : e;
  }
  const session = init.headers.get('location');
  if (!session) throw new TransientError(`${api.name}: resumable upload of ${p} got no session URI`);
  try {
    let offset = 0;
    let chunk = first;
    let next: Buffer | undefined = second;
    for (;;) {
      throwIfAborted(options.signal);
      const last = next === undefined;
      if (last) checkBody(api.name, p, options, offset + chunk.byteLength, sha.digest('hex'));
      const done = await sendChunk(api, session, chunk, offset, last, options.signal);
      if (done) return v2 ? fromV2(done as DriveFileV2) : (done as DriveFile);
      offset += chunk.byteLength;
      chunk = next as Buffer;
      const following = await rest.next();
      next = following.done ? undefined : following.value;
      sha.update(chunk);
    }
  } catch (e) {
    // Cancel the session so nothing is left behind (best effort; it also expires in a week).
    await api.request(session, 'DELETE', undefined, {}, undefined).catch(() => undefined);
    throw v2 && e instanceof PreconditionFailedError ? changed(api, p, e) : e;
  }
}

/**
 * PUT one chunk; on a dropped connection, 429 or 5xx wait (Retry-After when the answer has
 * one), ask the session where it stands and resume.
 */
async function sendChunk(
  api: DriveApi,
  session: string,
  chunk: Buffer,
  offset: number,
  last: boolean,
  signal?: AbortSignal,
): Promise<object | undefined> {
  const total = last ? String(offset + chunk.byteLength) : '*';
  const end = offset + chunk.byteLength;
  let sent = 0; // bytes of this chunk the session already holds
  for (let attempt = 1; ; attempt++) {
    throwIfAborted(signal);
    let res: Response | undefined;
    try {
      res = await api.request(
        session,
        'PUT',
        chunk.subarray(sent),
        { 'content-range': `bytes ${offset + sent}-${end - 1}/${total}` },
        signal,
      );
    } catch (e) {
      if (signal?.aborted) throw e;
    }
    if (res && (res.status === 200 || res.status === 201)) return (await res.json()) as object;
    let have: number | undefined;
    if (res?.status === 308) have = rangeEnd(res.headers.get('range'));
    else if (res && res.status < 500 && res.status !== 429) {
      throw await classifyResponse(res, `${api.name}: upload chunk`);
    }
    if (attempt >= 6) {
      throw new TransientError(
        `${api.name}: upload chunk failed ${attempt} times (last: ${res?.status ?? 'network error'})`,
      );
    }
    if (have === undefined) {
      // Dropped or refused: ask where the session stands (status query `bytes */N`).
      await api.chunkRetry.wait(attempt, res, signal);
      const status = await api
        .request(session, 'PUT', Buffer.alloc(0), { 'content-range': `bytes */${total}` }, signal)
        .catch(() => undefined);
      if (status && (status.status === 200 || status.status === 201)) return (await status.json()) as object;
      if (status?.status !== 308) continue;
      have = rangeEnd(status.headers.get('range'));
    }
    if (have >= end) return undefined;
    sent = Math.max(0, have - offset);
  }
}
