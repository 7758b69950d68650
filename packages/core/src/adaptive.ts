/**
 * The adaptive choices of the transfer planner, from the papers' equations.
 *
 * - Block size (HyCloud Eq. 1): a probability vector over candidate block sizes, updated
 *   after each measured transfer with the normalised elimination ratios,
 *   P_new = λ·P_pre + (1 − λ)·P_loc, λ = n/(n+1); the arg-max is used next time. Before
 *   the first measurement the block size comes from the file's size (about √size, as rsync
 *   chooses), not from the uniform prior (whose arg-max would be the smallest candidate).
 * - Delta or whole upload (HyCloud Eq. 2): the delta path wins when
 *   r_u < r_c·r_t·γ_max / (2·r_c + r_t). It is asked before any delta is computed: first
 *   with γ = 1 (can a delta pay at all on this link?), then with γ and r_c estimated from a
 *   sample of the file (delta-estimate.ts).
 * - Compression level (CoCloud Eq. 3–4): compress only while the compressor keeps up with
 *   the link; pick the strongest level β whose effective rate r_c ≥ r_t; with a hysteresis
 *   band, so that a stable link gives a stable choice.
 */

export const CANDIDATE_BLOCK_SIZES: readonly number[] = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

export interface BlockSizeHistory {
  /** One probability per candidate, summing to 1. */
  readonly probs: readonly number[];
  /** Adjustments so far. */
  readonly n: number;
}

export function initialHistory(candidates: readonly number[] = CANDIDATE_BLOCK_SIZES): BlockSizeHistory {
  return { probs: candidates.map(() => 1 / candidates.length), n: 0 };
}

/** Eq. 1: fold one set of measured elimination ratios (one per candidate) into the history. */
export function updateHistory(h: BlockSizeHistory, ratios: readonly number[]): BlockSizeHistory {
  if (ratios.length !== h.probs.length) throw new RangeError('one ratio per candidate block size');
  const sum = ratios.reduce((a, b) => a + Math.max(0, b), 0);
  const local = ratios.map((g) => (sum > 0 ? Math.max(0, g) / sum : 1 / ratios.length));
  const n = h.n + 1;
  const lambda = h.n / (h.n + 1); // n/(n+1) for the n-th adjustment (0 for the first)
  return { probs: h.probs.map((p, i) => p * lambda + (local[i] ?? 0) * (1 - lambda)), n };
}

/**
 * The first block size for a file of `size` bytes, with no history: the candidate nearest
 * √size on a log scale (rsync's rule of thumb; Syncthing also sizes blocks from the file).
 * Signature bytes grow as size/block and delta bytes as (edits × block), so √size keeps
 * both small: 512 B below 0.5 MB, 4 KiB at 22 MB, 8 KiB at 61 MB, 64 KiB from 2 GB.
 */
export function initialBlockSize(
  size: number,
  candidates: readonly number[] = CANDIDATE_BLOCK_SIZES,
): number {
  if (!Number.isFinite(size) || size < 0) throw new RangeError(`bad file size ${size}`);
  const target = Math.log2(Math.max(1, Math.sqrt(size)));
  let best = candidates[0] ?? 4096;
  for (const c of candidates)
    if (Math.abs(Math.log2(c) - target) < Math.abs(Math.log2(best) - target)) best = c;
  return best;
}

/**
 * The block size to use next: the candidate with the highest probability once the history
 * holds a measurement; before that (n = 0), the one `initialBlockSize` picks for `size`.
 */
export function chooseBlockSize(
  h: BlockSizeHistory,
  size: number,
  candidates: readonly number[] = CANDIDATE_BLOCK_SIZES,
): number {
  if (h.n === 0) return initialBlockSize(size, candidates);
  let best = 0;
  for (let i = 1; i < h.probs.length; i++) if ((h.probs[i] ?? 0) > (h.probs[best] ?? 0)) best = i;
  return candidates[best] ?? 4096;
}

/**
 * Eq. 2. `uploadRate` r_u (bytes/s of the client's uplink), `computeRate` r_c (bytes/s of
 * delta computation), `transferRate` r_t (bytes/s between the server's tiers),
 * `gammaMax` the best elimination ratio seen for this file.
 */
export function deltaPays(
  uploadRate: number,
  computeRate: number,
  transferRate: number,
  gammaMax: number,
): boolean {
  if (gammaMax <= 0) return false;
  return uploadRate < (computeRate * transferRate * gammaMax) / (2 * computeRate + transferRate);
}

/** What Eq. 2 decided before a delta was computed, and on which inputs (traced as `delta-plan`). */
export interface DeltaPlan {
  readonly use: 'delta' | 'whole';
  /** `bound`: even a perfect delta (γ = 1) loses on this link; `estimate`: decided on γ̂. */
  readonly stage: 'bound' | 'estimate';
  readonly uploadRate: number;
  readonly computeRate: number;
  readonly transferRate: number;
  readonly gamma: number;
}

/**
 * Eq. 2 asked before the delta exists. With `gammaEstimate` undefined it is the bound
 * (γ = 1): `whole` means no delta can pay on this link, so neither the server's signature
 * nor a sample of the delta is worth its cost. With an estimate it is the decision.
 */
export function planDelta(
  uploadRate: number,
  computeRate: number,
  transferRate: number,
  gammaEstimate?: number,
): DeltaPlan {
  const gamma = gammaEstimate ?? 1;
  return {
    use: deltaPays(uploadRate, computeRate, transferRate, gamma) ? 'delta' : 'whole',
    stage: gammaEstimate === undefined ? 'bound' : 'estimate',
    uploadRate,
    computeRate,
    transferRate,
    gamma,
  };
}

export interface CompressionLevel {
  /** Library level, e.g. zlib 1..9. */
  readonly level: number;
  /** Compression ratio β (input/output) measured at this level. */
  readonly ratio: number;
  /** Compressor throughput at this level, bytes/s of input. */
  readonly rate: number;
}

/**
 * CoCloud Eq. 3–4, as the paper has them: the send path hashes (r_a, for deduplication with
 * ratio γ) and then compresses (r_b, each level's rate, with its ratio β), in series, and its
 * output must keep up with the link (r_t):
 *   r'_a = (1−γ)/β · r_a,  r'_b = r_b/β,  r_c = 1 / (1/r'_a + 1/r'_b).
 * Returns the strongest level with r_c ≥ r_t, or undefined: send raw.
 *
 * `hashRate` defaults to no hashing on the path (r'_a infinite): the agent hashes a file when
 * it scans it, not when it sends it. (Until issue #16's shaped-link run this took r_b for a
 * decompression rate "equal to r_a when unknown" and the level's rate for r_a, so r_c came out
 * at r/(2β), half the compressor's output: at 50 Mbit/s every bundle went raw — 31 MB for a
 * corpus deflate shrinks ~3×. packages/mirror's interproxy/compare.ts reads the paper the same
 * way as this now.)
 */
export function chooseCompression(
  levels: readonly CompressionLevel[],
  linkRate: number,
  gamma = 0,
  hashRate = Number.POSITIVE_INFINITY,
): CompressionLevel | undefined {
  let best: CompressionLevel | undefined;
  for (const l of levels) {
    if (l.ratio <= 1 || l.rate <= 0) continue;
    const ra = gamma >= 1 ? Number.POSITIVE_INFINITY : ((1 - gamma) / l.ratio) * hashRate;
    const rb = l.rate / l.ratio;
    const rc = 1 / (1 / ra + 1 / rb);
    if (rc >= linkRate && (!best || l.ratio > best.ratio)) best = l;
  }
  return best;
}

/** Harmonic mean of the last `k` rate samples (HyCloud Eq. 4): robust to one fast outlier. */
export class RateEstimator {
  private readonly samples: number[] = [];
  constructor(
    private readonly k = 5,
    private readonly fallback = 10 * 1024 * 1024,
  ) {}

  add(bytes: number, seconds: number): void {
    if (bytes <= 0 || seconds <= 0) return;
    this.samples.push(bytes / seconds);
    if (this.samples.length > this.k) this.samples.shift();
  }

  /** Samples held (0: `rate` is the fallback). */
  get count(): number {
    return this.samples.length;
  }

  get rate(): number {
    if (this.samples.length === 0) return this.fallback;
    return this.samples.length / this.samples.reduce((s, r) => s + 1 / r, 0);
  }
}

/** Samples after which the compression means count as settled (their weight caps at 20). */
const SETTLED = 20;
/** Once settled, one call in this many takes a sample. */
const SAMPLE_EVERY = 8;
/**
 * Bytes of a compression sample: 64 KiB, not 256 — deflated on the event loop, 256 KiB took
 * ~5 ms a sample, ~4 µs a file of a 30,000-file first sync (issue #16); a ratio and a rate
 * measured on 64 KiB of the bundle's files estimate the whole as well for choosing.
 */
export const COMPRESSION_SAMPLE_BYTES = 64 * 1024;

/**
 * Decides per bundle whether deflate pays (CoCloud Eq. 3–4 with the one level the bundle
 * format offers): it deflates a sample of the batch, keeps running estimates of the ratio
 * β and the compressor rate r_a, and compresses when r_c ≥ r_t for the measured link rate.
 *
 * Hysteresis: the choice changes only when r_c/r_t leaves a band around 1 — to start
 * compressing, r_c ≥ (1 + band)·r_t; to stop, r_c < (1 − band)·r_t. Timing one 256 KiB
 * deflate is noisy (a busy core halves it), and on a link near the compressor's speed a
 * choice without the band flips from one bundle to the next.
 */
export class CompressionAdvisor {
  private ratio = 2;
  private rate = 50 * 1024 * 1024;
  private samples = 0;
  private compressing: boolean | undefined;

  constructor(
    private readonly measure: (sample: Uint8Array) => { outBytes: number; seconds: number },
    /** Half-width of the band, as a share of the link rate (0 ≤ band < 1). */
    private readonly band = 0.3,
  ) {
    if (!(band >= 0 && band < 1)) throw new RangeError(`hysteresis band ${band} is not in [0, 1)`);
  }

  /** The last choice (undefined before the first). */
  get choice(): boolean | undefined {
    return this.compressing;
  }

  /** Calls since the running means last took a sample. */
  private sinceSample = 0;

  /**
   * Look at (up to COMPRESSION_SAMPLE_BYTES of) the data about to be sent and decide. The sample is deflated
   * here, on the caller's thread (its time is the rate measured): every call until the means
   * hold SETTLED samples, then every SAMPLE_EVERY-th call — one deflate per 4 MiB bundle was
   * 3 s of a 100,000-file drop's event loop (issue #16), and a settled mean moves by at most
   * 1/21 per sample anyway.
   */
  shouldCompress(data: readonly Uint8Array[], linkBytesPerSecond: number, gamma = 0): boolean {
    const due = this.samples < SETTLED || ++this.sinceSample >= SAMPLE_EVERY;
    const sample = due ? concatUpTo(data, COMPRESSION_SAMPLE_BYTES) : new Uint8Array(0);
    if (sample.byteLength >= 4096) {
      this.sinceSample = 0;
      const m = this.measure(sample);
      const ratio = sample.byteLength / Math.max(1, m.outBytes);
      const rate = sample.byteLength / Math.max(1e-6, m.seconds);
      // Running means, weighted like Eq. 1's decay.
      const lambda = this.samples / (this.samples + 1);
      this.ratio = this.samples === 0 ? ratio : this.ratio * lambda + ratio * (1 - lambda);
      this.rate = this.samples === 0 ? rate : this.rate * lambda + rate * (1 - lambda);
      this.samples = Math.min(this.samples + 1, SETTLED);
    }
    const level = [{ level: 6, ratio: this.ratio, rate: this.rate }];
    const at = (factor: number): boolean =>
      chooseCompression(level, linkBytesPerSecond * factor, gamma) !== undefined;
    if (this.compressing === undefined) this.compressing = at(1);
    else if (this.compressing) this.compressing = at(1 - this.band);
    else this.compressing = at(1 + this.band);
    return this.compressing;
  }
}

function concatUpTo(parts: readonly Uint8Array[], max: number): Uint8Array {
  const out = new Uint8Array(
    Math.min(
      max,
      parts.reduce((n, p) => n + p.byteLength, 0),
    ),
  );
  let off = 0;
  for (const p of parts) {
    if (off >= out.byteLength) break;
    const take = Math.min(p.byteLength, out.byteLength - off);
    out.set(p.subarray(0, take), off);
    off += take;
  }
  return out;
}
