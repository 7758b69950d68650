/**
 * The receiver's session state and content frames turned into objects: a session's batches,
 * each file's spooled part (pieces written at their offsets as they arrive, in any order),
 * and the assembly of a complete part into a cache object — reassembled whole content
 * checked against its SHA-256, or a delta container patched against the cached basis.
 * Also the per-path locks of a batch's files and the clean-up of a finished batch.
 * The frame handling (hello, batch, done, requests, results) is receiver.ts.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import type WebSocket from 'ws';
import { openOldFile, patchToFile } from '@weft/rsync-wasm/node';
import { decodeDeltaContainer } from '@weft/wire/delta-container';
import { decodeTransferBlock } from '@weft/wire/transfer-block';
import type { PeerCache } from './cache.ts';
import type { FileMeta, Verdict } from './compare.ts';
import type { DestinationMessage, ResultCode } from './frames.ts';

export interface Part {
  readonly kind: 'whole' | 'delta';
  readonly file: string;
  handle: Promise<fsp.FileHandle> | undefined;
  readonly offsets: Set<number>;
  covered: number;
  total: number | undefined;
  finishing: boolean;
}

export interface BatchState {
  readonly id: number;
  readonly files: FileMeta[];
  verdicts: Verdict[] | undefined;
  readonly signatures: Map<number, Uint8Array>;
  readonly results: Map<number, DestinationMessage>;
  readonly parts: Map<number, Part>;
  /** Files (by index) whose content arrived and is being committed or is committed. */
  readonly taken: Set<number>;
  readonly prepared: Promise<void>;
  /** Resolves each file's path lock. */
  readonly release: Map<number, () => void>;
}

export interface Session {
  readonly id: string;
  readonly peer: string;
  readonly dir: string;
  socket: WebSocket | undefined;
  readonly acked: Set<number>;
  readonly seqBatch: Map<number, number>;
  readonly batches: Map<number, BatchState>;
}

export class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly limit: number) {}
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((r) => this.waiting.push(r));
    this.active += 1;
    try {
      return await fn();
    } finally {
      this.active -= 1;
      this.waiting.shift()?.();
    }
  }
}

export class FileFailure extends Error {
  constructor(
    readonly code: ResultCode,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Write one piece (a transfer block) of file `i` into its part, creating the part on the
 * first piece. Returns the part and its total size when this piece completed it (once),
 * else undefined. `limit` bounds where a piece may end.
 */
export async function addPiece(
  b: BatchState,
  dir: string,
  i: number,
  kind: 'whole' | 'delta',
  payload: Uint8Array,
  file: FileMeta,
  limit: number,
): Promise<{ part: Part; total: number } | undefined> {
  const block = decodeTransferBlock(payload);
  let part = b.parts.get(i);
  if (!part) {
    if (b.taken.has(i)) return undefined; // already complete: a late duplicate
    const path = nodePath.join(dir, `${b.id}-${i}.${kind}`);
    // Created synchronously: pieces of one file arrive concurrently.
    const handle = fsp.mkdir(dir, { recursive: true }).then(() => fsp.open(path, 'w+'));
    handle.catch(() => undefined);
    part = { kind, file: path, handle, offsets: new Set(), covered: 0, total: undefined, finishing: false };
    b.parts.set(i, part);
  }
  if (part.kind !== kind) throw new FileFailure('FORMAT', `${file.path}: whole and delta pieces mixed`);
  const end = block.offset + block.payload.byteLength;
  if (end > limit) throw new FileFailure('FORMAT', `${file.path}: piece ends at ${end}, beyond ${limit}`);
  if (block.last) part.total = end;
  if (part.offsets.has(block.offset) || !part.handle) return undefined;
  part.offsets.add(block.offset);
  await (await part.handle).write(block.payload, 0, block.payload.byteLength, block.offset);
  part.covered += block.payload.byteLength;
  const total = kind === 'whole' ? file.size : part.total;
  if (total !== undefined && part.covered >= total && !part.finishing) {
    part.finishing = true;
    b.taken.add(i);
    return { part, total };
  }
  return undefined;
}

/** Turn a complete spooled part into the file's object (checked, atomic). */
export async function assemblePart(
  cache: PeerCache,
  maxDeltaBytes: number,
  part: Part,
  file: FileMeta,
  verdict: Verdict,
  total: number,
): Promise<string> {
  const handle = part.handle;
  part.handle = undefined;
  if (handle) {
    const h = await handle;
    await h.sync();
    await h.close();
  }
  if (part.kind === 'whole') {
    await fsp.truncate(part.file, total);
    const tmp = cache.tempPath();
    await fsp.rename(part.file, tmp);
    const got = await hashFile(tmp);
    if (got.sha256 !== file.sha256 || got.size !== file.size) {
      await fsp.rm(tmp, { force: true });
      throw new FileFailure('CHECKSUM', `${file.path}: reassembled content does not match`);
    }
    return cache.adoptFile(tmp, file.sha256);
  }
  if (verdict.verdict !== 'changed') throw new FileFailure('FORMAT', 'delta for an unchanged file');
  const bytes = (await fsp.readFile(part.file)).subarray(0, total);
  await fsp.rm(part.file, { force: true });
  const c = decodeDeltaContainer(bytes, { maxRawBytes: maxDeltaBytes });
  if (c.baseSha256 !== verdict.basisSha256)
    throw new FileFailure('BASIS', `${file.path}: delta against another basis`);
  if (c.targetSha256 !== file.sha256 || c.targetSize !== file.size)
    throw new FileFailure('CHECKSUM', `${file.path}: delta produces another content than announced`);
  const old = await openOldFile(cache.objectPath(c.baseSha256));
  const tmp = cache.tempPath();
  let patched: { size: number; sha256: string };
  try {
    // Hashed as written and fsynced (it is moved into place next); removed on failure.
    patched = await patchToFile(old, c.delta, tmp, { maxOutputBytes: c.targetSize, sync: true });
  } catch (e) {
    throw new FileFailure('BASIS', `${file.path}: patch failed: ${(e as Error).message}`);
  } finally {
    await old.close();
  }
  if (patched.sha256 !== file.sha256 || patched.size !== file.size) {
    await fsp.rm(tmp, { force: true });
    throw new FileFailure('CHECKSUM', `${file.path}: patched content does not match`);
  }
  return cache.adoptFile(tmp, file.sha256);
}

async function hashFile(file: string): Promise<{ sha256: string; size: number }> {
  const h = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(file)) {
    h.update(chunk as Buffer);
    size += (chunk as Buffer).byteLength;
  }
  return { sha256: h.digest('hex'), size };
}

/**
 * Per-path order across batches: each file waits for the file in flight at its path before
 * it (`waits`); `release` (by index) lets the next one go.
 */
export function lockPaths(
  pathBusy: Map<string, Promise<void>>,
  metas: readonly FileMeta[],
): { release: Map<number, () => void>; waits: Promise<void>[] } {
  const release = new Map<number, () => void>();
  const waits: Promise<void>[] = [];
  for (const [i, f] of metas.entries()) {
    const before = pathBusy.get(f.path);
    if (before) waits.push(before);
    const done = new Promise<void>((r) => release.set(i, r));
    const chained = (before ?? Promise.resolve()).then(() => done);
    pathBusy.set(f.path, chained);
    void chained.then(() => {
      if (pathBusy.get(f.path) === chained) pathBusy.delete(f.path);
    });
  }
  return { release, waits };
}

/**
 * A batch is over (done, or its compare failed): forget it and its acks, drop its unfinished
 * parts, unpin the bases of changed files that never arrived, release its path locks.
 */
export function dropBatch(cache: PeerCache, s: Session, id: number): void {
  const b = s.batches.get(id);
  if (!b) return;
  s.batches.delete(id);
  for (const [seq, batch] of s.seqBatch) {
    if (batch === id) {
      s.seqBatch.delete(seq);
      s.acked.delete(seq);
    }
  }
  for (const [i, part] of b.parts) {
    void part.handle?.then((h) => h.close()).catch(() => undefined);
    void fsp.rm(part.file, { force: true });
    b.release.get(i)?.();
  }
  // Bases of changed files that never arrived are no longer needed (finished ones are
  // unpinned after their history update).
  for (const [i, v] of (b.verdicts ?? []).entries()) {
    if (v.verdict === 'changed' && !b.results.has(i)) {
      cache.unpin(v.basisSha256);
      void cache.dropIfUnused(v.basisSha256);
    }
  }
  for (const r of b.release.values()) r();
}
