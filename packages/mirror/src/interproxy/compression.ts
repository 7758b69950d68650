/**
 * The source's adaptive compression (CoCloud Eq. 3–4) and the link-rate estimate it needs.
 *
 * Per file (a path) or per kind of block ("bundle"), the compression ratio β and the
 * compressor rate r_b are kept as running estimates from samples of the data about to be
 * sent (the paper predicts them from the file's history). With the dedup ratio γ of the
 * file, the delta computation's hash rate r_a and the link's transfer rate r_t, Eq. 4 gives
 * r_c; deflate is used when r_c ≥ r_t and it shrinks the data (β > 1), else the data goes raw.
 */
import { deflateRawSync } from 'node:zlib';
import { chooseCompression } from './compare.ts';

/** Sample size taken from data about to be sent. */
const SAMPLE_BYTES = 256 * 1024;
/** Below this ratio deflate is not worth its CPU (random or already-compressed data). */
const MIN_USEFUL_RATIO = 1.05;

/**
 * Throughput of the link as acknowledgements show it: bytes acknowledged over the time
 * they took, across the last acks (several blocks are in flight, so one block's
 * send→ack time would undercount).
 */
export class LinkRateEstimator {
  private readonly acks: { at: number; bytes: number; sentAt: number }[] = [];

  constructor(
    /** Assumed until the first acks: fast, so compression must earn its CPU. */
    private readonly fallback = 12.5 * 1024 * 1024,
    private readonly window = 16,
    private readonly now: () => number = () => performance.now(),
  ) {}

  record(bytes: number, sentAt: number): void {
    this.acks.push({ at: this.now(), bytes, sentAt });
    if (this.acks.length > this.window) this.acks.shift();
  }

  /** Bytes per second. */
  get rate(): number {
    const last = this.acks[this.acks.length - 1];
    if (!last) return this.fallback;
    const start = Math.min(...this.acks.map((a) => a.sentAt));
    const bytes = this.acks.reduce((n, a) => n + a.bytes, 0);
    const seconds = (last.at - start) / 1000;
    return seconds > 0 ? bytes / seconds : this.fallback;
  }
}

interface Estimate {
  ratio: number;
  rate: number;
  n: number;
}

export interface CompressionDecision {
  readonly compress: boolean;
  /** β and r_b used (for logs and the bench). */
  readonly ratio: number;
  readonly rate: number;
}

export class AdaptiveCompression {
  private readonly history = new Map<string, Estimate>();

  constructor(
    private readonly linkRate: () => number,
    /** r_a: bytes/s the rolling-hash delta runs at (measured by the sender). */
    private hashRate = 400 * 1024 * 1024,
  ) {}

  observeHashRate(bytes: number, seconds: number): void {
    if (bytes > 0 && seconds > 0) this.hashRate = 0.7 * this.hashRate + 0.3 * (bytes / seconds);
  }

  /** Decide for `data` (sampled) sent under `key`, with dedup ratio `gamma` (0 when not deduplicated). */
  decide(key: string, data: readonly Uint8Array[], gamma = 0): CompressionDecision {
    const sample = concatUpTo(data, SAMPLE_BYTES);
    if (sample.byteLength >= 1024) {
      const t0 = performance.now();
      const out = deflateRawSync(sample, { level: 6 }).byteLength;
      const seconds = Math.max((performance.now() - t0) / 1000, 1e-6);
      const ratio = sample.byteLength / Math.max(1, out);
      const rate = sample.byteLength / seconds;
      const prev = this.history.get(key);
      if (!prev) this.history.set(key, { ratio, rate, n: 1 });
      else {
        // Decay as Eq. 2: α = n/(n+1), bounded so the estimate keeps adapting.
        const a = prev.n / (prev.n + 1);
        prev.ratio = prev.ratio * a + ratio * (1 - a);
        prev.rate = prev.rate * a + rate * (1 - a);
        prev.n = Math.min(prev.n + 1, 10);
      }
    }
    const est = this.history.get(key);
    if (!est || est.ratio < MIN_USEFUL_RATIO)
      return { compress: false, ratio: est?.ratio ?? 1, rate: est?.rate ?? 0 };
    const choice = chooseCompression(
      gamma,
      this.hashRate,
      [{ ratio: est.ratio, rate: est.rate }],
      this.linkRate(),
    );
    return { compress: choice.index === 0, ratio: est.ratio, rate: est.rate };
  }
}

function concatUpTo(parts: readonly Uint8Array[], max: number): Uint8Array {
  const total = Math.min(
    max,
    parts.reduce((n, p) => n + p.byteLength, 0),
  );
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    if (off >= total) break;
    const take = Math.min(p.byteLength, total - off);
    out.set(p.subarray(0, take), off);
    off += take;
  }
  return out;
}
