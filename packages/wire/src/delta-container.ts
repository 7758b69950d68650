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
  if (!isSha256Hex(c.baseSha256) || !isSha256Hex(c.targetSha256))
    bad('BAD_FIELD', 'hashes must be 64 lower-case hex digits');
  if (!Number.isSafeInteger(c.targetSize) || c.targetSize < 0)
    bad('BAD_FIELD', `bad target size ${c.targetSize}`);
  if (!startsWith(c.delta, RSYNC_DELTA_MAGIC))
    bad('BAD_FIELD', 'delta is not an rsync-wasm delta (magic "WFTD")');
  const compressed = options.compress === true;
  const stored = compressed ? deflate(c.delta) : c.delta;
  const w = new ByteWriter(DELTA_CONTAINER_HEADER_SIZE + stored.byteLength + DELTA_CONTAINER_TRAILER_SIZE);
  w.bytes(DELTA_CONTAINER_MAGIC)
    .u8(DELTA_CONTAINER_VERSION)
    .u8(compressed ? FLAG_COMPRESSED : 0)
    .u16(0)
    .bytes(hexToBytes(c.baseSha256))
    .bytes(hexToBytes(c.targetSha256))
    .u64(c.targetSize)
    .u64(c.delta.byteLength)
    .u64(stored.byteLength);
  w.u32(crc32(w.finish()));
  w.bytes(stored);
  w.u32(crc32(stored));
  return w.finish();
}

export function decodeDeltaContainer(
  bytes: Uint8Array,
  options: { maxRawBytes?: number } = {},
): DecodedDeltaContainer {
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
  const stored = r.take(storedLength, 'the delta');
  const crc = r.u32('the payload CRC-32');
  r.expectEnd('the container');
  if (crc32(stored) !== crc) bad('CHECKSUM_MISMATCH', 'payload CRC-32 does not match');
  const delta = compressed ? inflateExact(stored, rawLength, 'delta-container', 'the delta') : stored;
  if (!startsWith(delta, RSYNC_DELTA_MAGIC))
    bad('BAD_FIELD', 'payload is not an rsync-wasm delta (magic "WFTD")');
  return { baseSha256, targetSha256, targetSize, delta, compressed, storedLength };
}
