/**
 * Dropbox writes. Small writes are committed in batches with upload_session/finish_batch_v2,
 * at most one batch in flight per account (Dropbox serialises writes per namespace; parallel
 * commits fail with too_many_write_operations — rclone's experience). Large writes are upload
 * sessions, chunk by chunk, resuming from the server's `correct_offset` after a drop.
 * Conditional writes use WriteMode `update` with the rev and strict_conflict.
 */
import { createHash } from 'node:crypto';
import type { Dropbox } from 'dropbox';
import { z } from 'zod';
import { checkBody, openBody, rechunk, throwIfAborted } from '../../body.ts';
import { TransientError } from '../../errors.ts';
import type { Body, WriteOptions } from '../../provider.ts';
import { DROPBOX_BLOCK, type DropboxCalls } from './api.ts';
import { classifyDropbox, DropboxApiError, flattenTags, toApiError } from './errors.ts';

/** Dropbox content_hash of a buffer (4 MiB blocks, SHA-256 of the block SHA-256s). */
export class ContentHasher {
  private readonly overall = createHash('sha256');
  private block = createHash('sha256');
  private inBlock = 0;
  update(data: Uint8Array): void {
    for (let off = 0; off < data.byteLength;) {
      const take = Math.min(DROPBOX_BLOCK - this.inBlock, data.byteLength - off);
      this.block.update(data.subarray(off, off + take));
      this.inBlock += take;
      off += take;
      if (this.inBlock === DROPBOX_BLOCK) this.flushBlock();
    }
  }
  private flushBlock(): void {
    this.overall.update(this.block.digest());
    this.block = createHash('sha256');
    this.inBlock = 0;
  }
  hex(): string {
    if (this.inBlock > 0) this.flushBlock();
    return this.overall.digest('hex');
  }
}

export interface BatchItem {
  readonly entry: { cursor: { session_id: string; offset: number }; commit: Record<string, unknown> };
  readonly resolve: (meta: unknown) => void;
  readonly reject: (e: unknown) => void;
}

/** Queues finish entries and sends them with finish_batch_v2, one batch at a time. */
export class CommitBatcher {
  private queue: BatchItem[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  constructor(
    private readonly send: (entries: BatchItem['entry'][]) => Promise<unknown[]>,
    private readonly size: number,
    private readonly lingerMs: number,
  ) {}

  commit(entry: BatchItem['entry']): Promise<unknown> {
    return new Promise((resolve, reject) => {
      this.queue.push({ entry, resolve, reject });
      if (this.queue.length >= this.size) this.kick();
      else this.timer ??= setTimeout(() => this.kick(), this.lingerMs);
    });
  }

  private kick(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) return; // the running batch picks the queue up when it ends
    this.running = this.drain().finally(() => {
      this.running = undefined;
      if (this.queue.length > 0) this.kick();
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const items = this.queue.splice(0, this.size);
      try {
        const results = await this.send(items.map((i) => i.entry));
        items.forEach((item, i) => item.resolve(results[i]));
      } catch (e) {
        for (const item of items) item.reject(e);
      }
    }
  }

  close(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

/** The commit argument of a write to Dropbox path `dbxPath` (mode from the write's conditions). */
export function commitInfo(dbxPath: string, options: WriteOptions): Record<string, unknown> {
  const mode =
    options.ifRevision !== undefined
      ? { '.tag': 'update', update: options.ifRevision }
      : options.ifNotExists
        ? { '.tag': 'add' }
        : { '.tag': 'overwrite' };
  return {
    path: dbxPath,
    mode,
    autorename: false,
    strict_conflict: true,
    mute: true,
    ...(options.modifiedMs !== undefined
      ? {
          client_modified: new Date(Math.floor(options.modifiedMs / 1000) * 1000)
            .toISOString()
            .replace('.000Z', 'Z'),
        }
      : {}),
  };
}

/** A write that fits one chunk: files/upload, or a closed session committed through the batcher. */
export async function writeSmall(
  dbx: DropboxCalls,
  batcher: CommitBatcher | undefined,
  p: string,
  data: Buffer,
  hash: string,
  commit: Record<string, unknown>,
  signal: AbortSignal | undefined,
): Promise<unknown> {
  if (!batcher) {
    return dbx.call(`upload ${p}`, () =>
      dbx.sdk.filesUpload({
        ...(commit as { path: string }),
        contents: data,
        content_hash: hash,
      } as Parameters<Dropbox['filesUpload']>[0]),
    );
  }
  const started = await dbx.call(`upload_session/start ${p}`, () =>
    dbx.sdk.filesUploadSessionStart({ close: true, contents: data, content_hash: hash } as Parameters<
      Dropbox['filesUploadSessionStart']
    >[0]),
  );
  throwIfAborted(signal);
  const result = await batcher.commit({
    cursor: { session_id: started.session_id, offset: data.byteLength },
    commit,
  });
  const r = z.object({ '.tag': z.string() }).passthrough().safeParse(result);
  if (!r.success) throw new TransientError(`${dbx.name}: finish_batch_v2 gave no result for ${p}`);
  if (r.data['.tag'] === 'success') return { ...r.data, '.tag': 'file' };
  const failure = (result as { failure?: unknown }).failure;
  const tags = flattenTags(failure);
  throw new DropboxApiError(409, tags, failure, undefined);
}

/** Send one batch of finish entries; the results in the entries' order. */
export async function finishBatch(dbx: DropboxCalls, entries: BatchItem['entry'][]): Promise<unknown[]> {
  const out = await dbx.call('upload_session/finish_batch_v2', () =>
    dbx.sdk.filesUploadSessionFinishBatchV2({ entries } as unknown as Parameters<
      Dropbox['filesUploadSessionFinishBatchV2']
    >[0]),
  );
  const parsed = z.object({ entries: z.array(z.unknown()) }).safeParse(out);
  if (!parsed.success || parsed.data.entries.length !== entries.length) {
    throw new TransientError(`${dbx.name}: finish_batch_v2 returned a malformed result`);
  }
  return parsed.data.entries;
}

/** Append one chunk at `offset`, resuming from the server's correct_offset after a drop. */
async function appendChunk(
  dbx: DropboxCalls,
  sessionId: string,
  offset: number,
  chunk: Buffer,
  signal: AbortSignal | undefined,
): Promise<void> {
  let sent = 0; // bytes of this chunk the server already has
  for (let attempt = 1; ; attempt++) {
    throwIfAborted(signal);
    try {
      await dbx.sdk.filesUploadSessionAppendV2({
        cursor: { session_id: sessionId, offset: offset + sent },
        close: false,
        contents: chunk.subarray(sent),
      } as Parameters<Dropbox['filesUploadSessionAppendV2']>[0]);
      return;
    } catch (e) {
      const api = toApiError(e);
      const correct = (api?.body as { error?: { correct_offset?: unknown } } | undefined)?.error
        ?.correct_offset;
      if (api?.has('incorrect_offset') && typeof correct === 'number') {
        if (correct === offset + chunk.byteLength) return; // the dropped request had arrived
        if (correct >= offset && correct < offset + chunk.byteLength) {
          sent = correct - offset;
          continue;
        }
      }
      const classified = classifyDropbox(e, `${dbx.name}: upload_session/append_v2`);
      if (!(classified instanceof TransientError) || attempt >= 5) throw classified;
      if (classified.retryAfterMs)
        await new Promise((r) => setTimeout(r, Math.min(classified.retryAfterMs ?? 0, 30_000)));
    }
  }
}

/** A write of more than one chunk: an upload session, then finish with the commit. */
export async function writeChunked(
  dbx: DropboxCalls,
  p: string,
  first: Buffer,
  second: Buffer,
  rest: AsyncIterator<Buffer>,
  sha: ReturnType<typeof createHash>,
  hasher: ContentHasher,
  commit: Record<string, unknown>,
  options: WriteOptions,
): Promise<unknown> {
  const started = await dbx.call(`upload_session/start ${p}`, () =>
    dbx.sdk.filesUploadSessionStart({ close: false, contents: first } as Parameters<
      Dropbox['filesUploadSessionStart']
    >[0]),
  );
  const sessionId = started.session_id;
  let offset = first.byteLength;
  for (let chunk: Buffer | undefined = second; chunk !== undefined;) {
    throwIfAborted(options.signal);
    sha.update(chunk);
    hasher.update(chunk);
    await appendChunk(dbx, sessionId, offset, chunk, options.signal);
    offset += chunk.byteLength;
    const next = await rest.next();
    chunk = next.done ? undefined : next.value;
  }
  throwIfAborted(options.signal);
  checkBody(dbx.name, p, options, offset, sha.digest('hex'));
  return dbx.call(`upload_session/finish ${p}`, () =>
    dbx.sdk.filesUploadSessionFinish({
      cursor: { session_id: sessionId, offset },
      commit,
      content_hash: hasher.hex(),
      contents: Buffer.alloc(0),
    } as unknown as Parameters<Dropbox['filesUploadSessionFinish']>[0]),
  );
}

/**
 * Write `body` at Dropbox path `dbxPath` (provider path `p`): one chunk is a small write
 * (batched when a batcher is given), more an upload session. Resolves with the metadata;
 * a failure of the upload (not of reading the body) is thrown as `refine` turns it.
 */
export async function uploadBody(
  dbx: DropboxCalls,
  batcher: CommitBatcher | undefined,
  chunkSize: number,
  dbxPath: string,
  p: string,
  body: Body,
  options: WriteOptions,
  refine: (e: unknown) => Promise<Error>,
): Promise<unknown> {
  const parts = rechunk(openBody(body), chunkSize)[Symbol.asyncIterator]();
  const sha = createHash('sha256');
  const hasher = new ContentHasher();
  const first = await parts.next();
  const firstChunk = first.done ? Buffer.alloc(0) : first.value;
  sha.update(firstChunk);
  hasher.update(firstChunk);
  const second = first.done ? { done: true as const, value: undefined } : await parts.next();
  throwIfAborted(options.signal);
  const commit = commitInfo(dbxPath, options);
  try {
    if (second.done) {
      checkBody(dbx.name, p, options, firstChunk.byteLength, sha.digest('hex'));
      const hash = hasher.hex();
      return await writeSmall(dbx, batcher, p, firstChunk, hash, commit, options.signal);
    }
    return await writeChunked(dbx, p, firstChunk, second.value, parts, sha, hasher, commit, options);
  } catch (e) {
    throw await refine(e);
  }
}
