/**
 * The packer's settings and the object-tier key of a pack (packs.ts; moved out of it to keep
 * it short).
 */
export const PACK_PREFIX = 'packs';
/**
 * Default pack target: 16 MiB (restic's pack size). One measurement so far (64 MiB of random
 * bytes PUT to s3proxy on loopback, this 2-core machine under other load, one run): 1 MiB packs
 * 13 MiB/s, 4 MiB 21 MiB/s, 16 MiB 16 MiB/s, 64 MiB 33 MiB/s — throughput is within noise
 * above 4 MiB, so the choice rests on requests and latency: 16 MiB puts the 10,029-file corpus
 * (30 MB) in 2–3 PUTs (~4,000× fewer than one per file), a pack fills (and is durable) sooner
 * than at 64 MiB, and a repack rewrites at most 16 MiB. A proper sweep in bench/ is still to do;
 * CostService.packTargetSize() (docs/cost.md) gives the price-driven value for `packs.targetBytes`.
 */
export const DEFAULT_PACK_TARGET_BYTES = 16 * 1024 * 1024;
/**
 * Small files read at once while a pack is filled (their stored forms go to the deflate worker
 * in one message per turn of the loop: pack-worker.ts).
 */
export const READ_AHEAD = 64;
/** A flush lists every pending small file at least this often, whatever was queued. */
export const FULL_LIST_MS = 10 * 60_000;
/** At most this many files per listing (the next flush lists the rest). */
export const FULL_LIST_LIMIT = 100_000;
/**
 * How long a flush's or a repack's claim holds (ms): longer than any flush (a 100,000-file
 * listing packs in minutes); the work of a process that died is taken over after it.
 */
export const PACK_CLAIM_TTL_MS = 30 * 60_000;

/** The longest a bundle waits for room in the packer with nothing taken meanwhile (offerAll). */
export const ROOM_WAIT_MS = 5000;

/** Default flush timeout (the Packing paper's 5 s). */
export const DEFAULT_PACK_TIMEOUT_MS = 5000;
/**
 * Default idle flush (issue #16), as a fraction of the timeout: what is pending is packed once
 * no bundle has been in flight for at most timeout / 5 — 1 s with the paper's 5 s; less after a
 * stream of bundles without gaps, learnt per stream (pack-idle.ts) — instead of waiting out the
 * timeout (still the maximum age). A stream of bundles from one agent comes back to back, so
 * its packs stay full; a drop's last pack reaches the object tier soon after its last bundle
 * instead of up to 5 s.
 */
export const DEFAULT_PACK_IDLE_FRACTION = 1 / 5;

export function packKey(packId: string): string {
  return `${PACK_PREFIX}/${packId}`;
}
