/**
 * The hybrid store's reads (HybridStore.openRead, stageObject): a large file through the
 * relay cache (or a range of it straight from the object tier), a small one from its pack
 * when its filesystem-tier copy may have been dropped, else from the filesystem tier.
 */
import { createReadStream } from 'node:fs';
import type { FsProvider, Provider } from '@weft/providers';
import type { EntryInfo } from '@weft/wire';
import type { ProxyMetrics } from '../metrics.ts';
import { objectKey } from './link-file.ts';
import { readFsCopy } from './pack-stub.ts';
import type { RelayCache } from './relay-cache.ts';

/** What the reads need of the store. */
export interface ReadDeps {
  readonly fs: FsProvider;
  readonly objects: Provider;
  readonly relay: RelayCache;
  readonly metrics: ProxyMetrics;
  nsPath(userId: string, path: string): string;
  /** HybridStoreOptions.readPacked. */
  readonly readPacked?:
    | ((sha256: string, range: { start: number; end: number } | undefined) => Promise<Uint8Array | undefined>)
    | undefined;
  /** HybridStoreOptions.packedStub. */
  readonly packedStub?:
    | ((bytes: Uint8Array) => Promise<{ sha256: string; size: number; mtimeMs: number } | undefined>)
    | undefined;
}

/** Pin a local copy of an object (relay cache). */
export async function stageObject(
  d: Pick<ReadDeps, 'relay' | 'metrics'>,
  sha256: string,
  size: number,
): Promise<{ file: string; release: () => void }> {
  const before = d.relay.stats.misses;
  const got = await d.relay.acquire(sha256, objectKey(sha256), size);
  d.metrics.relayLookups.inc({ result: d.relay.stats.misses > before ? 'miss' : 'hit' });
  const s = d.relay.stats;
  d.metrics.relayHitRatio.set(s.hits / Math.max(1, s.hits + s.misses));
  d.metrics.relayBytes.set(s.bytes);
  return got;
}

/** A readable byte range of a file; large files come through the relay cache. */
export async function openRead(
  d: ReadDeps,
  userId: string,
  entry: EntryInfo,
  range: { start: number; end: number } | undefined,
): Promise<{ stream: AsyncIterable<Uint8Array>; release: () => void }> {
  if (entry.tier === 'large' && entry.sha256) {
    // A range of an object the relay cache does not hold is read from the object tier
    // directly: staging a many-GiB object to serve a few bytes of it costs its whole size
    // in time and disk (and lets a client make the server fetch any object it can name).
    if (range && !(await d.relay.has(entry.sha256))) {
      const stream = await d.objects.read(objectKey(entry.sha256), {
        offset: range.start,
        length: range.end - range.start + 1,
      });
      return { stream, release: () => undefined };
    }
    const { file, release } = await stageObject(d, entry.sha256, entry.size);
    const stream = createReadStream(file, range ? { start: range.start, end: range.end } : {});
    stream.once('close', release);
    return { stream, release };
  }
  const packed = entry.sha256 ? await d.readPacked?.(entry.sha256, range) : undefined;
  if (packed) return { stream: oneChunk(packed), release: () => undefined };
  const ns = d.nsPath(userId, entry.path);
  const { packedStub, readPacked } = d;
  // A stub the pack index does not know is resolved from its pack, never served (pack-stub.ts).
  const stream =
    packedStub && readPacked
      ? await readFsCopy({ fs: d.fs, packedStub, readPacked }, ns, entry, range)
      : await d.fs.read(ns, range ? { offset: range.start, length: range.end - range.start + 1 } : {});
  return { stream, release: () => undefined };
}

async function* oneChunk(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}
