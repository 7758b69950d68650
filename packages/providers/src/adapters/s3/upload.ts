/**
 * S3 writes above one part: a multipart upload, parts sent a few at a time while the body
 * is still being read and hashed; CompleteMultipartUpload carries the write's conditions
 * (If-None-Match / If-Match), and a failure or abort aborts the upload. A write the caller
 * verifies, of known size, goes instead as one PutObject streaming its body. Also the size
 * and SHA-256 checks every write makes, and where an object's SHA-256 is read back from.
 */
import type { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  type HeadObjectCommandOutput,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { openBody, throwIfAborted } from '../../body.ts';
import { InvalidArgumentError, ProviderError, QuotaExceededError, TransientError } from '../../errors.ts';
import type { Body, Entry, WriteOptions } from '../../provider.ts';
import { classifyS3 } from './errors.ts';

export const MIN_PART = 5 * 1024 * 1024;
/**
 * Largest write sent as one streamed PutObject (S3 takes up to 5 GiB in one PUT; some
 * S3-compatible stores a little less): above it, a multipart upload. Below it, a write the
 * caller verifies, of declared size, is streamed whatever its size (a small one would
 * otherwise be copied into a part buffer first).
 */
export const MAX_STREAMED_PUT = 4 * 1024 * 1024 * 1024;
const MAX_PARTS = 10_000;
/** User metadata holding the object's SHA-256 (hex) when S3 keeps no whole-object checksum. */
export const SHA_META = 'weft-sha256';

/** x-amz-content-sha256 of a request whose payload is not part of its signature. */
export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';

/**
 * Give SigV4 the request's payload hash (hex SHA-256, or UNSIGNED_PAYLOAD) as the
 * x-amz-content-sha256 header: the SDK's signer uses a value found there instead of hashing
 * a buffered body itself (@smithy/signature-v4 getPayloadHash), issue #17.
 */
export function withPayloadHash(command: PutObjectCommand | UploadPartCommand, value: string): void {
  (command.middlewareStack as PutObjectCommand['middlewareStack']).add(
    (next) => async (args) => {
      const request = args.request as { headers?: Record<string, string> };
      if (request.headers) request.headers['x-amz-content-sha256'] = value;
      return next(args);
    },
    { step: 'build', name: 'weftPayloadHash' },
  );
}

/** What the multipart upload needs of the provider: its name, client, bucket and classifying send. */
export interface S3Calls {
  readonly name: string;
  readonly client: S3Client;
  readonly bucket: string;
  readonly partConcurrency: number;
  send<T>(
    p: string,
    signal: AbortSignal | undefined,
    run: (options: { abortSignal?: AbortSignal }) => Promise<T>,
    mustNotExist?: boolean,
  ): Promise<T>;
}

export function checkSize(expected: number | undefined, got: number, p: string): void {
  if (expected !== undefined && expected !== got) {
    throw new InvalidArgumentError(`expected ${expected} bytes for ${p}, received ${got}`);
  }
}

export function checkSha(expected: string | undefined, got: Buffer, p: string): void {
  if (expected !== undefined && expected.toLowerCase() !== got.toString('hex')) {
    throw new InvalidArgumentError(`SHA-256 of the bytes received for ${p} does not match the one given`);
  }
}

export function shaFromHead(head: HeadObjectCommandOutput): string | undefined {
  const meta = head.Metadata?.[SHA_META];
  if (meta && /^[0-9a-f]{64}$/.test(meta)) return meta;
  const sum = head.ChecksumSHA256;
  if (sum && head.ChecksumType !== 'COMPOSITE' && !sum.includes('-')) {
    const hex = Buffer.from(sum, 'base64').toString('hex');
    if (hex.length === 64) return hex;
  }
  return undefined;
}

export async function multipartUpload(
  s3: S3Calls,
  key: string,
  p: string,
  first: Buffer,
  second: Buffer,
  rest: AsyncIterator<Buffer>,
  /** Undefined when the caller verifies (WriteOptions.callerVerifies): parts go unsigned. */
  hash: ReturnType<typeof createHash> | undefined,
  options: WriteOptions,
  conditions: { IfNoneMatch?: string; IfMatch?: string },
): Promise<Entry> {
  const created = await s3.send(p, options.signal, (o) =>
    s3.client.send(
      new CreateMultipartUploadCommand({
        Bucket: s3.bucket,
        Key: key,
        ...(options.sha256 ? { Metadata: { [SHA_META]: options.sha256.toLowerCase() } } : {}),
      }),
      o,
    ),
  );
  const uploadId = created.UploadId;
  if (!uploadId) throw new TransientError(`${s3.name}: CreateMultipartUpload returned no UploadId`);
  const abort = new AbortController();
  const onOuterAbort = (): void => abort.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onOuterAbort, { once: true });
  const done: { PartNumber: number; ETag: string }[] = [];
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  let total = 0;
  const upload = (partNumber: number, data: Buffer): void => {
    const command = new UploadPartCommand({
      Bucket: s3.bucket,
      Key: key,
      UploadId: uploadId,
      PartNumber: partNumber,
      Body: data,
      ContentLength: data.byteLength,
    });
    if (!hash) withPayloadHash(command, UNSIGNED_PAYLOAD);
    const task = s3
      .send(p, abort.signal, (o) => s3.client.send(command, o))
      .then(
        (out) => {
          done.push({ PartNumber: partNumber, ETag: out.ETag ?? '' });
        },
        (e: unknown) => {
          failure ??= e;
          abort.abort(e);
        },
      );
    const tracked = task.finally(() => inFlight.delete(tracked));
    inFlight.add(tracked);
  };
  try {
    let partNumber = 0;
    for (let part: Buffer | undefined = first; part !== undefined;) {
      if (failure !== undefined) break;
      throwIfAborted(options.signal);
      partNumber += 1;
      if (partNumber > MAX_PARTS) throw new QuotaExceededError(`${s3.name}: more than ${MAX_PARTS} parts`);
      total += part.byteLength;
      upload(partNumber, part);
      while (inFlight.size >= s3.partConcurrency) await Promise.race(inFlight);
      let next: IteratorResult<Buffer>;
      if (part === first) {
        next = { done: false, value: second };
      } else {
        next = await rest.next();
      }
      if (!next.done) hash?.update(next.value);
      part = next.done ? undefined : next.value;
    }
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure;
    throwIfAborted(options.signal);
    checkSize(options.size, total, p);
    const sha = hash?.digest();
    if (sha) checkSha(options.sha256, sha, p);
    done.sort((a, b) => a.PartNumber - b.PartNumber);
    const out = await s3.send(
      p,
      options.signal,
      (o) =>
        s3.client.send(
          new CompleteMultipartUploadCommand({
            Bucket: s3.bucket,
            Key: key,
            UploadId: uploadId,
            MultipartUpload: { Parts: done },
            ...conditions,
          }),
          o,
        ),
      options.ifNotExists,
    );
    return {
      path: p,
      kind: 'file',
      size: total,
      modifiedMs: Date.now(),
      revision: out.ETag ?? '',
      ...(sha ? { hash: { algorithm: 'sha256', value: sha.toString('hex') } } : {}),
    };
  } catch (e) {
    abort.abort(e);
    await Promise.allSettled(inFlight);
    await s3.client
      .send(new AbortMultipartUploadCommand({ Bucket: s3.bucket, Key: key, UploadId: uploadId }))
      .catch(() => undefined);
    throw e instanceof ProviderError || (e instanceof Error && e.name === 'AbortError')
      ? e
      : classifyS3(e, s3.name, p);
  } finally {
    options.signal?.removeEventListener('abort', onOuterAbort);
  }
}

/**
 * A write whose caller verifies it (WriteOptions.callerVerifies, no sha256) and declares its
 * size: one PutObject whose body is the caller's stream, sent as it is produced — no part
 * buffers and no copy into them, and one request instead of one per part (issue #17: the
 * redundant tier's fragments). The payload goes unsigned (nothing hashes it here). Such a
 * caller hands its chunks over (WriteOptions.callerVerifies), so they go to the socket as
 * they are, which may hold them after the next is asked for. The body is counted against
 * the declared size; the chunk that completes it is held back until the body has ended, so
 * a body that is too long or too short fails the request before S3 has a whole object:
 * nothing is stored (InvalidArgumentError). Not retried here (the body is a stream;
 * maxAttempts is 1 anyway).
 */
export async function streamedPut(
  s3: S3Calls,
  key: string,
  p: string,
  body: Body,
  size: number,
  options: WriteOptions,
  conditions: { IfNoneMatch?: string; IfMatch?: string },
): Promise<Entry> {
  let mismatch: InvalidArgumentError | undefined;
  const refuse = (got: string): InvalidArgumentError =>
    (mismatch = new InvalidArgumentError(`${s3.name}: expected ${size} bytes for ${p}, received ${got}`));
  async function* counted(): AsyncGenerator<Uint8Array> {
    const it = openBody(body)[Symbol.asyncIterator]();
    let got = 0;
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      got += r.value.byteLength;
      if (got > size) throw refuse('more');
      if (got < size) {
        yield r.value;
        continue;
      }
      const last = r.value;
      for (;;) {
        const more = await it.next();
        if (more.done) break;
        if (more.value.byteLength > 0) throw refuse('more');
      }
      yield last;
      return;
    }
    if (got !== size) throw refuse(String(got));
  }
  const stream = Readable.from(counted(), { objectMode: false });
  // A failed body must abort the request: the socket would otherwise wait for the rest.
  const ac = new AbortController();
  const onOuterAbort = (): void => ac.abort(options.signal?.reason);
  options.signal?.addEventListener('abort', onOuterAbort, { once: true });
  stream.once('error', (e) => ac.abort(e));
  const put = new PutObjectCommand({
    Bucket: s3.bucket,
    Key: key,
    Body: stream,
    ContentLength: size,
    ...conditions,
  });
  withPayloadHash(put, UNSIGNED_PAYLOAD);
  try {
    const out = await s3.send(p, ac.signal, (o) => s3.client.send(put, o), options.ifNotExists);
    return { path: p, kind: 'file', size, modifiedMs: Date.now(), revision: out.ETag ?? '' };
  } catch (e) {
    if (mismatch) throw mismatch;
    throw e;
  } finally {
    options.signal?.removeEventListener('abort', onOuterAbort);
    stream.destroy();
  }
}
