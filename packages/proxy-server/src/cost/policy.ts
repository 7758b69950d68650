/**
 * Decisions driven by the cost model (docs/cost.md), pure functions of their inputs and a
 * price table, so the packer and the collector call them and tests check them exactly:
 *
 * - `gcDecision`: Coral's cleaning rule (Theorem 1). A pack's dead bytes cost
 *   C_store(t) = p_s · Σ s_j (t − t_j) to keep (s_j dead since t_j, p_s per byte-ms); repacking
 *   costs C_clean = n·R_get + R_put + R_delete + (live bytes read and written back) · transfer
 *   prices (Coral Eq. 12). The total C_store(τ) + C_clean is least when C_store(τ) = C_clean,
 *   so the pack is repacked once C_store ≥ C_clean, and not before.
 * - `fsCopyDecision`: keep a small file's filesystem-tier copy after its pack is flushed, or
 *   drop it and serve reads with a Range GET of the pack.
 * - `packTargetSize`: the pack size at which the one PUT of a pack costs at most a fraction
 *   of storing its bytes for a month.
 */
import { GIB, MONTH_MS, type PriceTable, storagePerByteMs } from './prices.ts';

export interface PackGcInput {
  readonly packId: string;
  /** Bytes of live content (what a repack reads and writes again). */
  readonly liveBytes: number;
  /** Range GETs needed to read the live bytes (after coalescing adjacent ranges). */
  readonly liveRanges: number;
  /** Σ s_j: dead bytes in the pack. */
  readonly deadBytes: number;
  /** Σ s_j · t_j: each dead extent's size times the time (ms) it died. */
  readonly deadByteSinceMs: number;
}

export interface GcDecision {
  readonly packId: string;
  readonly repack: boolean;
  /** USD the dead bytes have cost so far. */
  readonly cStore: number;
  /** USD a repack costs now. */
  readonly cClean: number;
  /** When C_store reaches C_clean with no further deaths (ms), null when nothing is dead. */
  readonly crossoverMs: number | null;
  readonly nowMs: number;
}

/** Σ s_j and Σ s_j·t_j of a pack's dead extents. */
export function deadSums(extents: readonly { bytes: number; sinceMs: number }[]): {
  deadBytes: number;
  deadByteSinceMs: number;
} {
  let deadBytes = 0;
  let deadByteSinceMs = 0;
  for (const e of extents) {
    deadBytes += e.bytes;
    deadByteSinceMs += e.bytes * e.sinceMs;
  }
  return { deadBytes, deadByteSinceMs };
}

/** C_clean (Coral Eq. 12): read the live ranges, write one new pack, delete the old one. */
export function cleanCost(p: PriceTable, liveBytes: number, liveRanges: number): number {
  if (liveBytes === 0) return p.deletePer1000 / 1000;
  const requests = (liveRanges * p.getPer1000 + p.putPer1000 + p.deletePer1000) / 1000;
  const transfer = (liveBytes * (2 * p.transferPerGb + p.readPerGb + p.writePerGb)) / GIB;
  return requests + transfer;
}

/** C_store(now) of the dead bytes. */
export function deadStoreCost(
  p: PriceTable,
  deadBytes: number,
  deadByteSinceMs: number,
  nowMs: number,
): number {
  return Math.max(0, (deadBytes * nowMs - deadByteSinceMs) * storagePerByteMs(p));
}

export function gcDecision(p: PriceTable, pack: PackGcInput, nowMs: number): GcDecision {
  if (!(pack.liveBytes >= 0 && pack.deadBytes >= 0 && pack.liveRanges >= 0)) {
    throw new RangeError(`pack ${pack.packId}: negative byte or range counts`);
  }
  const cClean = cleanCost(p, pack.liveBytes, pack.liveRanges);
  const cStore = deadStoreCost(p, pack.deadBytes, pack.deadByteSinceMs, nowMs);
  const rate = pack.deadBytes * storagePerByteMs(p);
  let crossoverMs: number | null = null;
  if (pack.deadBytes > 0) {
    // A free store never repays a paid cleaning; a free cleaning is due at once.
    crossoverMs =
      rate > 0
        ? (cClean / storagePerByteMs(p) + pack.deadByteSinceMs) / pack.deadBytes
        : cClean === 0
          ? pack.deadByteSinceMs / pack.deadBytes
          : null;
  }
  const repack = pack.deadBytes > 0 && crossoverMs !== null && nowMs >= crossoverMs;
  return { packId: pack.packId, repack, cStore, cClean, crossoverMs, nowMs };
}

export interface FsCopyInput {
  readonly size: number;
  /** Reads of the file expected per month (e.g. from its recent reads). */
  readonly readsPerMonth: number;
}

export interface FsCopyDecision {
  readonly keep: boolean;
  /** USD per month of keeping the copy on the filesystem tier. */
  readonly keepCost: number;
  /** USD per month of serving the expected reads from the pack instead. */
  readonly dropCost: number;
}

/**
 * Keep the filesystem-tier copy while storing it there costs less than the Range GETs (and
 * the transfer) that would serve its reads from the pack; ties drop the copy (the pack is
 * the durable copy, the filesystem tier is a cache).
 */
export function fsCopyDecision(fs: PriceTable, objects: PriceTable, f: FsCopyInput): FsCopyDecision {
  if (!(f.size >= 0 && f.readsPerMonth >= 0)) throw new RangeError('size and reads must be ≥ 0');
  const keepCost = (f.size * fs.storagePerGbMonth) / GIB + (f.readsPerMonth * f.size * fs.readPerGb) / GIB;
  const perRead = objects.getPer1000 / 1000 + (f.size * (objects.transferPerGb + objects.readPerGb)) / GIB;
  const dropCost = f.readsPerMonth * perRead;
  return { keep: keepCost < dropCost, keepCost, dropCost };
}

export interface PackSizeOptions {
  /** The most a pack's PUT may cost relative to a month of storing it. Default 1 %. */
  readonly putShare?: number;
  readonly minBytes?: number;
  readonly maxBytes?: number;
}

/**
 * The smallest pack whose PUT costs at most `putShare` of a month of its storage:
 * S ≥ R_put / (putShare · p_month). Larger packs save little more on PUTs but make each
 * repack read and write more live bytes. S3 Standard at 1 %: ≈ 22 MiB. Clamped to
 * [minBytes, maxBytes] (default 4–128 MiB); a backend without storage or PUT prices gets
 * the minimum (flushed sooner, less to lose in the write-back cache).
 */
export function packTargetSize(objects: PriceTable, options: PackSizeOptions = {}): number {
  const share = options.putShare ?? 0.01;
  const min = options.minBytes ?? 4 * 1024 * 1024;
  const max = options.maxBytes ?? 128 * 1024 * 1024;
  const perByteMonth = storagePerByteMs(objects) * MONTH_MS;
  if (!(share > 0) || perByteMonth === 0 || objects.putPer1000 === 0) return min;
  const s = objects.putPer1000 / 1000 / (share * perByteMonth);
  return Math.min(max, Math.max(min, Math.ceil(s / 4096) * 4096));
}
