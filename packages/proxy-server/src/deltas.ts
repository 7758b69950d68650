/**
 * Deltas both ways (docs/formats/api.md "Deltas"), as a service the routes call:
 *  - upload: a delta container against content the caller holds is patched, as its body
 *    arrives, into a temporary file (capped at the declared size, its SHA-256 checked),
 *    and the result written through the scheduler like any other write;
 *  - download: the delta of a file against the client's signature, streamed from a
 *    temporary file (delta-io.ts);
 *  - the rsync signature of a large file's current version (a base for an upload).
 */
import * as fsp from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { type OldFileReader, parseSignature, type Signature } from '@weft/rsync-wasm';
import { openOldFile, patchToFile } from '@weft/rsync-wasm/node';
import type { EntryInfo, OpResult } from '@weft/wire';
import { deltaDownload, type DeltaLimits, openDeltaUpload } from './delta-io.ts';
import { ApiError } from './errors.ts';
import type { OpScheduler } from './scheduler.ts';
import { checkNewPath, type HybridStore, type Writer } from './store/hybrid.ts';

export interface DeltaUploadRequest {
  readonly path: string;
  readonly baseRevision: string | null | undefined;
  readonly mtimeMs: number;
  /** Contents sent here whose answer never came, comma-separated (DeltaUploadQuery.own). */
  readonly own?: string | undefined;
}

export class DeltaService {
  constructor(private readonly o: { store: HybridStore; scheduler: OpScheduler; limits: DeltaLimits }) {}

  /** The rsync signature of a large file's current version, and the SHA-256 it describes. */
  signature(userId: string, e: EntryInfo): Promise<{ bytes: Uint8Array; sha256: string }> {
    return this.o.store.signatureOf(userId, e);
  }

  /**
   * A delta container (header, payload, CRC) of `entry` against the client's signature
   * of its version `baseSha256`, streamed from a temporary file.
   */
  download(
    userId: string,
    entry: EntryInfo & { sha256: string },
    sig: Signature,
    baseSha256: string,
  ): Promise<{ length: number; body: Readable }> {
    return deltaDownload(this.o.store, userId, entry, sig, baseSha256);
  }

  /**
   * Server-side diff: the delta container of `entry` against the client's version
   * `baseSha256`, from the signature the server holds of that version — the client sends
   * none. The base must be large content the caller holds or held (DELTA_BASE_UNKNOWN
   * otherwise: the client sends its signature instead).
   */
  async serverDiff(
    userId: string,
    entry: EntryInfo & { sha256: string },
    baseSha256: string,
  ): Promise<{ length: number; body: Readable }> {
    const { store } = this.o;
    const found = await store.findContent(userId, entry.path, baseSha256);
    const size = found?.objectSize ?? (found?.entry?.tier === 'large' ? found.entry.size : undefined);
    if (size === undefined)
      throw new ApiError(
        'DELTA_BASE_UNKNOWN',
        'the server does not hold this base version for you; send its signature (POST /v1/files/delta)',
      );
    const sig = parseSignature(await store.contentSignature(baseSha256, size));
    return deltaDownload(store, userId, entry, sig, baseSha256);
  }

  /**
   * Apply an uploaded delta container at `q.path`: the sizes it declares are checked
   * before its payload is read, its base must be content the caller holds
   * (DELTA_BASE_UNKNOWN otherwise), the quota is checked against the declared target size,
   * and the patched result must match the declared size and SHA-256 (HASH_MISMATCH).
   */
  async upload(
    w: Writer,
    q: DeltaUploadRequest,
    body: AsyncIterable<Uint8Array>,
    contentLength: number | undefined,
  ): Promise<OpResult> {
    const { store, scheduler, limits } = this.o;
    checkNewPath(q.path);
    const { header: c, delta } = await openDeltaUpload(body, contentLength, limits);
    const found = await store.findContent(w.userId, q.path, c.baseSha256);
    if (!found)
      throw new ApiError(
        'DELTA_BASE_UNKNOWN',
        'the server does not have the base content; upload the whole file',
      );
    // The patch is capped at the declared target size, so the quota is checked before it runs.
    await store.quota.check(w.userId, await store.growthAt(w.userId, q.path, c.targetSize));
    const base = await this.openBase(w.userId, found, c.baseSha256);
    const tmp = store.tempFile();
    try {
      // Capped at the declared size, hashed as it is written: no second pass over the file.
      const patched = await patchToFile(base.old, delta, tmp, { maxOutputBytes: c.targetSize });
      await base.release();
      if (patched.size !== c.targetSize || patched.sha256 !== c.targetSha256)
        throw new ApiError('HASH_MISMATCH', 'the patched result does not match the target size and SHA-256');
      const size = patched.size;
      return await scheduler.submit({
        namespace: w.userId,
        paths: [q.path],
        bytes: size,
        run: () =>
          store.writeFile(
            w,
            q.path,
            { file: tmp, size },
            c.targetSha256,
            q.mtimeMs,
            q.baseRevision,
            true,
            q.own?.split(','),
          ),
      });
    } finally {
      await base.release();
      await fsp.rm(tmp, { force: true });
    }
  }

  /**
   * The base content of a delta: a small file's bytes, or a large file's (or held
   * object's) staged copy read in place; `release` (idempotent) unpins and closes it.
   */
  private async openBase(
    userId: string,
    found: { entry?: EntryInfo; objectSize?: number },
    baseSha256: string,
  ): Promise<{ old: OldFileReader | Uint8Array; release: () => Promise<void> }> {
    const { store } = this.o;
    const entry = found.entry;
    if (entry && entry.tier !== 'large')
      return { old: await store.readAll(userId, entry), release: async () => undefined };
    const staged = await store.stageObject(baseSha256, entry?.size ?? found.objectSize ?? 0);
    let file;
    try {
      file = await openOldFile(staged.file);
    } catch (e) {
      staged.release();
      throw e;
    }
    let released = false;
    return {
      old: file,
      release: async () => {
        if (released) return;
        released = true;
        await file.close().catch(() => undefined);
        staged.release();
      },
    };
  }
}
