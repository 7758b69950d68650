/**
 * The inputs of HyCloud Eq. 2 before the delta exists: the elimination ratio γ̂ and the
 * delta engine's rate r_c on this machine, both measured on a sample of the new file.
 *
 * A few windows spread over the file are each diffed against the whole base signature (the
 * rolling checksum finds a base block at any offset, so a window matches as the whole file
 * would) and the windows' deltas deflated as the delta container deflates them; γ̂ is the
 * share of the sampled bytes the deflated deltas eliminate, r_c the sampled bytes per
 * second of that work. A window's two ends cost at most one block of literals each, so
 * windows are at least 64 blocks long (the estimate errs by ≤ 3 %, towards the whole file).
 * A file not much larger than the sample is diffed whole and the delta kept, so no byte is
 * diffed twice.
 */
import * as fsp from 'node:fs/promises';
import { deflateRawSync } from 'node:zlib';
import {
  collect,
  parseSignature,
  delta as rsyncDelta,
  signature as rsyncSignature,
  type Signature,
} from '@weft/rsync-wasm';

export interface DeltaEstimate {
  /** γ̂ = 1 − (deflated delta bytes / sampled bytes), in [0, 1]. */
  readonly gamma: number;
  /** Bytes of the new file diffed for the estimate. */
  readonly sampledBytes: number;
  /** CPU-bound seconds spent diffing and deflating them. */
  readonly seconds: number;
  /** The whole file's delta when the sample was the whole file (the upload can use it). */
  readonly wholeDelta?: Uint8Array;
}

export interface EstimateOptions {
  /** Most bytes sampled (default 4 MiB). */
  readonly budget?: number;
  /** Shortest window (default 512 KiB); never shorter than 64 blocks. */
  readonly minWindow?: number;
  /** Most windows (default 8). */
  readonly maxWindows?: number;
}

/** Estimate γ and r_c for the delta of `file` (`size` bytes) against `sig`. */
export async function estimateDelta(
  sig: Signature,
  file: string,
  size: number,
  options: EstimateOptions = {},
): Promise<DeltaEstimate> {
  if (!Number.isSafeInteger(size) || size < 0) throw new RangeError(`bad file size ${size}`);
  const budget = options.budget ?? 4 * 1024 * 1024;
  const window = Math.max(options.minWindow ?? 512 * 1024, 64 * sig.blockSize);
  const count = Math.max(1, Math.min(options.maxWindows ?? 8, Math.floor(budget / window)));
  const fh = await fsp.open(file, 'r');
  try {
    if (size <= 2 * count * window) {
      const bytes = Buffer.alloc(size);
      const { bytesRead } = await fh.read(bytes, 0, size, 0);
      const started = performance.now();
      const d = await collect(rsyncDelta(sig, bytes.subarray(0, bytesRead)));
      const stored = deflateRawSync(d, { level: 6 }).byteLength;
      const seconds = (performance.now() - started) / 1000;
      return { gamma: ratio(stored, bytesRead), sampledBytes: bytesRead, seconds, wholeDelta: d };
    }
    let sampled = 0;
    let stored = 0;
    let seconds = 0;
    const buf = Buffer.alloc(window);
    for (let i = 0; i < count; i++) {
      // Window centres at (i + ½)/count of the file: the start, middle and end all count.
      const at = Math.min(size - window, Math.max(0, Math.floor(((i + 0.5) * size) / count - window / 2)));
      const { bytesRead } = await fh.read(buf, 0, window, at);
      const started = performance.now();
      const d = await collect(rsyncDelta(sig, buf.subarray(0, bytesRead), { checksum: false }));
      stored += deflateRawSync(d, { level: 6 }).byteLength;
      seconds += (performance.now() - started) / 1000;
      sampled += bytesRead;
    }
    return { gamma: ratio(stored, sampled), sampledBytes: sampled, seconds };
  } finally {
    await fh.close();
  }
}

function ratio(stored: number, sampled: number): number {
  return sampled > 0 ? Math.min(1, Math.max(0, 1 - stored / sampled)) : 0;
}

/**
 * The delta engine's rate on this machine before any file was diffed: 1 MiB of seeded
 * pseudo-random bytes, signed at 4 KiB blocks, then diffed (with a few edits) and deflated
 * as an upload would be, after a warm-up run; the faster of two timed runs. Returns the
 * bytes diffed and the seconds it took (about 10 ms each).
 */
export async function calibrateDeltaRate(): Promise<{ bytes: number; seconds: number }> {
  const base = Buffer.alloc(1024 * 1024);
  let x = 0x2545f491;
  for (let i = 0; i < base.length; i += 4) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    base.writeUInt32LE(x >>> 0, i);
  }
  const sig = parseSignature(await collect(rsyncSignature(base, { blockSize: 4096 })));
  const edited = Buffer.from(base);
  for (let i = 1; i < 16; i++) edited.writeUInt8((edited[i * 65_537] ?? 0) ^ 0xff, i * 65_537);
  const run = async (bytes: Uint8Array): Promise<number> => {
    const started = performance.now();
    deflateRawSync(await collect(rsyncDelta(sig, bytes)), { level: 6 });
    return (performance.now() - started) / 1000;
  };
  // Untimed first: the engine's first use compiles and warms it up (ten times slower), and
  // a rate taken from it would rule out deltas on any link.
  await run(edited.subarray(0, 128 * 1024));
  const seconds = Math.min(await run(edited), await run(edited));
  return { bytes: edited.byteLength, seconds };
}
