/**
 * Amazon S3 (or any S3-compatible store) through @aws-sdk/client-s3.
 *
 * Layout: provider path `a/b.txt` is key `<prefix>a/b.txt`; a folder made by mkdir is a
 * zero-byte marker object `<prefix>a/`; folders also exist implicitly through their content.
 * Revisions are ETags. Large writes are multipart uploads with parts sent in parallel
 * (bounded), aborted on any failure so no upload is left behind. Conditional writes use
 * If-None-Match: * and If-Match: <etag> on PutObject / CompleteMultipartUpload / DeleteObject.
 * The SDK's own retries are off: the retry wrapper is the one place that retries.
 */
import { createHash } from 'node:crypto';
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  type HeadObjectCommandOutput,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { openBody, readRange, rechunk, throwIfAborted } from '../body.ts';
import {
  AlreadyExistsError,
  InvalidArgumentError,
  NotFoundError,
  PreconditionFailedError,
  TransientError,
} from '../errors.ts';
import type { Features } from '../features.ts';
import { normalizeEntryPath, normalizePath } from '../paths.ts';
import type {
  Body,
  Entry,
  ListOptions,
  Provider,
  ReadOptions,
  RemoveOptions,
  TransferOptions,
  WriteOptions,
} from '../provider.ts';
import {
  checkSha,
  checkSize,
  MAX_STREAMED_PUT,
  MIN_PART,
  multipartUpload,
  type S3Calls,
  SHA_META,
  shaFromHead,
  streamedPut,
  UNSIGNED_PAYLOAD,
  withPayloadHash,
} from './s3/upload.ts';
import { classifyS3, InvalidRangeError } from './s3/errors.ts';

export { classifyS3 } from './s3/errors.ts';

export interface S3ProviderOptions {
  readonly bucket: string;
  /** Key prefix all paths live under (no leading slash); '' for the whole bucket. */
  readonly prefix?: string;
  readonly endpoint?: string;
  readonly region?: string;
  readonly forcePathStyle?: boolean;
  readonly credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Writes above this go multipart, in parts of this size. Default 8 MiB (S3 minimum 5 MiB). */
  readonly partSize?: number;
  /** Parts uploaded at once per write. Default 4. */
  readonly partConcurrency?: number;
  /** Extra SDK configuration (e.g. requestHandler). */
  readonly clientConfig?: Partial<S3ClientConfig>;
}

export class S3Provider implements Provider {
  readonly name: string;
  readonly features: Features;
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  private readonly partSize: number;
  private readonly partConcurrency: number;
  /** What the multipart upload uses of this provider. */
  private readonly calls: S3Calls;

  constructor(options: S3ProviderOptions) {
    this.bucket = options.bucket;
    const prefix = options.prefix ?? '';
    this.prefix = prefix === '' ? '' : normalizeEntryPath(prefix.replace(/\/+$/, '')) + '/';
    this.partSize = options.partSize ?? 8 * 1024 * 1024;
    if (this.partSize < MIN_PART) throw new RangeError(`partSize must be at least ${MIN_PART} bytes`);
    this.partConcurrency = Math.max(1, options.partConcurrency ?? 4);
    this.name = `s3:${this.bucket}/${this.prefix}`;
    this.client = new S3Client({
      region: options.region ?? 'us-east-1',
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      forcePathStyle: options.forcePathStyle ?? false,
      ...(options.credentials ? { credentials: options.credentials } : {}),
      maxAttempts: 1,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      ...options.clientConfig,
    });
    // The SDK's logger middleware builds a copy of every request's input and output with
    // sensitive fields masked whenever the logger has an info method — the default no-op
    // logger has one — only to discard it: ~6 % of a ranged read's CPU (issue #17). Off
    // unless a logger is configured.
    if (!options.clientConfig?.logger) this.client.middlewareStack.remove('loggerMiddleware');
    this.calls = {
      name: this.name,
      client: this.client,
      bucket: this.bucket,
      partConcurrency: this.partConcurrency,
      send: (p, signal, run, mustNotExist) => this.send(p, signal, run, mustNotExist),
    };
    this.features = {
      move: false,
      copy: 'files',
      changeFeed: false,
      conditionalWrite: true,
      rangeRead: true,
      caseSensitive: true,
      setModTime: false,
      maxSingleUploadBytes: this.partSize,
      hashAlgorithm: 'sha256',
      hashInListing: false,
      folders: 'marker',
      notes: {
        move: 'S3 has no rename; a move is copy + delete, left to the caller',
        copy: 'CopyObject, files up to 5 GiB; folders are not copied server-side',
        changeFeed: 'S3 event notifications need SQS/SNS, outside the S3 API',
        setModTime: 'LastModified is set by the server',
        hashInListing: 'ListObjectsV2 returns only ETags; stat reads the SHA-256 checksum or metadata',
        folders:
          'mkdir writes a zero-byte "name/" marker; folders also exist through their content; a file and a folder of the same name are not prevented',
      },
    };
  }

  private key(p: string): string {
    return this.prefix + p;
  }

  private pathOf(key: string): string | undefined {
    if (!key.startsWith(this.prefix)) return undefined;
    const rel = key.slice(this.prefix.length).replace(/\/$/, '');
    if (rel === '') return undefined;
    try {
      return normalizePath(rel) === rel ? rel : undefined;
    } catch {
      return undefined; // written by another tool with a name our rules refuse: not ours to show
    }
  }

  async *list(dir: string, options: ListOptions = {}): AsyncIterable<Entry> {
    const d = normalizePath(dir);
    const keyPrefix = d === '' ? this.prefix : this.key(d) + '/';
    const seenDirs = new Set<string>();
    let token: string | undefined;
    let first = true;
    do {
      throwIfAborted(options.signal);
      const page = await this.send(d, options.signal, (o) =>
        this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: keyPrefix,
            Delimiter: options.recursive ? undefined : '/',
            ContinuationToken: token,
            MaxKeys: options.pageSize,
          }),
          o,
        ),
      );
      if (first && d !== '' && (page.KeyCount ?? 0) === 0)
        throw new NotFoundError(`${this.name}: folder not found: ${d}`);
      first = false;
      for (const cp of page.CommonPrefixes ?? []) {
        const p = cp.Prefix === undefined ? undefined : this.pathOf(cp.Prefix);
        if (p !== undefined && !seenDirs.has(p)) {
          seenDirs.add(p);
          yield { path: p, kind: 'dir', size: 0, modifiedMs: 0, revision: '' };
        }
      }
      for (const obj of page.Contents ?? []) {
        if (obj.Key === undefined || obj.Key === keyPrefix) continue;
        const p = this.pathOf(obj.Key);
        if (p === undefined) continue;
        if (options.recursive) {
          // Folders implied by the key, each once.
          const parts = p.split('/');
          const base = d === '' ? 0 : d.split('/').length;
          for (let i = base + 1; i < parts.length; i++) {
            const dirPath = parts.slice(0, i).join('/');
            if (!seenDirs.has(dirPath)) {
              seenDirs.add(dirPath);
              yield { path: dirPath, kind: 'dir', size: 0, modifiedMs: 0, revision: '' };
            }
          }
        }
        if (obj.Key.endsWith('/')) {
          if (!seenDirs.has(p)) {
            seenDirs.add(p);
            yield {
              path: p,
              kind: 'dir',
              size: 0,
              modifiedMs: obj.LastModified?.getTime() ?? 0,
              revision: '',
            };
          }
          continue;
        }
        yield {
          path: p,
          kind: 'file',
          size: obj.Size ?? 0,
          modifiedMs: obj.LastModified?.getTime() ?? 0,
          revision: obj.ETag ?? '',
        };
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  private fileEntry(p: string, head: HeadObjectCommandOutput): Entry {
    const sha = shaFromHead(head);
    return {
      path: p,
      kind: 'file',
      size: head.ContentLength ?? 0,
      modifiedMs: head.LastModified?.getTime() ?? 0,
      revision: head.ETag ?? '',
      ...(sha ? { hash: { algorithm: 'sha256', value: sha } } : {}),
    };
  }

  private async headFile(p: string, signal?: AbortSignal): Promise<HeadObjectCommandOutput | undefined> {
    try {
      return await this.send(p, signal, (o) =>
        this.client.send(
          new HeadObjectCommand({ Bucket: this.bucket, Key: this.key(p), ChecksumMode: 'ENABLED' }),
          o,
        ),
      );
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  private async isFolder(p: string, signal?: AbortSignal): Promise<boolean> {
    const page = await this.send(p, signal, (o) =>
      this.client.send(
        new ListObjectsV2Command({ Bucket: this.bucket, Prefix: this.key(p) + '/', MaxKeys: 1 }),
        o,
      ),
    );
    return (page.KeyCount ?? 0) > 0;
  }

  async stat(path: string, options: { signal?: AbortSignal } = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    const head = await this.headFile(p, options.signal);
    if (head) return this.fileEntry(p, head);
    if (await this.isFolder(p, options.signal))
      return { path: p, kind: 'dir', size: 0, modifiedMs: 0, revision: '' };
    throw new NotFoundError(`${this.name}: not found: ${p}`);
  }

  async read(path: string, options: ReadOptions = {}): Promise<AsyncIterable<Uint8Array>> {
    const p = normalizeEntryPath(path);
    const { offset, length } = readRange(options);
    if (length === 0) {
      if (!(await this.headFile(p, options.signal))) throw new NotFoundError(`${this.name}: no file at ${p}`);
      return (async function* () {})();
    }
    const range =
      offset === 0 && length === undefined
        ? undefined
        : `bytes=${offset}-${length === undefined ? '' : offset + length - 1}`;
    try {
      const out = await this.send(p, options.signal, (o) =>
        this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.key(p), Range: range }), o),
      );
      const body = out.Body as AsyncIterable<Uint8Array> | undefined;
      if (!body) return (async function* () {})();
      const name = this.name;
      return (async function* () {
        try {
          yield* body;
        } catch (e) {
          throw classifyS3(e, name, p);
        }
      })();
    } catch (e) {
      if (e instanceof InvalidRangeError) return (async function* () {})();
      throw e;
    }
  }

  async write(path: string, body: Body, options: WriteOptions = {}): Promise<Entry> {
    const p = normalizeEntryPath(path);
    const key = this.key(p);
    // The caller checks its own checksums (fragments of the redundant tier): no SHA-256 of
    // the body here, and the payload goes unsigned — each byte hashed once less per request
    // and once less for the object (issue #17; docs/providers/s3.md).
    const verified = options.callerVerifies && options.sha256 === undefined;
    if (verified && options.size !== undefined && options.size > 0 && options.size <= MAX_STREAMED_PUT) {
      // Checked by the caller, size declared: one streamed PutObject, no copies (issue #17).
      return streamedPut(this.calls, key, p, body, options.size, options, {
        IfNoneMatch: options.ifNotExists ? '*' : undefined,
        IfMatch: options.ifRevision,
      });
    }
    const hash = verified ? undefined : createHash('sha256');
    const parts = rechunk(openBody(body), this.partSize)[Symbol.asyncIterator]();
    const firstPart = await parts.next();
    const first = firstPart.done ? Buffer.alloc(0) : firstPart.value;
    hash?.update(first);
    const second = firstPart.done ? { done: true as const, value: undefined } : await parts.next();
    throwIfAborted(options.signal);
    const conditions = {
      IfNoneMatch: options.ifNotExists ? '*' : undefined,
      IfMatch: options.ifRevision,
    };
    if (second.done) {
      checkSize(options.size, first.byteLength, p);
      const sha = hash?.digest();
      if (sha) checkSha(options.sha256, sha, p);
      const put = new PutObjectCommand({
        Bucket: this.bucket,
        Key: key,
        Body: first,
        ContentLength: first.byteLength,
        ...(sha
          ? { ChecksumSHA256: sha.toString('base64'), Metadata: { [SHA_META]: sha.toString('hex') } }
          : {}),
        ...conditions,
      });
      // The signature's payload hash is this same SHA-256: given, so SigV4 does not hash the
      // body a second time (issue #17).
      withPayloadHash(put, sha ? sha.toString('hex') : UNSIGNED_PAYLOAD);
      const out = await this.send(p, options.signal, (o) => this.client.send(put, o), options.ifNotExists);
      return {
        path: p,
        kind: 'file',
        size: first.byteLength,
        modifiedMs: Date.now(),
        revision: out.ETag ?? '',
        ...(sha ? { hash: { algorithm: 'sha256', value: sha.toString('hex') } } : {}),
      };
    }
    return multipartUpload(this.calls, key, p, first, second.value, parts, hash, options, conditions);
  }

  async remove(path: string, options: RemoveOptions = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    const head = await this.headFile(p, options.signal);
    if (head) {
      await this.send(p, options.signal, (o) =>
        this.client.send(
          new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(p), IfMatch: options.ifRevision }),
          o,
        ),
      );
      return;
    }
    if (options.ifRevision !== undefined) throw new NotFoundError(`${this.name}: not found: ${p}`);
    // A folder: delete everything under it, 1000 keys per request.
    let batch: string[] = [];
    let any = false;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      const out = await this.send(p, options.signal, (o) =>
        this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
          }),
          o,
        ),
      );
      const failed = out.Errors?.[0];
      if (failed) throw new TransientError(`${this.name}: could not delete ${failed.Key}: ${failed.Message}`);
      batch = [];
    };
    let token: string | undefined;
    do {
      const page = await this.send(p, options.signal, (o) =>
        this.client.send(
          new ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: this.key(p) + '/',
            ContinuationToken: token,
          }),
          o,
        ),
      );
      for (const obj of page.Contents ?? []) {
        if (!obj.Key) continue;
        any = true;
        batch.push(obj.Key);
        if (batch.length === 1000) await flush();
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    await flush();
    if (!any) throw new NotFoundError(`${this.name}: not found: ${p}`);
  }

  async mkdir(path: string, options: { signal?: AbortSignal } = {}): Promise<void> {
    const p = normalizeEntryPath(path);
    if (await this.headFile(p, options.signal))
      throw new AlreadyExistsError(`${this.name}: a file exists at ${p}`);
    await this.send(p, options.signal, (o) =>
      this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: this.key(p) + '/',
          Body: new Uint8Array(0),
          ContentLength: 0,
        }),
        o,
      ),
    );
  }

  async copy(from: string, to: string, options: TransferOptions = {}): Promise<Entry> {
    const f = normalizeEntryPath(from);
    const t = normalizeEntryPath(to);
    const src = await this.headFile(f, options.signal);
    if (!src) {
      if (await this.isFolder(f, options.signal)) {
        throw new InvalidArgumentError(
          `${this.name}: folders cannot be copied server-side (features.copy = 'files')`,
        );
      }
      throw new NotFoundError(`${this.name}: not found: ${f}`);
    }
    if (f === t) throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    // Not every S3 implementation honours If-None-Match on CopyObject: check first as well.
    if (!options.overwrite && (await this.headFile(t, options.signal))) {
      throw new AlreadyExistsError(`${this.name}: ${t} exists`);
    }
    const out = await this.send(
      t,
      options.signal,
      (o) =>
        this.client.send(
          new CopyObjectCommand({
            Bucket: this.bucket,
            Key: this.key(t),
            CopySource: `${this.bucket}/${encodeURIComponent(this.key(f)).replace(/%2F/g, '/')}`,
            CopySourceIfMatch: src.ETag,
            MetadataDirective: 'COPY',
            ...(options.overwrite ? {} : { IfNoneMatch: '*' }),
          }),
          o,
        ),
      !options.overwrite,
    );
    const sha = shaFromHead(src);
    return {
      path: t,
      kind: 'file',
      size: src.ContentLength ?? 0,
      modifiedMs: out.CopyObjectResult?.LastModified?.getTime() ?? Date.now(),
      revision: out.CopyObjectResult?.ETag ?? src.ETag ?? '',
      ...(sha ? { hash: { algorithm: 'sha256', value: sha } } : {}),
    };
  }

  async close(): Promise<void> {
    this.client.destroy();
  }

  /** Run one SDK call, classifying any failure into the contract's errors. */
  private async send<T>(
    p: string,
    signal: AbortSignal | undefined,
    run: (options: { abortSignal?: AbortSignal }) => Promise<T>,
    mustNotExist = false,
  ): Promise<T> {
    try {
      return await run(signal ? { abortSignal: signal } : {});
    } catch (e) {
      if (signal?.aborted) throw e;
      const classified = classifyS3(e, this.name, p);
      // S3 answers a failed If-None-Match: * with 412; for the contract that is AlreadyExists.
      if (mustNotExist && classified instanceof PreconditionFailedError) {
        throw new AlreadyExistsError(`${this.name}: ${p} exists`, { cause: e });
      }
      throw classified;
    }
  }
}
