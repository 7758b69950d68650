/**
 * The bundle: many small files in one transfer of at most 4 MiB (docs/formats/bundle.md).
 * Used both ways: client → server uploads (each entry's `rev` is the base revision of a
 * conditional write; version 1) and server → client batch downloads (`rev` is the server
 * revision; version 2, which also lists the requested paths left out and why).
 */
import { createHash } from 'node:crypto';
import { normalizeEntryPath } from '@weft/providers/paths';
import {
  ascii,
  ByteReader,
  ByteWriter,
  bytesToHex,
  crc32,
  deflate,
  deflateAsync,
  inflateExact,
  isSha256Hex,
  startsWith,
} from './bytes.ts';
import { WireFormatError } from './errors.ts';

export const BUNDLE_MAGIC = ascii('WFTB');
/** Version of a bundle without deferred records (uploads). */
export const BUNDLE_VERSION = 1;
/** Version of a bundle answering a batch download: entries, then deferred records. */
export const BUNDLE_VERSION_DEFERRED = 2;
/** Version of an upload bundle whose entries name contents of their own: entries, then own records. */
export const BUNDLE_VERSION_OWN = 3;
export const BUNDLE_HEADER_SIZE = 24;
export const BUNDLE_TRAILER_SIZE = 4;
/** Default (and maximum) size of an encoded bundle: one transfer block. */
export const MAX_BUNDLE_BYTES = 4 * 1024 * 1024;
/** Largest entries area once inflated. */
export const MAX_BUNDLE_RAW_BYTES = 64 * 1024 * 1024;
export const MAX_BUNDLE_ENTRIES = 65_536;
export const MAX_REVISION_LENGTH = 255;
/** Most deferred records in one bundle (a download request names at most 10,000 paths). */
export const MAX_BUNDLE_DEFERRED = 65_536;
/** Bytes of one deferred record: request index (u32) and reason (u8). */
export const BUNDLE_DEFERRED_RECORD_SIZE = 5;
/** Bytes of one own record: entry index (u32) and a SHA-256. */
export const BUNDLE_OWN_RECORD_SIZE = 36;
/** Most own records one entry may carry. */
export const MAX_OWN_PER_ENTRY = 16;

const FLAG_COMPRESSED = 0x01;
const REV_NONE = 0;
const REV_ABSENT = 1;
const REV_VALUE = 2;
const REVISION_CHARS = /^[\x21-\x7e]+$/;

/**
 * A revision attached to an entry: `undefined` = none (unconditional write / not stated),
 * `null` = "must not exist" (a create), a string = that exact revision.
 */
export type BundleRevision = string | null | undefined;

export interface BundleEntry {
  /** Canonical provider path (paths.ts), never the root. */
  readonly path: string;
  readonly rev?: string | null;
  /** Modification time, ms since the epoch (0..2^53-1). */
  readonly mtimeMs: number;
  /** Lower-case hex SHA-256 of `content`. */
  readonly sha256: string;
  readonly content: Uint8Array;
  /**
   * Upload only: contents (hex SHA-256s) this device sent to `path` before and never heard
   * the answer for (an agent killed with them on the wire). A file there holding one of them
   * is this device's own write, so the entry is written over it as over its base revision
   * (write-rule.ts). At most MAX_OWN_PER_ENTRY; carried as own records (version 3).
   */
  readonly own?: readonly string[];
}

/**
 * Why a requested path is not in a download bundle: `absent` — no file there (nothing, or a
 * folder; the feed tells what it is); `large` — a large file, fetch it with GET /v1/files;
 * `later` — no room left in this bundle, ask again; `changed` — it changed while being
 * read, ask again.
 */
export type BundleDeferredReason = 'absent' | 'large' | 'later' | 'changed';
const DEFERRED_REASONS: readonly BundleDeferredReason[] = ['absent', 'large', 'later', 'changed'];

/** A requested path left out of a download bundle, named by its index in the request. */
export interface BundleDeferred {
  readonly index: number;
  readonly reason: BundleDeferredReason;
}

export interface EncodeBundleOptions {
  /** Deflate the entries area (the caller decides adaptively whether it pays). */
  readonly compress?: boolean;
  /**
   * Deferred records, by increasing request index: given (even empty), the bundle is a
   * version-2 download answer; omitted, a version-1 bundle.
   */
  readonly deferred?: readonly BundleDeferred[];
  /** Refuse to produce more than this many bytes (default MAX_BUNDLE_BYTES). */
  readonly maxBytes?: number;
  /**
   * A buffer to encode into (issue #16: the agent sends every bundle from a few reused ones
   * instead of a fresh 4 MiB buffer each): the bundle returned is a view of it when it fits,
   * else a buffer of its own. Its bytes are overwritten; the entries' contents must not lie in it.
   */
  readonly into?: Uint8Array;
  /**
   * The caller has checked each entry where it came in — its path a canonical entry path, its
   * sha256 64 lower-case hex digits, its revision one the server gave — so they are not
   * checked again per entry (issue #16: the agent's paths come from its scan or the server's
   * checked answers; the receiver's decodeBundle checks everything anyway). Duplicate paths
   * are still refused.
   */
  readonly entriesChecked?: boolean;
}

export interface DecodeBundleOptions {
  /** Reject inputs longer than this (default MAX_BUNDLE_BYTES). */
  readonly maxBytes?: number;
  /** Verify each entry's SHA-256 against its content (default true). */
  readonly verifyHashes?: boolean;
}

export interface DecodedBundle {
  readonly version: 1 | 2 | 3;
  readonly compressed: boolean;
  readonly entries: BundleEntry[];
  /** Version 2 only (empty in version 1): the requested paths left out, and why. */
  readonly deferred: BundleDeferred[];
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

function bad(code: ConstructorParameters<typeof WireFormatError>[1], message: string): never {
  throw new WireFormatError('bundle', code, message);
}

/** The SHA-256 (hex) of some bytes, as bundle entries carry it. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/**
 * Bytes one entry takes in the entries area, with its `own` records if it has any; lets a
 * packer fill a bundle up to its limit.
 */
export function bundleEntrySize(path: string, rev: BundleRevision, size: number, own = 0): number {
  const revBytes = typeof rev === 'string' ? 1 + rev.length : 0;
  return (
    2 + Buffer.byteLength(path, 'utf8') + 1 + revBytes + 8 + 4 + 32 + size + BUNDLE_OWN_RECORD_SIZE * own
  );
}

/** Fixed overhead of a bundle besides its entries. */
export const BUNDLE_OVERHEAD = BUNDLE_HEADER_SIZE + BUNDLE_TRAILER_SIZE;

/**
 * The room of a download bundle's answer (POST /v1/bundles/download), the one rule the
 * proxy and the client's in-memory proxy fill it by: room for a deferred record per
 * requested path is kept from the start, so the answer never exceeds the bundle limit;
 * a file is deferred when absent (or a folder), in the large tier (or without a hash), or
 * when it no longer fits ('later'). `place` answers the reason or the bytes it would take;
 * `take` spends them once the file goes in.
 */
/** What BundleRoom.place needs to know of the entry at a requested path. */
export interface BundleCandidate {
  readonly kind: 'file' | 'dir';
  readonly tier?: 'small' | 'large' | undefined;
  readonly sha256?: string | undefined;
  readonly revision: string;
  readonly size: number;
}

export class BundleRoom {
  private used: number;
  constructor(requested: number) {
    this.used = BUNDLE_OVERHEAD + BUNDLE_DEFERRED_RECORD_SIZE * requested;
  }

  place<E extends BundleCandidate>(
    path: string,
    e: E | undefined,
  ):
    | { readonly reason: BundleDeferredReason }
    | { readonly cost: number; readonly entry: E & { sha256: string } } {
    if (!e || e.kind !== 'file') return { reason: 'absent' };
    const sha256 = e.sha256;
    if (e.tier === 'large' || !sha256) return { reason: 'large' };
    const cost = bundleEntrySize(path, e.revision, e.size);
    return this.used + cost > MAX_BUNDLE_BYTES ? { reason: 'later' } : { cost, entry: { ...e, sha256 } };
  }

  take(cost: number): void {
    this.used += cost;
  }
}

function checkPath(path: string): string {
  let canonical: string;
  try {
    canonical = normalizeEntryPath(path);
  } catch (cause) {
    throw new WireFormatError('bundle', 'BAD_PATH', (cause as Error).message, { cause });
  }
  if (canonical !== path) bad('BAD_PATH', `path ${JSON.stringify(path)} is not in canonical (NFC) form`);
  return canonical;
}

function checkRevision(rev: string): void {
  if (rev.length === 0 || rev.length > MAX_REVISION_LENGTH || !REVISION_CHARS.test(rev)) {
    bad(
      'BAD_FIELD',
      `revision ${JSON.stringify(rev.slice(0, 300))} is not 1..255 printable ASCII characters`,
    );
  }
}

export function encodeBundle(entries: readonly BundleEntry[], options: EncodeBundleOptions = {}): Uint8Array {
  const area = entriesArea(entries, options);
  if (options.compress !== true) return frameInPlace(area, entries.length, options);
  return frameBundle(area.raw, deflate(area.raw), entries.length, options, area.own);
}

/**
 * encodeBundle with the deflate (when `compress`) in zlib's thread pool instead of on the
 * caller's thread: a 4 MiB bundle deflated inline held the agent's event loop for 100 ms and
 * more (issue #16). The bytes are the same as encodeBundle's.
 */
export async function encodeBundleAsync(
  entries: readonly BundleEntry[],
  options: EncodeBundleOptions = {},
): Promise<Uint8Array> {
  const area = entriesArea(entries, options);
  if (options.compress !== true) return frameInPlace(area, entries.length, options);
  return frameBundle(area.raw, await deflateAsync(area.raw), entries.length, options, area.own);
}

/**
 * The entries area (and deferred records) of a bundle, checked, before any compression —
 * written after BUNDLE_HEADER_SIZE free bytes, with room for the trailer after it, so an
 * uncompressed bundle is framed around it in place (frameInPlace) instead of copied into a
 * second buffer of its size (issue #16: three 4 MiB buffers per bundle, the agent's native
 * memory piling up between collections).
 */
function entriesArea(
  entries: readonly BundleEntry[],
  options: EncodeBundleOptions,
): { readonly writer: ByteWriter; readonly raw: Uint8Array; readonly own: number } {
  if (entries.length > MAX_BUNDLE_ENTRIES)
    bad('TOO_LARGE', `${entries.length} entries (max ${MAX_BUNDLE_ENTRIES})`);
  const seen = new Set<string>();
  let ownCount = 0;
  for (const e of entries) ownCount += e.own?.length ?? 0;
  if (ownCount > 0 && options.deferred) bad('BAD_FIELD', 'own records in a download answer');
  // Sized up front (exact for ASCII paths; the writer grows if not): one allocation, not a
  // doubling copy per step of a 4 MiB area.
  let estimate =
    BUNDLE_DEFERRED_RECORD_SIZE * (options.deferred?.length ?? 0) + BUNDLE_OWN_RECORD_SIZE * ownCount;
  for (const e of entries)
    estimate +=
      2 + e.path.length + 1 + (typeof e.rev === 'string' ? 1 + e.rev.length : 0) + 44 + e.content.byteLength;
  const capacity =
    BUNDLE_HEADER_SIZE + Math.max(256, Math.min(estimate, MAX_BUNDLE_RAW_BYTES + 1)) + BUNDLE_TRAILER_SIZE;
  const body = new ByteWriter(options.into && options.into.byteLength >= capacity ? options.into : capacity);
  body.offset = BUNDLE_HEADER_SIZE;
  const checked = options.entriesChecked === true;
  for (const e of entries) {
    const path = checked ? e.path : checkPath(e.path);
    if (seen.has(path)) bad('DUPLICATE_PATH', `${JSON.stringify(path)} appears twice`);
    seen.add(path);
    if (!checked && !isSha256Hex(e.sha256))
      bad('BAD_FIELD', `sha256 of ${JSON.stringify(path)} is not 64 lower-case hex digits`);
    if (!Number.isSafeInteger(e.mtimeMs) || e.mtimeMs < 0) bad('BAD_FIELD', `bad mtimeMs ${e.mtimeMs}`);
    if (e.content.byteLength > 0xffffffff) bad('TOO_LARGE', `${path} is too large for a bundle`);
    // Strings written in place, not encoded into a buffer each (issue #16: garbage per file).
    body.utf8WithU16Length(path);
    if (e.rev === undefined) body.u8(REV_NONE);
    else if (e.rev === null) body.u8(REV_ABSENT);
    else {
      if (!checked) checkRevision(e.rev);
      body.u8(REV_VALUE).u8(e.rev.length).ascii(e.rev);
    }
    body.u64(e.mtimeMs).u32(e.content.byteLength).hex(e.sha256).bytes(e.content);
  }
  if (ownCount > 0) writeOwnRecords(body, entries);
  const deferred = options.deferred;
  if (deferred) {
    if (deferred.length > MAX_BUNDLE_DEFERRED)
      bad('TOO_LARGE', `${deferred.length} deferred records (max ${MAX_BUNDLE_DEFERRED})`);
    let last = -1;
    for (const d of deferred) {
      if (!Number.isInteger(d.index) || d.index <= last || d.index > 0xffffffff)
        bad('BAD_FIELD', `deferred index ${d.index} is not above ${last}`);
      last = d.index;
      const reason = DEFERRED_REASONS.indexOf(d.reason);
      if (reason < 0) bad('BAD_FIELD', `unknown deferred reason ${JSON.stringify(d.reason)}`);
      body.u32(d.index).u8(reason + 1);
    }
  }
  const raw = body.written().subarray(BUNDLE_HEADER_SIZE);
  if (raw.byteLength > MAX_BUNDLE_RAW_BYTES) bad('TOO_LARGE', `entries area of ${raw.byteLength} bytes`);
  return { writer: body, raw, own: ownCount };
}

/** Own records, after the entries: entry index and SHA-256, by entry. */
function writeOwnRecords(body: ByteWriter, entries: readonly BundleEntry[]): void {
  entries.forEach((e, i) => {
    const own = e.own ?? [];
    if (own.length > MAX_OWN_PER_ENTRY)
      bad('TOO_LARGE', `${own.length} own records for ${JSON.stringify(e.path)} (max ${MAX_OWN_PER_ENTRY})`);
    for (const sha of own) {
      if (!isSha256Hex(sha)) bad('BAD_FIELD', `an own record of ${JSON.stringify(e.path)} is not a SHA-256`);
      body.u32(i).hex(sha);
    }
  });
}

/** An uncompressed bundle: the header and trailer written around its entries area, in its buffer. */
function frameInPlace(
  area: { readonly writer: ByteWriter; readonly raw: Uint8Array; readonly own: number },
  count: number,
  options: EncodeBundleOptions,
): Uint8Array {
  const { writer, raw } = area;
  const end = writer.offset;
  checkTotal(raw.byteLength, options);
  writer.offset = 0;
  header(writer, raw.byteLength, raw.byteLength, count, false, options, area.own);
  writer.offset = end;
  writer.u32(crc32(writer.written()));
  return writer.written();
}

function checkTotal(stored: number, options: EncodeBundleOptions): void {
  const total = BUNDLE_HEADER_SIZE + stored + BUNDLE_TRAILER_SIZE;
  const max = options.maxBytes ?? MAX_BUNDLE_BYTES;
  if (total > max) bad('TOO_LARGE', `bundle of ${total} bytes exceeds the limit of ${max}`);
}

function header(
  out: ByteWriter,
  rawBytes: number,
  storedBytes: number,
  count: number,
  compressed: boolean,
  options: EncodeBundleOptions,
  own: number,
): void {
  const deferred = options.deferred;
  out
    .bytes(BUNDLE_MAGIC)
    .u8(deferred ? BUNDLE_VERSION_DEFERRED : own > 0 ? BUNDLE_VERSION_OWN : BUNDLE_VERSION)
    .u8(compressed ? FLAG_COMPRESSED : 0)
    .u16(0)
    .u32(count)
    .u32(rawBytes)
    .u32(storedBytes)
    .u32(deferred ? deferred.length : own);
}

/** Header, the deflated entries area, CRC trailer. */
function frameBundle(
  raw: Uint8Array,
  stored: Uint8Array,
  count: number,
  options: EncodeBundleOptions,
  own: number,
): Uint8Array {
  checkTotal(stored.byteLength, options);
  const size = BUNDLE_HEADER_SIZE + stored.byteLength + BUNDLE_TRAILER_SIZE;
  // `into` held the entries area (`raw`), read by now: the deflated bytes go over it.
  const out = new ByteWriter(options.into && options.into.byteLength >= size ? options.into : size);
  header(out, raw.byteLength, stored.byteLength, count, true, options, own);
  out.bytes(stored);
  out.u32(crc32(out.written()));
  return out.written();
}

export function decodeBundle(bytes: Uint8Array, options: DecodeBundleOptions = {}): DecodedBundle {
  const max = options.maxBytes ?? MAX_BUNDLE_BYTES;
  if (bytes.byteLength > max) bad('TOO_LARGE', `${bytes.byteLength} bytes exceeds the limit of ${max}`);
  const r = new ByteReader(bytes, 'bundle');
  r.need(4, 'the magic');
  if (!startsWith(bytes, BUNDLE_MAGIC)) bad('BAD_MAGIC', 'not a Weft bundle (magic "WFTB")');
  r.take(4, 'the magic');
  const version = r.u8('the version');
  if (version !== BUNDLE_VERSION && version !== BUNDLE_VERSION_DEFERRED && version !== BUNDLE_VERSION_OWN)
    bad('UNSUPPORTED_VERSION', `unknown version ${version}`);
  const flags = r.u8('the flags');
  if ((flags & ~FLAG_COMPRESSED) !== 0) bad('BAD_HEADER', `unknown flags 0x${flags.toString(16)}`);
  if (r.u16('reserved') !== 0) bad('BAD_HEADER', 'reserved bytes are not zero');
  const count = r.u32('the entry count');
  const rawLength = r.u32('the raw length');
  const storedLength = r.u32('the stored length');
  // Version 1: reserved; 2: the deferred count; 3: the own-record count.
  const records = r.u32(version === BUNDLE_VERSION ? 'reserved' : 'the record count');
  if (version === BUNDLE_VERSION && records !== 0) bad('BAD_HEADER', 'reserved bytes are not zero');
  const deferredCount = version === BUNDLE_VERSION_DEFERRED ? records : 0;
  const ownCount = version === BUNDLE_VERSION_OWN ? records : 0;
  if (deferredCount > MAX_BUNDLE_DEFERRED)
    bad('TOO_LARGE', `${deferredCount} deferred records (max ${MAX_BUNDLE_DEFERRED})`);
  if (version === BUNDLE_VERSION_OWN && (ownCount === 0 || ownCount > MAX_OWN_PER_ENTRY * count))
    bad('BAD_HEADER', `${ownCount} own records for ${count} entries`);
  if (count > MAX_BUNDLE_ENTRIES) bad('TOO_LARGE', `${count} entries (max ${MAX_BUNDLE_ENTRIES})`);
  if (rawLength > MAX_BUNDLE_RAW_BYTES) bad('TOO_LARGE', `entries area of ${rawLength} bytes`);
  const compressed = (flags & FLAG_COMPRESSED) !== 0;
  if (!compressed && rawLength !== storedLength)
    bad('BAD_HEADER', 'raw and stored lengths differ without compression');
  const stored = r.take(storedLength, 'the entries area');
  const crcAt = r.offset;
  const crc = r.u32('the CRC-32 trailer');
  r.expectEnd('the bundle');
  if (crc32(bytes.subarray(0, crcAt)) !== crc) bad('CHECKSUM_MISMATCH', 'CRC-32 does not match');
  const raw = compressed ? inflateExact(stored, rawLength, 'bundle', 'the entries area') : stored;
  const body = new ByteReader(raw, 'bundle');
  const verify = options.verifyHashes ?? true;
  const seen = new Set<string>();
  const entries: BundleEntry[] = [];
  for (let i = 0; i < count; i++) {
    const pathLength = body.u16('a path length');
    if (pathLength === 0) bad('BAD_PATH', `entry ${i} has an empty path`);
    let text: string;
    try {
      text = strictUtf8.decode(body.take(pathLength, 'a path'));
    } catch (cause) {
      throw new WireFormatError('bundle', 'BAD_PATH', `entry ${i}: path is not valid UTF-8`, { cause });
    }
    const path = checkPath(text);
    if (seen.has(path)) bad('DUPLICATE_PATH', `${JSON.stringify(path)} appears twice`);
    seen.add(path);
    const revKind = body.u8('a revision kind');
    let rev: string | null | undefined;
    if (revKind === REV_NONE) rev = undefined;
    else if (revKind === REV_ABSENT) rev = null;
    else if (revKind === REV_VALUE) {
      const n = body.u8('a revision length');
      rev = String.fromCharCode(...body.take(n, 'a revision'));
      checkRevision(rev);
    } else bad('BAD_FIELD', `entry ${i}: unknown revision kind ${revKind}`);
    const mtimeMs = body.u64('an mtime');
    const size = body.u32('a size');
    const sha256 = bytesToHex(body.take(32, 'a SHA-256'));
    const content = body.take(size, `the content of ${JSON.stringify(path)}`);
    if (verify && sha256Hex(content) !== sha256) {
      bad('CHECKSUM_MISMATCH', `SHA-256 of ${JSON.stringify(path)} does not match its content`);
    }
    entries.push(
      rev === undefined ? { path, mtimeMs, sha256, content } : { path, rev, mtimeMs, sha256, content },
    );
  }
  if (ownCount > 0) readOwnRecords(body, entries, ownCount);
  const deferred: BundleDeferred[] = [];
  for (let i = 0; i < deferredCount; i++) {
    const index = body.u32('a deferred index');
    const code = body.u8('a deferred reason');
    const reason = DEFERRED_REASONS[code - 1];
    if (!reason) bad('BAD_FIELD', `deferred record ${i}: unknown reason ${code}`);
    const last = deferred.at(-1);
    if (last && index <= last.index) bad('BAD_FIELD', `deferred record ${i}: indices not increasing`);
    deferred.push({ index, reason });
  }
  body.expectEnd('the entries area');
  return { version: version as 1 | 2 | 3, compressed, entries, deferred };
}

/** Own records (version 3): by increasing entry index, at most MAX_OWN_PER_ENTRY an entry. */
function readOwnRecords(body: ByteReader, entries: BundleEntry[], count: number): void {
  let last = -1;
  let own: string[] = [];
  const flush = (): void => {
    if (last >= 0) entries[last] = { ...(entries[last] as BundleEntry), own };
  };
  for (let i = 0; i < count; i++) {
    const index = body.u32('an own record index');
    if (index >= entries.length) bad('BAD_FIELD', `own record ${i}: entry ${index} does not exist`);
    if (index < last) bad('BAD_FIELD', `own record ${i}: entry indices not in order`);
    if (index !== last) {
      flush();
      last = index;
      own = [];
    }
    const sha = bytesToHex(body.take(32, 'an own SHA-256'));
    if (own.length === MAX_OWN_PER_ENTRY)
      bad('TOO_LARGE', `more than ${MAX_OWN_PER_ENTRY} own records for entry ${index}`);
    own.push(sha);
  }
  flush();
}
