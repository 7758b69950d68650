/**
 * The hybrid store's object tier writes: a large content uploaded as an immutable object
 * named by its SHA-256 (deduplicated), then its link file written on the filesystem tier
 * (steps 1 and 2 of the write order in hybrid.ts; the caller records step 3).
 */
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import { type FsProvider, NotFoundError, type Provider } from '@weft/providers';
import type { OpResult } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { ProxyMetrics } from '../metrics.ts';
import { chunkList, type Content, contentSize } from './content.ts';
import { ignoreNotFound } from './ignore-not-found.ts';
import { encodeLinkFile, LINK_EXTENSION, LINK_VERSION, type LinkFile, objectKey } from './link-file.ts';
import type { EntryRow, MetadataStore } from './metadata.ts';
import { putSignature, type SignatureDeps } from './signatures.ts';

/** What the object tier writes need of the store. */
export interface ObjectTierDeps {
  readonly fs: FsProvider;
  readonly objects: Provider;
  readonly meta: MetadataStore;
  readonly metrics: ProxyMetrics;
  /** Bandwidth samples for the scheduler's estimate (Eq. 4). */
  readonly onObjectTransfer: (bytes: number, ms: number) => void;
  readonly now: () => number;
  readonly signatures: SignatureDeps;
}

/** Upload content to the object tier unless an object with that hash exists. */
export async function putObject(d: ObjectTierDeps, sha256: string, c: Content): Promise<void> {
  const size = contentSize(c);
  const existing = await d.meta.getObject(sha256);
  if (existing) {
    try {
      await d.objects.stat(objectKey(sha256));
      return; // dedup: a copy is a new reference, not a new upload
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }
  const started = performance.now();
  const body = 'bytes' in c ? c.bytes : () => createReadStream(c.file) as AsyncIterable<Uint8Array>;
  await d.objects.write(objectKey(sha256), body, { size, sha256 });
  const ms = performance.now() - started;
  d.onObjectTransfer(size, ms);
  d.metrics.transferSeconds.observe({ kind: 'object-put' }, ms / 1000);
  d.metrics.bytes.inc({ tier: 'object', direction: 'in' }, size);
  await d.meta.addObject(sha256, size, d.now());
}

/**
 * A large file stored at namespace path `ns`: its object uploaded (with its rsync signature),
 * then its link file written, and a small file it replaces removed. Returns the index row
 * to record. The caller pins `sha256` meanwhile (GC must not take the object before the row).
 */
export async function writeLargeFile(
  d: ObjectTierDeps,
  ns: string,
  path: string,
  content: Content,
  sha256: string,
  mtimeMs: number,
  before: EntryRow | undefined,
): Promise<Omit<EntryRow, 'revision'>> {
  const size = contentSize(content);
  await putObject(d, sha256, content);
  const signature = (await putSignature(d.signatures, sha256, content))?.ref ?? null;
  const link: LinkFile = {
    weftLink: LINK_VERSION,
    sha256,
    size,
    mtimeMs,
    object: objectKey(sha256),
    chunks: await chunkList(content),
    signature,
  };
  const e = await d.fs.write(ns + LINK_EXTENSION, encodeLinkFile(link), { modifiedMs: mtimeMs });
  if (before?.tier === 'small') await d.fs.remove(ns).catch(ignoreNotFound);
  return { path, kind: 'file', size, mtimeMs, sha256, tier: 'large', fsRevision: e.revision };
}

/** What linkObject needs of the store. */
export interface LinkObjectDeps {
  readonly meta: MetadataStore;
  /** Content of at least this many bytes belongs in the object tier. */
  readonly smallFileBytes: number;
  pin(sha256: string): () => void;
  stageObject(sha256: string, size: number): Promise<{ file: string; release: () => void }>;
  /** The write of the link's target path with this content (its SHA-256 already known when `known`). */
  writeFile(content: Content, known: boolean): Promise<OpResult>;
}

/**
 * Make an existing object current at a path (dedup commit: no bytes sent): through the
 * single write, its bytes (small) or its staged file (large) as the content.
 */
export async function linkObject(
  d: LinkObjectDeps,
  userId: string,
  sha256: string,
  size: number,
): Promise<OpResult> {
  // Only content this user has held itself may be linked (uploaded, or received into its
  // namespace through a share): a hash alone proves nothing. An object that exists but is
  // another user's, one of another size and one that does not exist all get the same
  // answer, so the answer says nothing about other users' content.
  const held = await d.meta.userLargeContent(userId, sha256);
  if (held === undefined || held !== size || !(await d.meta.getObject(sha256)))
    throw new ApiError('OBJECT_UNKNOWN', 'the server has no object with that SHA-256 and size; upload it');
  const unpin = d.pin(sha256);
  try {
    const { file, release } = await d.stageObject(sha256, size);
    try {
      if (size < d.smallFileBytes) return await d.writeFile({ bytes: await fsp.readFile(file) }, true);
      return await d.writeFile({ file, size }, true);
    } finally {
      release();
    }
  } finally {
    unpin();
  }
}
