/**
 * OneDrive writes. Up to 4 MiB a simple upload (`PUT …:/content`); larger ones an upload
 * session: fragments of a multiple of 320 KiB, in order, PUT to the pre-authenticated
 * `uploadUrl` without the Authorization header; after a drop the session's
 * `nextExpectedRanges` says where to resume. A failed or aborted upload deletes its session.
 * Conditional writes send `If-Match: <eTag>`; must-not-exist writes use
 * `@microsoft.graph.conflictBehavior=fail`.
 */
import { createHash } from 'node:crypto';
import { GraphError } from '@microsoft/microsoft-graph-client';
import { z } from 'zod';
import { checkBody, openBody, rechunk, throwIfAborted } from '../../body.ts';
import { InvalidArgumentError, TransientError } from '../../errors.ts';
import type { Body, WriteOptions } from '../../provider.ts';
import type { ChunkRetry } from '../chunk-retry.ts';
import { type GraphCalls, type Item, parseItem, SIMPLE_MAX } from './api.ts';
import { classifyGraph } from './errors.ts';

/** A simple upload of `data` to item address `at` (provider path `p`). */
export async function simpleUpload(
  g: GraphCalls,
  at: string,
  p: string,
  data: Buffer,
  options: WriteOptions,
): Promise<Item> {
  const conflict = options.ifNotExists ? 'fail' : 'replace';
  let req = g.client
    .api(`${at}/content`)
    .query({ '@microsoft.graph.conflictBehavior': conflict })
    .header('Content-Type', 'application/octet-stream');
  if (options.ifRevision !== undefined) req = req.header('If-Match', options.ifRevision);
  return parseItem(
    g.name,
    await g.call(`upload ${p}`, () => req.put(data) as Promise<unknown>, options.signal),
  );
}

/**
 * Upload session: fragments PUT to uploadUrl (no Authorization), resuming from
 * nextExpectedRanges; a refused fragment waits as `retry` says (Retry-After first).
 */
export async function sessionUpload(
  g: GraphCalls,
  fetchImpl: typeof fetch,
  retry: ChunkRetry,
  at: string,
  p: string,
  size: number,
  source: AsyncIterator<Buffer>,
  sha: ReturnType<typeof createHash> | undefined,
  options: WriteOptions,
): Promise<Item> {
  let req = g.client.api(`${at}/createUploadSession`);
  if (options.ifRevision !== undefined) req = req.header('If-Match', options.ifRevision);
  const created = z
    .object({ uploadUrl: z.string() })
    .passthrough()
    .parse(
      await g.call(
        `createUploadSession ${p}`,
        () =>
          req.post({
            item: {
              '@microsoft.graph.conflictBehavior': options.ifNotExists ? 'fail' : 'replace',
              ...(options.modifiedMs !== undefined
                ? { fileSystemInfo: { lastModifiedDateTime: new Date(options.modifiedMs).toISOString() } }
                : {}),
            },
          }) as Promise<unknown>,
        options.signal,
      ),
    );
  const uploadUrl = created.uploadUrl;
  try {
    let offset = 0;
    let cur = await source.next();
    while (!cur.done) {
      throwIfAborted(options.signal);
      const chunk = cur.value;
      if (sha) sha.update(chunk);
      const next = await source.next();
      const last = next.done === true;
      if (last && sha) checkBody(g.name, p, options, offset + chunk.byteLength, sha.digest('hex'));
      if (offset + chunk.byteLength > size)
        throw new InvalidArgumentError(`${g.name}: more than the ${size} bytes declared for ${p}`);
      if (last && offset + chunk.byteLength !== size) {
        throw new InvalidArgumentError(
          `${g.name}: expected ${size} bytes for ${p}, received ${offset + chunk.byteLength}`,
        );
      }
      const done = await sendFragment(g, fetchImpl, retry, uploadUrl, chunk, offset, size, options.signal);
      if (done) return done;
      offset += chunk.byteLength;
      cur = next;
    }
    throw new InvalidArgumentError(`${g.name}: expected ${size} bytes for ${p}, received ${offset}`);
  } catch (e) {
    await fetchImpl(uploadUrl, { method: 'DELETE' }).then(
      (r) => r.body?.cancel(),
      () => undefined,
    );
    throw e;
  }
}

async function sendFragment(
  g: GraphCalls,
  fetchImpl: typeof fetch,
  retry: ChunkRetry,
  uploadUrl: string,
  chunk: Buffer,
  offset: number,
  size: number,
  signal?: AbortSignal,
): Promise<Item | undefined> {
  const end = offset + chunk.byteLength;
  let sent = 0;
  for (let attempt = 1; ; attempt++) {
    throwIfAborted(signal);
    let res: Response | undefined;
    try {
      res = await fetchImpl(uploadUrl, {
        method: 'PUT',
        headers: { 'content-range': `bytes ${offset + sent}-${end - 1}/${size}` },
        body: chunk.subarray(sent),
        signal,
      });
    } catch (e) {
      if (signal?.aborted) throw e;
    }
    if (res && (res.status === 200 || res.status === 201)) return parseItem(g.name, await res.json());
    if (res?.status === 202) {
      await res.body?.cancel();
      return undefined;
    }
    if (res && res.status !== 416 && res.status < 500 && res.status !== 429) {
      const text = await res.text().catch(() => '');
      const err = new GraphError(res.status, text);
      err.code = /"code"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? null;
      err.headers = res.headers;
      throw classifyGraph(err, `${g.name}: upload fragment`);
    }
    await res?.body?.cancel().catch(() => undefined);
    if (attempt >= 6)
      throw new TransientError(
        `${g.name}: upload fragment failed ${attempt} times (last: ${res?.status ?? 'network error'})`,
      );
    await retry.wait(attempt, res, signal);
    // Where does the session stand?
    const status = await fetchImpl(uploadUrl, { method: 'GET', signal }).catch(() => undefined);
    if (!status?.ok) {
      await status?.body?.cancel().catch(() => undefined);
      continue;
    }
    const body = z
      .object({ nextExpectedRanges: z.array(z.string()).optional() })
      .passthrough()
      .parse(await status.json());
    const nextStart = Number((body.nextExpectedRanges?.[0] ?? '').split('-')[0]);
    if (!Number.isFinite(nextStart)) continue;
    if (nextStart >= end) return undefined;
    sent = Math.max(0, nextStart - offset);
  }
}

/**
 * Write `body` to item address `at` (provider path `p`): a simple upload when it fits in
 * 4 MiB, else an upload session in fragments of `fragment` bytes. Graph needs the total
 * size in every fragment, so a body of unknown size above 4 MiB is read into memory first.
 * A failure once the first two pieces are read is thrown as `refine` turns it.
 */
export async function uploadBody(
  g: GraphCalls,
  fetchImpl: typeof fetch,
  chunkRetry: ChunkRetry,
  fragment: number,
  at: string,
  p: string,
  body: Body,
  options: WriteOptions,
  refine: (e: unknown) => Promise<unknown>,
): Promise<Item> {
  const sha = createHash('sha256');
  let chunks: Buffer[] = [];
  let total = 0;
  const parts = rechunk(openBody(body), options.size !== undefined ? fragment : SIMPLE_MAX)[
    Symbol.asyncIterator
  ]();
  const first = await parts.next();
  if (!first.done) {
    chunks.push(first.value);
    total += first.value.byteLength;
    sha.update(first.value);
  }
  const second = first.done ? ({ done: true, value: undefined } as const) : await parts.next();
  throwIfAborted(options.signal);
  try {
    if (second.done && total <= SIMPLE_MAX) {
      checkBody(g.name, p, options, total, sha.digest('hex'));
      return await simpleUpload(g, at, p, chunks[0] ?? Buffer.alloc(0), options);
    } else {
      let source: AsyncIterator<Buffer>;
      let size = options.size;
      // The body's hash: checked here when the whole body was read first, else as it goes.
      let hasher: ReturnType<typeof createHash> | undefined;
      if (size === undefined) {
        // Graph needs the total in every Content-Range: learn it first.
        chunks.push(second.value as Buffer);
        sha.update(second.value as Buffer);
        total += (second.value as Buffer).byteLength;
        for (let n = await parts.next(); !n.done; n = await parts.next()) {
          throwIfAborted(options.signal);
          chunks.push(n.value);
          sha.update(n.value);
          total += n.value.byteLength;
        }
        size = total;
        const all = Buffer.concat(chunks);
        chunks = [];
        source = rechunk(
          (async function* () {
            yield all;
          })(),
          fragment,
        )[Symbol.asyncIterator]();
        checkBody(g.name, p, options, total, sha.digest('hex'));
      } else {
        const firstChunk = chunks[0] ?? Buffer.alloc(0);
        const rest = parts;
        source = (async function* () {
          yield firstChunk;
          if (!second.done) yield second.value;
          for (let n = await rest.next(); !n.done; n = await rest.next()) yield n.value;
        })()[Symbol.asyncIterator]();
        hasher = createHash('sha256');
      }
      return await sessionUpload(g, fetchImpl, chunkRetry, at, p, size, source, hasher, options);
    }
  } catch (e) {
    throw await refine(e);
  }
}
