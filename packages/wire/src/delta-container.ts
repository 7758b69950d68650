/**
 * The delta container: an rsync-wasm delta (format "WFTD") wrapped with the hashes of the
 * content it applies to and the content it produces, optionally deflated
 * (docs/formats/transfer-block.md, "Delta container"). Used for delta uploads and for
 * delta downloads.
 */
import {
  ascii,
  ByteReader,
  ByteWriter,
  bytesToHex,
  crc32,
  deflate,
  hexToBytes,
  inflateExact,
  isSha256Hex,
  startsWith,
} from './bytes.ts';
import { once } from 'node:events';
import { crc32 as zlibCrc32, createInflateRaw } from 'node:zlib';
import { WireFormatError } from './errors.ts';

export const DELTA_CONTAINER_MAGIC = ascii('WFTX');
export const DELTA_CONTAINER_VERSION = 1;
export const DELTA_CONTAINER_HEADER_SIZE = 100;
export const DELTA_CONTAINER_TRAILER_SIZE = 4;
/** Default cap on the raw delta a decoder accepts (it is held in memory). */
export const MAX_DELTA_RAW_BYTES = 1024 * 1024 * 1024;

const FLAG_COMPRESSED = 0x01;
const RSYNC_DELTA_MAGIC = ascii('WFTD');

export interface DeltaContainer {
  /** Hex SHA-256 of the old content the delta applies to. */
  readonly baseSha256: string;
  /** Hex SHA-256 of the content the delta produces. */
  readonly targetSha256: string;
  readonly targetSize: number;
  /** The rsync-wasm delta bytes (start with "WFTD"). */
  readonly delta: Uint8Array;
}

export interface DecodedDeltaContainer extends DeltaContainer {
  readonly compressed: boolean;
  /** Bytes the delta occupied on the wire. */
  readonly storedLength: number;
}

function bad(code: ConstructorParameters<typeof WireFormatError>[1], message: string): never {
  throw new WireFormatError('delta-container', code, message);
}

export function encodeDeltaContainer(c: DeltaContainer, options: { compress?: boolean } = {}): Uint8Array {
  if (!startsWith(c.delta, RSYNC_DELTA_MAGIC))
    bad('BAD_FIELD', 'delta is not an rsync-wasm delta (magic "WFTD")');
  const compressed = options.compress === true;
  const stored = compressed ? deflate(c.delta) : c.delta;
  const header = encodeDeltaContainerHeader({
    baseSha256: c.baseSha256,
    targetSha256: c.targetSha256,
    targetSize: c.targetSize,
    rawLength: c.delta.byteLength,
    storedLength: stored.byteLength,
    compressed,
  });
  const w = new ByteWriter(DELTA_CONTAINER_HEADER_SIZE + stored.byteLength + DELTA_CONTAINER_TRAILER_SIZE);
  w.bytes(header);
  w.bytes(stored);
  w.u32(crc32(stored));
  return w.finish();
}

/**
 * The 100-byte header alone, for a writer that streams the payload after it (the payload
 * is then followed by the u32 CRC-32 of the stored bytes).
 */
export function encodeDeltaContainerHeader(h: DeltaContainerHeader): Uint8Array {
  if (!isSha256Hex(h.baseSha256) || !isSha256Hex(h.targetSha256))
    bad('BAD_FIELD', 'hashes must be 64 lower-case hex digits');
  for (const [name, v] of [
    ['target size', h.targetSize],
    ['raw length', h.rawLength],
    ['stored length', h.storedLength],
  ] as const)
    if (!Number.isSafeInteger(v) || v < 0) bad('BAD_FIELD', `bad ${name} ${v}`);
  if (!h.compressed && h.rawLength !== h.storedLength)
    bad('BAD_FIELD', 'stored and raw lengths differ without compression');
  const w = new ByteWriter(DELTA_CONTAINER_HEADER_SIZE);
  w.bytes(DELTA_CONTAINER_MAGIC)
    .u8(DELTA_CONTAINER_VERSION)
    .u8(h.compressed ? FLAG_COMPRESSED : 0)
    .u16(0)
    .bytes(hexToBytes(h.baseSha256))
    .bytes(hexToBytes(h.targetSha256))
    .u64(h.targetSize)
    .u64(h.rawLength)
    .u64(h.storedLength);
  w.u32(crc32(w.finish()));
  return w.finish();
}

/** The fixed-size header of a delta container, read before its payload. */
export interface DeltaContainerHeader {
  readonly baseSha256: string;
  readonly targetSha256: string;
  readonly targetSize: number;
  /** Length of the rsync-wasm delta once inflated. */
  readonly rawLength: number;
  /** Length of the payload on the wire. */
  readonly storedLength: number;
  readonly compressed: boolean;
}

/** Decodes and checks the 100-byte header (magic, version, flags, CRC, length limits). */
export function decodeDeltaContainerHeader(
  bytes: Uint8Array,
  options: { maxRawBytes?: number } = {},
): DeltaContainerHeader {
  const maxRaw = options.maxRawBytes ?? MAX_DELTA_RAW_BYTES;
  const r = new ByteReader(bytes, 'delta-container');
  r.need(4, 'the magic');
  if (!startsWith(bytes, DELTA_CONTAINER_MAGIC))
    bad('BAD_MAGIC', 'not a Weft delta container (magic "WFTX")');
  r.take(4, 'the magic');
  const version = r.u8('the version');
  if (version !== DELTA_CONTAINER_VERSION) bad('UNSUPPORTED_VERSION', `unknown version ${version}`);
  const flags = r.u8('the flags');
  if ((flags & ~FLAG_COMPRESSED) !== 0) bad('BAD_HEADER', `unknown flags 0x${flags.toString(16)}`);
  if (r.u16('reserved') !== 0) bad('BAD_HEADER', 'reserved bytes are not zero');
  r.need(DELTA_CONTAINER_HEADER_SIZE - 8, 'the header');
  const baseSha256 = bytesToHex(r.take(32, 'the base SHA-256'));
  const targetSha256 = bytesToHex(r.take(32, 'the target SHA-256'));
  const targetSize = r.u64('the target size');
  const rawLength = r.u64('the raw delta length');
  const storedLength = r.u64('the stored length');
  const crcAt = r.offset;
  const headerCrc = r.u32('the header CRC-32');
  if (crc32(bytes.subarray(0, crcAt)) !== headerCrc) bad('CHECKSUM_MISMATCH', 'header CRC-32 does not match');
  if (rawLength > maxRaw) bad('TOO_LARGE', `delta of ${rawLength} bytes exceeds the limit of ${maxRaw}`);
  const compressed = (flags & FLAG_COMPRESSED) !== 0;
  if (!compressed && rawLength !== storedLength)
    bad('BAD_HEADER', 'stored and raw lengths differ without compression');
  return { baseSha256, targetSha256, targetSize, rawLength, storedLength, compressed };
}

export function decodeDeltaContainer(
  bytes: Uint8Array,
  options: { maxRawBytes?: number } = {},
): DecodedDeltaContainer {
  const h = decodeDeltaContainerHeader(bytes.subarray(0, DELTA_CONTAINER_HEADER_SIZE), options);
  const r = new ByteReader(bytes, 'delta-container');
  r.take(DELTA_CONTAINER_HEADER_SIZE, 'the header');
  const stored = r.take(h.storedLength, 'the delta');
  const crc = r.u32('the payload CRC-32');
  r.expectEnd('the container');
  if (crc32(stored) !== crc) bad('CHECKSUM_MISMATCH', 'payload CRC-32 does not match');
  const delta = h.compressed ? inflateExact(stored, h.rawLength, 'delta-container', 'the delta') : stored;
  if (!startsWith(delta, RSYNC_DELTA_MAGIC))
    bad('BAD_FIELD', 'payload is not an rsync-wasm delta (magic "WFTD")');
  const { baseSha256, targetSha256, targetSize, compressed, storedLength } = h;
  return { baseSha256, targetSha256, targetSize, delta, compressed, storedLength };
}

/**
 * Reads a delta container from a stream without holding it: the header is decoded first
 * (so a caller can refuse the request before any payload arrives), then `delta` yields the
 * rsync-wasm delta as it arrives, inflating it when compressed. The payload CRC-32, the
 * exact raw length and the end of the input are checked when `delta` is exhausted, so its
 * output is only valid once the iteration completes (patch into a temporary file).
 */
export async function openDeltaContainerStream(
  source: AsyncIterable<Uint8Array>,
  options: { maxRawBytes?: number } = {},
): Promise<{ header: DeltaContainerHeader; delta: AsyncGenerator<Uint8Array, void, undefined> }> {
  const it = source[Symbol.asyncIterator]();
  let pending: Uint8Array = new Uint8Array(0);
  /** Exactly n bytes (n small), or TRUNCATED. */
  const exactly = async (n: number, what: string): Promise<Uint8Array> => {
    const parts: Uint8Array[] = [];
    let have = 0;
    while (have < n) {
      if (pending.byteLength === 0) {
        const next = await it.next();
        if (next.done) bad('TRUNCATED', `input ends inside ${what}`);
        pending = next.value;
        continue;
      }
      const part = pending.subarray(0, n - have);
      pending = pending.subarray(part.byteLength);
      parts.push(part);
      have += part.byteLength;
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.byteLength;
    }
    return out;
  };
  const header = decodeDeltaContainerHeader(
    await exactly(DELTA_CONTAINER_HEADER_SIZE, 'the header'),
    options,
  );
  async function* stored(): AsyncGenerator<Uint8Array, void, undefined> {
    let left = header.storedLength;
    let crc = 0;
    while (left > 0) {
      if (pending.byteLength === 0) {
        const next = await it.next();
        if (next.done) bad('TRUNCATED', 'input ends inside the delta');
        pending = next.value;
        continue;
      }
      const part = pending.subarray(0, Math.min(left, pending.byteLength));
      pending = pending.subarray(part.byteLength);
      left -= part.byteLength;
      crc = zlibCrc32(part, crc);
      yield part;
    }
    const trailer = await exactly(DELTA_CONTAINER_TRAILER_SIZE, 'the payload CRC-32');
    const expected = new DataView(trailer.buffer, trailer.byteOffset, 4).getUint32(0, true);
    if (pending.byteLength > 0) bad('TRAILING_DATA', 'bytes follow the container');
    for (;;) {
      const next = await it.next();
      if (next.done) break;
      if (next.value.byteLength > 0) bad('TRAILING_DATA', 'bytes follow the container');
    }
    if (crc >>> 0 !== expected) bad('CHECKSUM_MISMATCH', 'payload CRC-32 does not match');
  }
  async function* delta(): AsyncGenerator<Uint8Array, void, undefined> {
    let produced = 0;
    const check = (chunk: Uint8Array): Uint8Array => {
      if (produced === 0 && chunk.byteLength > 0 && chunk[0] !== RSYNC_DELTA_MAGIC[0])
        bad('BAD_FIELD', 'payload is not an rsync-wasm delta (magic "WFTD")');
      produced += chunk.byteLength;
      if (produced > header.rawLength)
        bad('BAD_COMPRESSION', `the delta inflates past the ${header.rawLength} bytes its header declares`);
      return chunk;
    };
    if (!header.compressed) for await (const part of stored()) yield check(part);
    else yield* inflateStream(stored(), check);
    if (produced !== header.rawLength)
      bad('BAD_COMPRESSION', `the delta inflates to ${produced} bytes, header says ${header.rawLength}`);
  }
  return { header, delta: delta() };
}

/** Raw-inflates a stream with back-pressure; zlib failures become BAD_COMPRESSION. */
async function* inflateStream(
  input: AsyncGenerator<Uint8Array, void, undefined>,
  each: (chunk: Uint8Array) => Uint8Array,
): AsyncGenerator<Uint8Array, void, undefined> {
  const inflater = createInflateRaw();
  const stop = new AbortController();
  let inputError: unknown;
  const feeding = (async () => {
    try {
      for await (const part of input) {
        if (!inflater.write(part)) await once(inflater, 'drain', { signal: stop.signal });
      }
      inflater.end();
    } catch (e) {
      inputError = e;
      inflater.destroy(e instanceof Error ? e : new Error(String(e)));
    }
  })();
  try {
    for await (const chunk of inflater as AsyncIterable<Buffer>) yield each(chunk);
  } catch (e) {
    if (inputError !== undefined) throw inputError;
    if (e instanceof WireFormatError) throw e;
    throw new WireFormatError('delta-container', 'BAD_COMPRESSION', 'the delta does not inflate', {
      cause: e,
    });
  } finally {
    stop.abort();
    inflater.destroy();
    await feeding;
    await input.return();
  }
  if (inputError !== undefined) throw inputError;
}
