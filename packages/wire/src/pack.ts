/**
 * The pack: many small contents appended into one blob of the object tier, with a footer
 * index and a fixed-size trailer at the end (docs/formats/pack.md). A reader needs only the
 * trailer (last PACK_TRAILER_SIZE bytes) to find the footer, and only the footer to find any
 * content: one ranged read per content, never the whole pack.
 *
 * Entries are path-independent (content hash, offset, length, raw length, compression), so
 * one pack serves every namespace holding that content.
 */
import { createHash } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
import {
  ascii,
  ByteReader,
  ByteWriter,
  bytesToHex,
  crc32,
  hexToBytes,
  inflateExact,
  isSha256Hex,
  startsWith,
} from './bytes.ts';
import { WireFormatError } from './errors.ts';

export const PACK_MAGIC = ascii('WFTP');
export const PACK_VERSION = 1;
/** magic(4) version(2) reserved(2) footerOffset(8) entryCount(4) footerCrc32(4). */
export const PACK_TRAILER_SIZE = 24;
/** sha256(32) offset(8) length(4) rawLength(4) compression(1). */
export const PACK_FOOTER_RECORD_SIZE = 49;
export const PACK_MAX_ENTRIES = 1_000_000;
/** Largest single content a pack holds (small files are far below this). */
export const PACK_MAX_ENTRY_BYTES = 64 * 1024 * 1024;

export const PackCompression = { none: 0, deflate: 1 } as const;
export type PackCompressionCode = (typeof PackCompression)[keyof typeof PackCompression];

export interface PackEntry {
  /** SHA-256 (hex) of the raw content. */
  readonly sha256: string;
  /** Byte offset of the stored bytes inside the pack. */
  readonly offset: number;
  /** Stored bytes (after compression). */
  readonly length: number;
  /** Bytes once decompressed. */
  readonly rawLength: number;
  readonly compression: PackCompressionCode;
}

export interface PackTrailer {
  readonly version: number;
  readonly footerOffset: number;
  readonly entryCount: number;
  readonly footerCrc32: number;
}

function fail(code: ConstructorParameters<typeof WireFormatError>[1], message: string): never {
  throw new WireFormatError('pack', code, message);
}

/** Bytes of a content's start deflated (level 1) to tell whether the whole is worth deflating. */
export const PACK_PROBE_BYTES = 2048;

/**
 * The deflate level of pack entries: 1 (issue #16). On the 10,029-file corpus (30.3 MB of
 * source files) level 1 stores 8.67 MB in 0.75 CPU-s, level 6 7.64 MB in 1.27 CPU-s (one
 * run each, load ~10): 13 % more bytes in the object tier for ~50 µs less CPU per small file
 * on the proxy's ingest, where a drop is CPU-bound. Readers do not depend on the level.
 */
export const PACK_DEFLATE_LEVEL = 1;

/**
 * Bits per byte at or above which the probe's bytes count as noise (byte entropy of the first
 * PACK_PROBE_BYTES, see packStoredForm). Huffman coding alone cannot shrink bytes of that
 * entropy by the probe's 1/16 (0.5 bit a byte); only repeats could. Random samples of 1–2 KiB
 * measure 7.73–7.95 (the estimate from a small sample runs low), text and source 4–6.
 */
export const PACK_NOISE_BITS = 7.6;

/** c·log2(c) for the byte counts of a probe (0 for 0). */
const C_LOG_C = Float64Array.from({ length: PACK_PROBE_BYTES + 1 }, (_, c) => (c > 0 ? c * Math.log2(c) : 0));
const counts = new Int32Array(256);

/**
 * Whether `probe` (at most PACK_PROBE_BYTES) has a byte entropy of PACK_NOISE_BITS or more:
 * log2(n) − Σ c·log2(c) / n over the 256 byte counts c. ~5–10 µs for 2 KiB, against ~80 µs
 * for the probe's deflate (most of it setting up a zlib stream; issue #16).
 */
export function looksLikeNoise(probe: Uint8Array): boolean {
  const n = probe.byteLength;
  counts.fill(0);
  for (let i = 0; i < n; i++) counts[probe[i]!]!++;
  let sum = 0;
  for (let b = 0; b < 256; b++) sum += C_LOG_C[counts[b]!]!;
  return Math.log2(n) - sum / n >= PACK_NOISE_BITS;
}

/**
 * Deflate when it saves at least 1/8 of the bytes, otherwise store. A content longer than
 * twice the probe whose first PACK_PROBE_BYTES are noise (looksLikeNoise: byte entropy of
 * PACK_NOISE_BITS or more) or do not shrink by 1/16 at level 1 is stored without deflating
 * the rest (issue #16: already-compressed or random files, e.g. the 100,000 synthetic files
 * of the small-files bench, cost ~0.25 ms of CPU each to deflate for nothing, then ~80 µs each
 * for the probe's deflate; a file that is noise at its start and text after it is stored, a
 * small loss, as is a start of noise repeated within the probe, which deflate would have shrunk).
 */
export function packStoredForm(raw: Uint8Array): { bytes: Uint8Array; compression: PackCompressionCode } {
  if (raw.byteLength > 2 * PACK_PROBE_BYTES) {
    if (looksLikeNoise(raw.subarray(0, PACK_PROBE_BYTES))) return { bytes: raw, compression: 0 };
    const probe = deflateRawSync(raw.subarray(0, PACK_PROBE_BYTES), { level: 1 });
    if (probe.byteLength > PACK_PROBE_BYTES - (PACK_PROBE_BYTES >> 4)) return { bytes: raw, compression: 0 };
  }
  if (raw.byteLength >= 64) {
    const d = deflateRawSync(raw, { level: PACK_DEFLATE_LEVEL });
    if (d.byteLength <= raw.byteLength - (raw.byteLength >> 3)) return { bytes: d, compression: 1 };
  }
  return { bytes: raw, compression: 0 };
}

/**
 * Builds a pack incrementally: add() appends content (deduplicated by hash within the pack),
 * finish() returns the body chunks, footer and trailer as one list of chunks to upload.
 */
export class PackBuilder {
  private readonly chunks: Uint8Array[] = [];
  private readonly entries: PackEntry[] = [];
  private readonly seen = new Set<string>();
  private bodyBytes = 0;

  get size(): number {
    return this.bodyBytes;
  }
  get count(): number {
    return this.entries.length;
  }
  has(sha256: string): boolean {
    return this.seen.has(sha256);
  }

  /**
   * Append `raw`; `sha256` is computed when not given (and checked when given, unless
   * `hashChecked`: the caller has just checked `raw` against it, as the proxy's bundle
   * decoder does for the bytes it hands the packer from memory). `compress`: whether to
   * deflate (packStoredForm), or `raw`'s stored form already worked out by that rule
   * elsewhere (the proxy's pack-worker.ts).
   */
  add(
    raw: Uint8Array,
    sha256?: string,
    compress: boolean | { bytes: Uint8Array; compression: PackCompressionCode } = true,
    hashChecked = false,
  ): PackEntry | undefined {
    const sha = hashChecked && sha256 !== undefined ? sha256 : createHash('sha256').update(raw).digest('hex');
    if (sha256 !== undefined && sha256 !== sha) fail('CHECKSUM_MISMATCH', `content is not ${sha256}`);
    if (raw.byteLength > PACK_MAX_ENTRY_BYTES) fail('TOO_LARGE', `content of ${raw.byteLength} bytes`);
    if (this.seen.has(sha)) return undefined;
    if (this.entries.length >= PACK_MAX_ENTRIES) fail('TOO_LARGE', 'too many entries');
    const stored =
      typeof compress === 'object'
        ? compress
        : compress
          ? packStoredForm(raw)
          : { bytes: raw, compression: 0 as const };
    const entry: PackEntry = {
      sha256: sha,
      offset: this.bodyBytes,
      length: stored.bytes.byteLength,
      rawLength: raw.byteLength,
      compression: stored.compression,
    };
    this.chunks.push(stored.bytes);
    this.entries.push(entry);
    this.seen.add(sha);
    this.bodyBytes += stored.bytes.byteLength;
    return entry;
  }

  finish(): { chunks: Uint8Array[]; entries: readonly PackEntry[]; size: number } {
    const footer = encodePackFooter(this.entries);
    const trailer = encodePackTrailer({
      version: PACK_VERSION,
      footerOffset: this.bodyBytes,
      entryCount: this.entries.length,
      footerCrc32: crc32(footer),
    });
    const chunks = [...this.chunks, footer, trailer];
    return { chunks, entries: this.entries, size: this.bodyBytes + footer.byteLength + trailer.byteLength };
  }
}

export function encodePackFooter(entries: readonly PackEntry[]): Uint8Array {
  const w = new ByteWriter(entries.length * PACK_FOOTER_RECORD_SIZE + 1);
  for (const e of entries) {
    if (!isSha256Hex(e.sha256)) fail('BAD_FIELD', `not a SHA-256: ${e.sha256}`);
    w.bytes(hexToBytes(e.sha256)).u64(e.offset).u32(e.length).u32(e.rawLength).u8(e.compression);
  }
  return w.finish();
}

export function encodePackTrailer(t: PackTrailer): Uint8Array {
  return new ByteWriter(PACK_TRAILER_SIZE)
    .bytes(PACK_MAGIC)
    .u16(t.version)
    .u16(0)
    .u64(t.footerOffset)
    .u32(t.entryCount)
    .u32(t.footerCrc32)
    .finish();
}

/** Decode the last PACK_TRAILER_SIZE bytes of a pack of `packSize` bytes. */
export function decodePackTrailer(bytes: Uint8Array, packSize: number): PackTrailer {
  if (bytes.byteLength !== PACK_TRAILER_SIZE) fail('TRUNCATED', `trailer is ${bytes.byteLength} bytes`);
  if (!startsWith(bytes, PACK_MAGIC)) fail('BAD_MAGIC', 'not a pack (magic)');
  const r = new ByteReader(bytes, 'pack');
  r.take(4, 'magic');
  const version = r.u16('version');
  if (version !== PACK_VERSION) fail('UNSUPPORTED_VERSION', `pack version ${version}`);
  if (r.u16('reserved') !== 0) fail('BAD_HEADER', 'reserved bytes are not zero');
  const footerOffset = r.u64('footer offset');
  const entryCount = r.u32('entry count');
  const footerCrc32 = r.u32('footer crc');
  if (entryCount > PACK_MAX_ENTRIES) fail('TOO_LARGE', `${entryCount} entries`);
  if (footerOffset + entryCount * PACK_FOOTER_RECORD_SIZE + PACK_TRAILER_SIZE !== packSize)
    fail(
      'BAD_HEADER',
      `footer at ${footerOffset} with ${entryCount} entries does not end a ${packSize}-byte pack`,
    );
  return { version, footerOffset, entryCount, footerCrc32 };
}

/** Decode the footer (bytes footerOffset .. size-24) against its trailer. */
export function decodePackFooter(bytes: Uint8Array, trailer: PackTrailer): PackEntry[] {
  if (bytes.byteLength !== trailer.entryCount * PACK_FOOTER_RECORD_SIZE)
    fail('TRUNCATED', `footer is ${bytes.byteLength} bytes for ${trailer.entryCount} entries`);
  if (crc32(bytes) !== trailer.footerCrc32) fail('CHECKSUM_MISMATCH', 'footer CRC-32 mismatch');
  const r = new ByteReader(bytes, 'pack');
  const out: PackEntry[] = [];
  let end = 0;
  const seen = new Set<string>();
  for (let i = 0; i < trailer.entryCount; i++) {
    const sha256 = bytesToHex(r.take(32, 'hash'));
    const offset = r.u64('offset');
    const length = r.u32('length');
    const rawLength = r.u32('raw length');
    const compression = r.u8('compression');
    if (compression !== 0 && compression !== 1) fail('BAD_FIELD', `compression ${compression}`);
    if (compression === 0 && length !== rawLength) fail('BAD_FIELD', 'stored entry with two lengths');
    if (offset < end || offset + length > trailer.footerOffset)
      fail('BAD_FIELD', `entry ${i} out of order or bounds`);
    if (rawLength > PACK_MAX_ENTRY_BYTES) fail('TOO_LARGE', `entry ${i} of ${rawLength} bytes`);
    if (seen.has(sha256)) fail('DUPLICATE_PATH', `hash ${sha256} twice`);
    seen.add(sha256);
    end = offset + length;
    out.push({ sha256, offset, length, rawLength, compression });
  }
  return out;
}

/** The raw content of one entry from its stored bytes, checked against its hash. */
export function unpackEntry(stored: Uint8Array, entry: PackEntry): Uint8Array {
  if (stored.byteLength !== entry.length)
    fail('TRUNCATED', `entry has ${stored.byteLength} of ${entry.length} bytes`);
  const raw = entry.compression === 1 ? inflateExact(stored, entry.rawLength, 'pack', 'entry') : stored;
  if (createHash('sha256').update(raw).digest('hex') !== entry.sha256)
    fail('CHECKSUM_MISMATCH', `entry is not ${entry.sha256}`);
  return raw;
}

/** Decode a whole pack held in memory (tests, repack). */
export function decodePack(pack: Uint8Array): PackEntry[] {
  if (pack.byteLength < PACK_TRAILER_SIZE) fail('TRUNCATED', 'shorter than a trailer');
  const trailer = decodePackTrailer(pack.subarray(pack.byteLength - PACK_TRAILER_SIZE), pack.byteLength);
  return decodePackFooter(pack.subarray(trailer.footerOffset, pack.byteLength - PACK_TRAILER_SIZE), trailer);
}

/**
 * Coalesce the ranges of one pack into reads: entries whose gap is at most `maxGap` bytes
 * share one read (Coral's segment reads). Returns groups in offset order.
 */
export function coalescePackRanges<T extends { offset: number; length: number }>(
  entries: readonly T[],
  maxGap = 64 * 1024,
  maxRead = 16 * 1024 * 1024,
): { offset: number; length: number; entries: T[] }[] {
  const sorted = [...entries].sort((a, b) => a.offset - b.offset);
  const groups: { offset: number; length: number; entries: T[] }[] = [];
  for (const e of sorted) {
    const g = groups.at(-1);
    const end = g ? g.offset + g.length : 0;
    if (g && e.offset - end <= maxGap && e.offset + e.length - g.offset <= maxRead) {
      g.length = Math.max(end, e.offset + e.length) - g.offset;
      g.entries.push(e);
    } else groups.push({ offset: e.offset, length: e.length, entries: [e] });
  }
  return groups;
}
