/**
 * S3 writes above one part: a multipart upload, parts sent a few at a time while the body
 * is still being read and hashed; CompleteMultipartUpload carries the write's conditions
 * (If-None-Match / If-Match), and a failure or abort aborts the upload. Also the size and
 * SHA-256 checks every write makes, and where an object's SHA-256 is read back from.
 */
import type { createHash } from 'node:crypto';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  type HeadObjectCommandOutput,
  type PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { throwIfAborted } from '../../body.ts';
import { InvalidArgumentError, ProviderError, QuotaExceededError, TransientError } from '../../errors.ts';
import type { Entry, WriteOptions } from '../../provider.ts';
import { classifyS3 } from './errors.ts';

export const MIN_PART = 5 * 1024 * 1024;
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
