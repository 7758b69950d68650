/**
 * The sender's batch state and what it puts on the wire for each file, apart from the
 * connection: a batch run (its files, the verdicts and signatures the destination sent back,
 * the results), frames awaiting their ack, a large file encoded as whole content or as an
 * rsync delta container against the destination's basis (compressed when Eq. 3–4 say so),
 * that stream cut into transfer blocks, and the per-file outcomes of a finished batch.
 * The connection, the window of unacknowledged frames and reconnection are sender.ts.
 */
import { randomBytes } from 'node:crypto';
import { collect, delta as rsyncDelta, parseSignature } from '@weft/rsync-wasm';
import { encodeDeltaContainer } from '@weft/wire/delta-container';
import { encodeTransferBlock } from '@weft/wire/transfer-block';
import type { FileMeta, Verdict } from './compare.ts';
import type { AdaptiveCompression } from './compression.ts';
import { FrameTag, type ResultCode } from './frames.ts';

/** A pending file in the source proxy's buffer (CoCloud step 0: downloaded from its cloud). */
export interface SourceFile extends FileMeta {
  readonly content: Uint8Array;
}

export type TransferMode = 'unchanged' | 'bundle' | 'whole' | 'delta';

export interface FileOutcome {
  readonly path: string;
  readonly status: 'unchanged' | 'committed' | 'failed';
  readonly mode: TransferMode;
  readonly code?: ResultCode;
  readonly message?: string;
  /** Frame bytes sent for this file (its share of a bundle by content size). */
  readonly wireBytes: number;
  readonly compressed: boolean;
}

export interface Pending {
  readonly seq: number;
  readonly frame: Uint8Array;
  readonly batch: number;
  sent: boolean;
  sentAt: number;
  nacks: number;
}

export interface BatchRun {
  readonly id: number;
  readonly files: SourceFile[];
  verdicts: Verdict[] | undefined;
  readonly signatures: Map<number, Uint8Array>;
  readonly results: Map<string, { status: 'committed' | 'failed'; code?: ResultCode; message?: string }>;
  awaiting: number;
  readonly wake: Set<() => void>;
  failure: Error | undefined;
}

export class RestartBatch extends Error {}

/** A large file's stream: whole content, or (verdict changed, `signature` given) a delta container. */
export async function encodeLarge(
  compression: AdaptiveCompression,
  file: FileMeta,
  verdict: Verdict,
  content: Uint8Array,
  signature: Uint8Array | undefined,
): Promise<{
  stream: Uint8Array;
  tag: FrameTag;
  mode: TransferMode;
  compressPieces: boolean;
  compressed: boolean;
}> {
  if (verdict.verdict === 'changed') {
    const sig = parseSignature(signature ?? new Uint8Array());
    const t0 = performance.now();
    const d = await collect(rsyncDelta(sig, content));
    compression.observeHashRate(content.byteLength, (performance.now() - t0) / 1000);
    const gamma = Math.max(0, 1 - d.byteLength / Math.max(1, content.byteLength));
    const decision = compression.decide(file.path, [d], gamma);
    const stream = encodeDeltaContainer(
      { baseSha256: verdict.basisSha256, targetSha256: file.sha256, targetSize: file.size, delta: d },
      { compress: decision.compress },
    );
    return {
      stream,
      tag: FrameTag.DeltaPiece,
      mode: 'delta',
      compressPieces: false,
      compressed: decision.compress,
    };
  }
  const decision = compression.decide(file.path, [content]);
  return {
    stream: content,
    tag: FrameTag.Whole,
    mode: 'whole',
    compressPieces: decision.compress,
    compressed: decision.compress,
  };
}

/** `stream` as transfer blocks of at most `blockBytes` (one block when empty), under one new transfer id. */
export function* transferBlocks(
  stream: Uint8Array,
  blockBytes: number,
  compress: boolean,
): Generator<Uint8Array> {
  const transferId = randomBytes(16).toString('hex');
  const pieces = Math.max(1, Math.ceil(stream.byteLength / blockBytes));
  for (let k = 0; k < pieces; k++) {
    const offset = k * blockBytes;
    const payload = stream.subarray(offset, Math.min(stream.byteLength, offset + blockBytes));
    yield encodeTransferBlock({ transferId, seq: k, offset, last: k === pieces - 1, payload }, { compress });
  }
}

/** Each file's outcome once the batch's results are in. */
export function outcomes(
  b: BatchRun,
  modes: ReadonlyMap<string, TransferMode>,
  wire: ReadonlyMap<string, number>,
  compressed: ReadonlySet<string>,
): FileOutcome[] {
  return b.files.map((f): FileOutcome => {
    const mode = modes.get(f.path) ?? 'unchanged';
    const r = b.results.get(f.path);
    const base = {
      path: f.path,
      mode,
      wireBytes: Math.round(wire.get(f.path) ?? 0),
      compressed: compressed.has(f.path),
    };
    if (mode === 'unchanged' || !r) return { ...base, status: 'unchanged' };
    return r.status === 'committed'
      ? { ...base, status: 'committed' }
      : {
          ...base,
          status: 'failed',
          ...(r.code ? { code: r.code } : {}),
          ...(r.message ? { message: r.message } : {}),
        };
  });
}
