/**
 * The sender's batch state and what it puts on the wire for each file, apart from the
 * connection: a batch run (its files, the verdicts and signatures the destination sent back,
 * the results, waits on them), frames awaiting their ack, the frames a batch's verdicts ask
 * for (small files in bundles, large ones in transfer blocks), a large file encoded as whole
 * content or as an rsync delta container against the destination's basis (compressed when
 * Eq. 3–4 say so), that stream cut into transfer blocks, and the per-file outcomes of a
 * finished batch.
 * The connection, the window of unacknowledged frames and reconnection are sender.ts.
 */
import { randomBytes } from 'node:crypto';
import { collect, delta as rsyncDelta, parseSignature } from '@weft/rsync-wasm';
import { BUNDLE_OVERHEAD, encodeBundle } from '@weft/wire/bundle';
import { encodeDeltaContainer } from '@weft/wire/delta-container';
import { encodeTransferBlock } from '@weft/wire/transfer-block';
import { type FileMeta, planTransfers, type Verdict } from './compare.ts';
import type { AdaptiveCompression } from './compression.ts';
import { type DestinationMessage, encodeFrame, FrameTag, NO_FILE, type ResultCode } from './frames.ts';

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

/** The batch fails with `e`: its waiters wake and reject. */
export function failBatch(b: BatchRun, e: Error): void {
  b.failure = e;
  for (const w of b.wake) w();
}

/** The destination's verdicts (the first answer counts): taken if they match the batch's files. */
export function takeVerdicts(
  b: BatchRun,
  verdicts: Extract<DestinationMessage, { type: 'verdicts' }>['verdicts'],
): void {
  if (b.verdicts) return;
  if (verdicts.length !== b.files.length || verdicts.some((v, i) => v.path !== b.files[i]?.path)) {
    b.failure = new Error('verdicts do not match the batch');
  } else b.verdicts = verdicts;
  for (const w of b.wake) w();
}

/** A file's result as the destination reported it (the first report counts). */
export function takeResult(
  b: BatchRun,
  msg: Extract<DestinationMessage, { type: 'committed' | 'failed' }>,
): void {
  if (b.results.has(msg.path)) return;
  b.results.set(
    msg.path,
    msg.type === 'committed'
      ? { status: 'committed' }
      : { status: 'failed', code: msg.code, message: msg.message },
  );
  for (const w of b.wake) w();
}

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

/** A new batch run of `files`. */
export function newBatch(id: number, files: readonly SourceFile[]): BatchRun {
  return {
    id,
    files: [...files],
    verdicts: undefined,
    signatures: new Map(),
    results: new Map(),
    awaiting: 0,
    wake: new Set(),
    failure: undefined,
  };
}

/** Resolves once `cond` holds for the batch (checked whenever it is woken); rejects on its failure. */
export function waitFor(b: BatchRun, cond: () => boolean): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const check = (): void => {
      if (b.failure) {
        b.wake.delete(check);
        reject(b.failure);
      } else if (cond()) {
        b.wake.delete(check);
        resolve();
      }
    };
    b.wake.add(check);
    check();
  });
}

/** A changed file's signature has not come back yet. */
export function missingSignatures(b: BatchRun): boolean {
  return (b.verdicts ?? []).some((v, i) => v.verdict === 'changed' && !b.signatures.has(i));
}

/** The content of the batch's file at `path`. */
export function contentOf(b: BatchRun, path: string, index: ReadonlyMap<string, number>): Uint8Array {
  const f = b.files[index.get(path) ?? -1];
  if (!f) throw new Error(`no content for ${path}`);
  return f.content;
}

/** What putting a batch's frames on the wire needs of the sender. */
export interface BlockQueue {
  readonly session: string;
  readonly blockBytes: number;
  readonly compression: AdaptiveCompression;
  /** Queue one frame (waits while the window is full); resolves with its bytes. */
  enqueue(b: BatchRun, make: (seq: number) => Uint8Array): Promise<number>;
}

/**
 * Send what the verdicts ask for: small files in bundles, large ones as whole content or
 * deltas cut into transfer blocks. Each file's mode, wire bytes and whether it was compressed.
 */
export async function sendPlanned(
  q: BlockQueue,
  b: BatchRun,
  verdicts: readonly Verdict[],
): Promise<{ modes: Map<string, TransferMode>; wire: Map<string, number>; compressed: Set<string> }> {
  const index = new Map(b.files.map((f, i) => [f.path, i]));
  const wire = new Map<string, number>();
  const compressed = new Set<string>();
  const modes = new Map<string, TransferMode>();
  const plan = planTransfers(b.files, verdicts, q.blockBytes - BUNDLE_OVERHEAD);
  for (const p of plan.unchanged) modes.set(p, 'unchanged');
  for (const group of plan.bundles) {
    const contents = group.map((f) => contentOf(b, f.path, index));
    const decision = q.compression.decide('bundle', contents);
    const payload = encodeBundle(
      group.map((f, k) => ({
        path: f.path,
        mtimeMs: 0,
        sha256: f.sha256,
        content: contents[k] ?? new Uint8Array(),
      })),
      { compress: decision.compress },
    );
    const bytes = await q.enqueue(b, (seq) =>
      encodeFrame({
        tag: FrameTag.Bundle,
        session: q.session,
        seq,
        batch: b.id,
        file: NO_FILE,
        payload,
      }),
    );
    const total = group.reduce((n, f) => n + f.size, 0) || 1;
    for (const f of group) {
      modes.set(f.path, 'bundle');
      wire.set(f.path, (bytes * f.size) / total);
      if (decision.compress) compressed.add(f.path);
    }
  }
  for (const { file, verdict } of plan.large) {
    const i = index.get(file.path) ?? 0;
    const content = contentOf(b, file.path, index);
    let signature: Uint8Array | undefined;
    if (verdict.verdict === 'changed') {
      await waitFor(b, () => b.signatures.has(i));
      signature = b.signatures.get(i) ?? new Uint8Array();
    }
    const large = await encodeLarge(q.compression, file, verdict, content, signature);
    const { stream, tag } = large;
    modes.set(file.path, large.mode);
    if (large.compressed) compressed.add(file.path);
    let sent = 0;
    for (const block of transferBlocks(stream, q.blockBytes, large.compressPieces)) {
      sent += await q.enqueue(b, (seq) =>
        encodeFrame({ tag, session: q.session, seq, batch: b.id, file: i, payload: block }),
      );
    }
    wire.set(file.path, sent);
  }
  return { modes, wire, compressed };
}
