/**
 * The first exchange of the inter-proxy transfer protocol (docs/formats/inter-proxy.md,
 * CoCloud §III-C step 1–2): the source proxy sends a batch of metadata of its pending
 * files; the destination answers, per file, `unchanged` (it already holds that content),
 * `new` (no cached copy: send it whole — bundled when small), or `changed` (send an rsync
 * delta against the cached copy named by `basisSha256`, with the block size the
 * destination predicts from history, CoCloud Eq. 1–2). Also the adaptive choices: block
 * size (Eq. 1–2) and compression (Eq. 3–4), and the split into bundles and large files.
 */
import { normalizeEntryPath } from '@weft/providers/paths';
import { MirrorError } from '../errors.ts';

export const TRANSFER_BLOCK_BYTES = 4 * 1024 * 1024;
/** Candidate rsync block sizes (DESIGN §10: 512 B … 64 KiB). */
export const CANDIDATE_BLOCK_SIZES = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536] as const;
/** Until a file has history: rsync's usual choice for mid-sized files. */
export const DEFAULT_BLOCK_SIZE = 2048;
export const MAX_BATCH_ENTRIES = 10_000;

export interface FileMeta {
  /** Path within the share (a provider path). */
  readonly path: string;
  readonly size: number;
  /** SHA-256 (lower-case hex) of the content. */
  readonly sha256: string;
}

export type Verdict =
  | { readonly path: string; readonly verdict: 'unchanged' }
  | { readonly path: string; readonly verdict: 'new' }
  | {
      readonly path: string;
      readonly verdict: 'changed';
      /** The cached version the delta is computed against (the signature's source). */
      readonly basisSha256: string;
      readonly blockSize: number;
    };

/** What the destination proxy has cached (path → the content it holds). */
export interface DestinationCache {
  get(path: string): { readonly size: number; readonly sha256: string } | undefined;
  /** Any cached copy with this content (dedup across paths: a renamed file is unchanged). */
  hasContent?(sha256: string): boolean;
}

/** A metadata batch refused whole; `index` is the first bad entry. */
export class BatchError extends MirrorError {
  readonly code = 'BadBatch' as const;
  constructor(
    message: string,
    readonly index: number,
  ) {
    super(message);
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Check a metadata batch as received: bad input is refused whole, nothing is compared. */
export function validateBatch(batch: readonly FileMeta[]): FileMeta[] {
  if (batch.length > MAX_BATCH_ENTRIES)
    throw new BatchError(`more than ${MAX_BATCH_ENTRIES} entries`, MAX_BATCH_ENTRIES);
  const seen = new Set<string>();
  return batch.map((f, i) => {
    let path: string;
    try {
      path = normalizeEntryPath(f.path);
    } catch (e) {
      throw new BatchError(`entry ${i}: ${(e as Error).message}`, i);
    }
    if (!Number.isSafeInteger(f.size) || f.size < 0) throw new BatchError(`entry ${i}: bad size`, i);
    if (!SHA256_HEX.test(f.sha256))
      throw new BatchError(`entry ${i}: sha256 must be 64 lower-case hex digits`, i);
    if (seen.has(path)) throw new BatchError(`entry ${i}: ${path} appears twice`, i);
    seen.add(path);
    return { path, size: f.size, sha256: f.sha256 };
  });
}

/** The destination's answer to a batch, in the batch's order. */
export function compareBatch(
  batch: readonly FileMeta[],
  cache: DestinationCache,
  blockSizeFor: (path: string) => number = () => DEFAULT_BLOCK_SIZE,
): Verdict[] {
  return validateBatch(batch).map((f): Verdict => {
    const cached = cache.get(f.path);
    if (cached?.sha256 === f.sha256 || (!cached && cache.hasContent?.(f.sha256))) {
      return { path: f.path, verdict: 'unchanged' };
    }
    if (!cached || cached.size === 0) return { path: f.path, verdict: 'new' };
    return { path: f.path, verdict: 'changed', basisSha256: cached.sha256, blockSize: blockSizeFor(f.path) };
  });
}

/**
 * CoCloud Eq. 1–2: after each received version the destination measures the dedup ratio
 * γ_i the file would have had with each candidate block size; p_test = γ_i / Σγ_i and
 * p_next = α·p_cur + (1 − α)·p_test with α = n/(n+1) for the n-th adjustment; the next
 * delta uses the candidate with the highest probability.
 */
export class BlockSizePredictor {
  private readonly state = new Map<string, { p: number[]; n: number }>();

  constructor(readonly candidates: readonly number[] = CANDIDATE_BLOCK_SIZES) {}

  choose(path: string): number {
    const s = this.state.get(path);
    if (!s)
      return this.candidates.includes(DEFAULT_BLOCK_SIZE) ? DEFAULT_BLOCK_SIZE : (this.candidates[0] ?? 2048);
    let best = 0;
    for (let i = 1; i < s.p.length; i++) if ((s.p[i] ?? 0) > (s.p[best] ?? 0)) best = i;
    return this.candidates[best] ?? DEFAULT_BLOCK_SIZE;
  }

  /** The path's probabilities and adjustment count, for persisting. */
  snapshot(path: string): { readonly probs: readonly number[]; readonly n: number } | undefined {
    const s = this.state.get(path);
    return s ? { probs: [...s.p], n: s.n } : undefined;
  }

  /** Load a persisted history (ignored when it does not fit the candidates). */
  restore(path: string, probs: readonly number[], n: number): void {
    if (probs.length !== this.candidates.length || !Number.isInteger(n) || n < 1) return;
    this.state.set(path, { p: [...probs], n });
  }

  /** Record the dedup ratios measured for one version (one per candidate, each in [0, 1]). */
  record(path: string, gammas: readonly number[]): void {
    if (gammas.length !== this.candidates.length) throw new RangeError('one ratio per candidate block size');
    const sum = gammas.reduce((a, b) => a + b, 0);
    if (sum <= 0) return; // nothing deduplicated at any size: no evidence either way
    const test = gammas.map((g) => g / sum);
    const s = this.state.get(path);
    if (!s) {
      this.state.set(path, { p: test, n: 1 });
      return;
    }
    const alpha = s.n / (s.n + 1);
    s.p = s.p.map((p, i) => p * alpha + (test[i] ?? 0) * (1 - alpha));
    s.n += 1;
  }
}

export interface CompressionChoice {
  /** Index into the compression ratio list, or -1: do not compress. */
  readonly index: number;
  /** The combined computation rate r_c for the choice (bytes/s), for logs. */
  readonly computeRate: number;
}

/**
 * CoCloud Eq. 3–4. With dedup ratio γ, hash rate r_a, compression rates r_b (per
 * algorithm/level, with its ratio β) and transfer rate r_t (all bytes/s):
 *   r'_a = (1−γ)/β · r_a,  r'_b = r_b/β,  r_c = 1 / (1/r'_a + 1/r'_b).
 * Compression is off when every option's r_c < r_t (computing would be the bottleneck);
 * otherwise the option with the largest β among those with r_c ≥ r_t is chosen.
 */
export function chooseCompression(
  gamma: number,
  hashRate: number,
  options: readonly { readonly ratio: number; readonly rate: number }[],
  transferRate: number,
): CompressionChoice {
  let best: CompressionChoice = { index: -1, computeRate: 0 };
  let bestRatio = 0;
  for (const [i, o] of options.entries()) {
    if (o.ratio <= 0 || o.rate <= 0) continue;
    const ra = gamma >= 1 ? Number.POSITIVE_INFINITY : ((1 - gamma) / o.ratio) * hashRate;
    const rb = o.rate / o.ratio;
    const rc = 1 / (1 / ra + 1 / rb);
    if (rc >= transferRate && o.ratio > bestRatio) {
      best = { index: i, computeRate: rc };
      bestRatio = o.ratio;
    }
  }
  return best;
}

export interface TransferPlan {
  /** Small new or changed files, grouped so each group fits one bundle block. */
  readonly bundles: FileMeta[][];
  /** Large files: `new` ones compressed into transfer blocks, `changed` ones as deltas. */
  readonly large: { readonly file: FileMeta; readonly verdict: Verdict }[];
  readonly unchanged: string[];
}

/** CoCloud step 2: bundle files smaller than a block; large files go as blocks or deltas. */
export function planTransfers(
  batch: readonly FileMeta[],
  verdicts: readonly Verdict[],
  blockBytes = TRANSFER_BLOCK_BYTES,
  perEntryOverhead = 64,
): TransferPlan {
  const byPath = new Map(verdicts.map((v) => [v.path, v]));
  const bundles: FileMeta[][] = [];
  const large: { file: FileMeta; verdict: Verdict }[] = [];
  const unchanged: string[] = [];
  let current: FileMeta[] = [];
  let used = 0;
  for (const f of validateBatch(batch)) {
    const v = byPath.get(f.path);
    if (!v) throw new BatchError(`no verdict for ${f.path}`, 0);
    if (v.verdict === 'unchanged') {
      unchanged.push(f.path);
      continue;
    }
    const cost = f.size + perEntryOverhead + Buffer.byteLength(f.path, 'utf8');
    if (f.size >= blockBytes || cost > blockBytes) {
      large.push({ file: f, verdict: v });
      continue;
    }
    if (used + cost > blockBytes && current.length > 0) {
      bundles.push(current);
      current = [];
      used = 0;
    }
    current.push(f);
    used += cost;
  }
  if (current.length > 0) bundles.push(current);
  return { bundles, large, unchanged };
}
