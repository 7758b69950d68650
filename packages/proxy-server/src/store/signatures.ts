/**
 * rsync signatures of large content, stored in the object tier next to their object
 * (content-addressed, shared like the object) and named in the link file. A signature is
 * an aid, never required: one that cannot be made leaves the link file naming none, and
 * one asked for later is made then (signatureOf).
 */
import { createReadStream } from 'node:fs';
import type { Logger } from 'pino';
import { signature as rsyncSignature } from '@weft/rsync-wasm';
import { collect, type FsProvider, NotFoundError, type Provider } from '@weft/providers';
import type { EntryInfo } from '@weft/wire';
import { ApiError } from '../errors.ts';
import type { ProxyMetrics } from '../metrics.ts';
import { type Content, contentSize } from './content.ts';
import {
  decodeLinkFile,
  LINK_EXTENSION,
  type LinkFile,
  signatureBlockSize,
  signatureKey,
  signatureStrongLength,
} from './link-file.ts';

/**
 * A file's bytes, opened at the first read. The signature encoder awaits its set-up before
 * reading: a stream opened before that has no listener yet when its open fails (a staged
 * file removed meanwhile), and the unheard error ends the process.
 */
async function* fileBytes(file: string): AsyncIterable<Uint8Array> {
  yield* createReadStream(file) as AsyncIterable<Uint8Array>;
}

export interface SignatureDeps {
  readonly fs: FsProvider;
  readonly objects: Provider;
  readonly log: Logger;
  readonly metrics: ProxyMetrics;
  nsPath(userId: string, path: string): string;
  /** Keep an object from GC until the returned function is called. */
  pin(sha256: string): () => void;
  /** A local copy of an object (relay cache), held until `release`. */
  stageObject(sha256: string, size: number): Promise<{ file: string; release: () => void }>;
}

/**
 * Store the rsync signature of large content in the object tier next to its object
 * (content-addressed, shared like the object), unless it is there already. Written after
 * the object and before the link file that names it (link-file.md, write ordering). A
 * signature is an aid, never required: if it cannot be made the link file says null.
 */
export async function putSignature(
  d: SignatureDeps,
  sha256: string,
  c: Content,
): Promise<{ ref: NonNullable<LinkFile['signature']>; bytes?: Uint8Array } | undefined> {
  const blockSize = signatureBlockSize(contentSize(c));
  const ref = { object: signatureKey(sha256, blockSize), blockSize };
  try {
    try {
      await d.objects.stat(ref.object);
      return { ref };
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
    const source = 'bytes' in c ? c.bytes : fileBytes(c.file);
    const strongLength = signatureStrongLength(contentSize(c), blockSize);
    const bytes = await collect(rsyncSignature(source, { blockSize, strongLength }));
    await d.objects.write(ref.object, bytes, { size: bytes.byteLength });
    d.metrics.bytes.inc({ tier: 'object', direction: 'in' }, bytes.byteLength);
    return { ref, bytes };
  } catch (e) {
    d.log.warn({ err: e, sha256 }, 'rsync signature not stored');
    return undefined;
  }
}

/**
 * The rsync signature of a large file's current content (the one its link file names; made
 * and stored now for a link file that names none). Lets a client send a delta against the
 * server's version without keeping that version or its signature itself.
 */
export async function signatureOf(
  d: SignatureDeps,
  userId: string,
  entry: EntryInfo,
): Promise<{ bytes: Uint8Array; blockSize: number; sha256: string }> {
  if (entry.kind !== 'file' || entry.tier !== 'large' || !entry.sha256)
    throw new ApiError('NOT_FOUND', 'only large files have a signature');
  const link = decodeLinkFile(await collect(await d.fs.read(d.nsPath(userId, entry.path) + LINK_EXTENSION)));
  if (link.signature) {
    try {
      const bytes = await collect(await d.objects.read(link.signature.object));
      return { bytes, blockSize: link.signature.blockSize, sha256: link.sha256 };
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }
  const unpin = d.pin(link.sha256);
  const { file, release } = await d.stageObject(link.sha256, link.size);
  try {
    const made = await putSignature(d, link.sha256, { file, size: link.size });
    const blockSize = made?.ref.blockSize ?? signatureBlockSize(link.size);
    let bytes = made?.bytes;
    if (!bytes && made) bytes = await collect(await d.objects.read(made.ref.object));
    bytes ??= await collect(
      rsyncSignature(fileBytes(file), {
        blockSize,
        strongLength: signatureStrongLength(link.size, blockSize),
      }),
    );
    return { bytes, blockSize, sha256: link.sha256 };
  } finally {
    release();
    unpin();
  }
}

/**
 * The rsync signature of large content this server holds, by hash and size: the one stored
 * beside its object, or made now from the object (and stored). For a server-side diff the
 * client names its base version and sends no signature of it.
 */
export async function contentSignature(d: SignatureDeps, sha256: string, size: number): Promise<Uint8Array> {
  const blockSize = signatureBlockSize(size);
  try {
    return await collect(await d.objects.read(signatureKey(sha256, blockSize)));
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  const unpin = d.pin(sha256);
  const { file, release } = await d.stageObject(sha256, size);
  try {
    const made = await putSignature(d, sha256, { file, size });
    if (made?.bytes) return made.bytes;
    return await collect(
      rsyncSignature(fileBytes(file), {
        blockSize,
        strongLength: signatureStrongLength(size, blockSize),
      }),
    );
  } finally {
    release();
    unpin();
  }
}
