// Byte layout of signatures and deltas; the prose specification is docs/formats/delta.md.
import { RsyncFormatError, RsyncOptionError } from './errors.ts';

export const SIGNATURE_MAGIC = Uint8Array.of(0x57, 0x46, 0x54, 0x53); // "WFTS"
export const DELTA_MAGIC = Uint8Array.of(0x57, 0x46, 0x54, 0x44); // "WFTD"
export const FORMAT_VERSION = 1;
export const SIGNATURE_HEADER_SIZE = 16;
export const SIGNATURE_TRAILER_SIZE = 8;
export const DELTA_HEADER_SIZE = 24;

export const WEAK_ROLLSUM32 = 1;
export const STRONG_BLAKE2B = 1;
export const CHECKSUM_NONE = 0;
/** BLAKE2b-256 over (length, BLAKE2b-256) records of copied blocks and literals. */
export const CHECKSUM_BLAKE2B_TREE = 1;
export const CHECKSUM_SIZE = 32;
export const FLAG_CHECKSUM = 0x01;

export const OP_END = 0x00;
export const OP_LITERAL = 0x01;
export const OP_COPY = 0x02;

export const MIN_BLOCK_SIZE = 16;
export const MAX_BLOCK_SIZE = 1 << 20;
export const MIN_STRONG_LENGTH = 2;
export const MAX_STRONG_LENGTH = 32;
export const DEFAULT_STRONG_LENGTH = 8;
/** Upper bound on blocks in one signature (keeps the wasm index well under 4 GiB). */
export const MAX_BLOCKS = 1 << 26;

export function checkBlockSize(blockSize: number): void {
  if (!Number.isInteger(blockSize) || blockSize < MIN_BLOCK_SIZE || blockSize > MAX_BLOCK_SIZE) {
    throw new RsyncOptionError(
      `blockSize must be an integer in [${MIN_BLOCK_SIZE}, ${MAX_BLOCK_SIZE}], got ${blockSize}`,
    );
  }
}

export function checkStrongLength(strongLength: number): void {
  if (
    !Number.isInteger(strongLength) ||
    strongLength < MIN_STRONG_LENGTH ||
    strongLength > MAX_STRONG_LENGTH
  ) {
    throw new RsyncOptionError(
      `strongLength must be an integer in [${MIN_STRONG_LENGTH}, ${MAX_STRONG_LENGTH}], got ${strongLength}`,
    );
  }
}

/** A parsed, validated signature of an old file. */
export interface Signature {
  readonly blockSize: number;
  readonly strongLength: number;
  /** Length in bytes of the file the signature describes. */
  readonly oldLength: number;
  readonly blockCount: number;
  /** blockCount records of (weak u32 LE, strong[strongLength]). */
  readonly records: Uint8Array;
}

export function encodeSignatureHeader(blockSize: number, strongLength: number): Uint8Array {
  const header = new Uint8Array(SIGNATURE_HEADER_SIZE);
  header.set(SIGNATURE_MAGIC, 0);
  header[4] = FORMAT_VERSION;
  header[5] = WEAK_ROLLSUM32;
  header[6] = STRONG_BLAKE2B;
  header[7] = strongLength;
  new DataView(header.buffer).setUint32(8, blockSize, true);
  return header;
}

export function encodeSignatureTrailer(oldLength: number): Uint8Array {
  const trailer = new Uint8Array(SIGNATURE_TRAILER_SIZE);
  new DataView(trailer.buffer).setBigUint64(0, BigInt(oldLength), true);
  return trailer;
}

function startsWith(bytes: Uint8Array, magic: Uint8Array): boolean {
  return magic.every((b, i) => bytes[i] === b);
}

function readU64(view: DataView, offset: number, kind: 'signature' | 'delta'): number {
  const value = view.getBigUint64(offset, true);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new RsyncFormatError(kind, 'BAD_LENGTH', `length ${value} exceeds 2^53 - 1`);
  }
  return Number(value);
}

/** Validates a complete signature. Throws RsyncFormatError on anything unexpected. */
export function parseSignature(bytes: Uint8Array): Signature {
  const fail = (code: ConstructorParameters<typeof RsyncFormatError>[1], message: string): never => {
    throw new RsyncFormatError('signature', code, message);
  };
  if (bytes.length < 4) fail('TRUNCATED', `${bytes.length} bytes is shorter than the magic`);
  if (!startsWith(bytes, SIGNATURE_MAGIC)) fail('BAD_MAGIC', 'not a Weft signature (magic "WFTS")');
  if (bytes.length < 5) fail('TRUNCATED', 'no version byte');
  if (bytes[4] !== FORMAT_VERSION) fail('UNSUPPORTED_VERSION', `unknown version ${bytes[4]}`);
  if (bytes.length < SIGNATURE_HEADER_SIZE + SIGNATURE_TRAILER_SIZE) {
    fail('TRUNCATED', `${bytes.length} bytes is shorter than header and trailer`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes[5] !== WEAK_ROLLSUM32) fail('UNSUPPORTED_ALGORITHM', `unknown weak checksum ${bytes[5]}`);
  if (bytes[6] !== STRONG_BLAKE2B) fail('UNSUPPORTED_ALGORITHM', `unknown strong hash ${bytes[6]}`);
  const strongLength = bytes[7] ?? 0;
  if (strongLength < MIN_STRONG_LENGTH || strongLength > MAX_STRONG_LENGTH) {
    fail('BAD_HEADER', `strong length ${strongLength} out of range`);
  }
  const blockSize = view.getUint32(8, true);
  if (blockSize < MIN_BLOCK_SIZE || blockSize > MAX_BLOCK_SIZE) {
    fail('BAD_HEADER', `block size ${blockSize} out of range`);
  }
  if (view.getUint32(12, true) !== 0) fail('BAD_HEADER', 'reserved header bytes are not zero');
  const recordSize = 4 + strongLength;
  const body = bytes.length - SIGNATURE_HEADER_SIZE - SIGNATURE_TRAILER_SIZE;
  if (body % recordSize !== 0)
    fail('TRUNCATED', `record area of ${body} bytes is not a whole number of records`);
  const blockCount = body / recordSize;
  if (blockCount > MAX_BLOCKS) fail('BAD_LENGTH', `${blockCount} blocks exceeds the limit of ${MAX_BLOCKS}`);
  const oldLength = readU64(view, bytes.length - SIGNATURE_TRAILER_SIZE, 'signature');
  if (Math.ceil(oldLength / blockSize) !== blockCount) {
    fail(
      'BAD_LENGTH',
      `old length ${oldLength} needs ${Math.ceil(oldLength / blockSize)} blocks, found ${blockCount}`,
    );
  }
  return {
    blockSize,
    strongLength,
    oldLength,
    blockCount,
    records: bytes.subarray(SIGNATURE_HEADER_SIZE, SIGNATURE_HEADER_SIZE + body),
  };
}

/**
 * The strong-hash length rsync would pick for a file of this size (2 bytes for most files):
 * enough bits, together with the 32-bit weak checksum, that a false block match is
 * unlikely (about 2^-10 per file). It relies on the whole-file checksum to catch the rare
 * false match: when patch() fails with CHECKSUM_MISMATCH, send a delta made with
 * strongLength 16, or the whole file.
 */
export function suggestStrongLength(fileLength: number, blockSize: number): number {
  const bits = 10 + 2 * Math.log2(Math.max(fileLength, 1)) - Math.log2(blockSize) - 32;
  return Math.min(16, Math.max(MIN_STRONG_LENGTH, Math.ceil(bits / 8)));
}

export interface DeltaHeader {
  readonly hasChecksum: boolean;
  readonly blockSize: number;
  readonly oldLength: number;
}

export function encodeDeltaHeader(oldLength: number, blockSize: number, hasChecksum: boolean): Uint8Array {
  const header = new Uint8Array(DELTA_HEADER_SIZE);
  header.set(DELTA_MAGIC, 0);
  header[4] = FORMAT_VERSION;
  header[5] = hasChecksum ? FLAG_CHECKSUM : 0;
  header[6] = hasChecksum ? CHECKSUM_BLAKE2B_TREE : CHECKSUM_NONE;
  const view = new DataView(header.buffer);
  view.setUint32(8, blockSize, true);
  view.setBigUint64(16, BigInt(oldLength), true);
  return header;
}

/** Validates the 16-byte delta header (bytes may be shorter when the input is truncated). */
export function parseDeltaHeader(bytes: Uint8Array): DeltaHeader {
  const fail = (code: ConstructorParameters<typeof RsyncFormatError>[1], message: string): never => {
    throw new RsyncFormatError('delta', code, message);
  };
  if (bytes.length < 4) fail('TRUNCATED', `${bytes.length} bytes is shorter than the magic`);
  if (!startsWith(bytes, DELTA_MAGIC)) fail('BAD_MAGIC', 'not a Weft delta (magic "WFTD")');
  if (bytes.length < 5) fail('TRUNCATED', 'no version byte');
  if (bytes[4] !== FORMAT_VERSION) fail('UNSUPPORTED_VERSION', `unknown version ${bytes[4]}`);
  if (bytes.length < DELTA_HEADER_SIZE) fail('TRUNCATED', 'header is incomplete');
  const flags = bytes[5] ?? 0;
  if ((flags & ~FLAG_CHECKSUM) !== 0) fail('BAD_HEADER', `unknown flags 0x${flags.toString(16)}`);
  const hasChecksum = (flags & FLAG_CHECKSUM) !== 0;
  const algorithm = bytes[6];
  if (hasChecksum ? algorithm !== CHECKSUM_BLAKE2B_TREE : algorithm !== CHECKSUM_NONE) {
    fail('UNSUPPORTED_ALGORITHM', `unknown checksum algorithm ${algorithm}`);
  }
  if (bytes[7] !== 0) fail('BAD_HEADER', 'reserved header byte is not zero');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const blockSize = view.getUint32(8, true);
  if (blockSize < MIN_BLOCK_SIZE || blockSize > MAX_BLOCK_SIZE)
    fail('BAD_HEADER', `block size ${blockSize} out of range`);
  if (view.getUint32(12, true) !== 0) fail('BAD_HEADER', 'reserved header bytes are not zero');
  return { hasChecksum, blockSize, oldLength: readU64(view, 16, 'delta') };
}

/** Appends an unsigned LEB128 varint of a safe integer. */
export function writeVarint(out: number[], value: number): void {
  let v = value;
  while (v >= 0x80) {
    out.push((v % 0x80) | 0x80);
    v = Math.floor(v / 0x80);
  }
  out.push(v);
}
