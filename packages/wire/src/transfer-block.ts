/**
 * Transfer block framing: one piece (≤ 4 MiB) of a large file's upload, sent as one
 * WebSocket binary message or one HTTP body (docs/formats/transfer-block.md).
 */
import { createHash } from 'node:crypto';
import {
  ascii,
  ByteReader,
  ByteWriter,
  bytesToHex,
  crc32,
  deflate,
  hexToBytes,
  inflateExact,
  startsWith,
} from './bytes.ts';
import { WireFormatError } from './errors.ts';

export const BLOCK_MAGIC = ascii('WFTK');
export const BLOCK_VERSION = 1;
export const BLOCK_HEADER_SIZE = 84;
/** Largest raw payload of one block. */
export const MAX_BLOCK_PAYLOAD = 4 * 1024 * 1024;
/** Transfer ids are 16 random bytes, written as 32 lower-case hex digits in JSON. */
export const TRANSFER_ID_BYTES = 16;

const FLAG_COMPRESSED = 0x01;
const FLAG_LAST = 0x02;
const TRANSFER_ID_HEX = /^[0-9a-f]{32}$/;

export interface TransferBlock {
  /** 32 lower-case hex digits: the upload session (file) this block belongs to. */
  readonly transferId: string;
  /** Block number within the transfer, from 0. */
  readonly seq: number;
  /** Byte offset of the payload in the file. */
  readonly offset: number;
  /** The block holds the file's final bytes. */
  readonly last: boolean;
  /** Raw (uncompressed) payload, at most MAX_BLOCK_PAYLOAD bytes. */
  readonly payload: Uint8Array;
}

export interface DecodedTransferBlock extends TransferBlock {
  readonly compressed: boolean;
  /** Hex SHA-256 of the raw payload (verified). */
  readonly sha256: string;
}

function bad(code: ConstructorParameters<typeof WireFormatError>[1], message: string): never {
  throw new WireFormatError('transfer-block', code, message);
}

export function isTransferId(s: string): boolean {
  return TRANSFER_ID_HEX.test(s);
}

export function encodeTransferBlock(block: TransferBlock, options: { compress?: boolean } = {}): Uint8Array {
  if (!isTransferId(block.transferId)) bad('BAD_FIELD', 'transferId is not 32 lower-case hex digits');
  if (!Number.isInteger(block.seq) || block.seq < 0 || block.seq > 0xffffffff)
    bad('BAD_FIELD', `bad seq ${block.seq}`);
  if (!Number.isSafeInteger(block.offset) || block.offset < 0) bad('BAD_FIELD', `bad offset ${block.offset}`);
  if (block.payload.byteLength > MAX_BLOCK_PAYLOAD)
    bad('TOO_LARGE', `payload of ${block.payload.byteLength} bytes`);
  const compressed = options.compress === true;
  const stored = compressed ? deflate(block.payload) : block.payload;
  const sha = createHash('sha256').update(block.payload).digest();
  const w = new ByteWriter(BLOCK_HEADER_SIZE + stored.byteLength);
  w.bytes(BLOCK_MAGIC)
    .u8(BLOCK_VERSION)
    .u8((compressed ? FLAG_COMPRESSED : 0) | (block.last ? FLAG_LAST : 0))
    .u16(BLOCK_HEADER_SIZE)
    .bytes(hexToBytes(block.transferId))
    .u32(block.seq)
    .u64(block.offset)
    .u32(block.payload.byteLength)
    .u32(stored.byteLength)
    .bytes(sha)
    .u32(crc32(stored));
  w.u32(crc32(w.finish()));
  w.bytes(stored);
  return w.finish();
}

/** Reads just the header (for routing an ack when the payload turns out bad). */
export function peekTransferBlockHeader(bytes: Uint8Array): { transferId: string; seq: number } | undefined {
  if (bytes.byteLength < BLOCK_HEADER_SIZE || !startsWith(bytes, BLOCK_MAGIC)) return undefined;
  const r = new ByteReader(bytes, 'transfer-block');
  r.offset = 8;
  const transferId = bytesToHex(r.take(TRANSFER_ID_BYTES, 'the transfer id'));
  return { transferId, seq: r.u32('the seq') };
}

export function decodeTransferBlock(bytes: Uint8Array): DecodedTransferBlock {
  const r = new ByteReader(bytes, 'transfer-block');
  r.need(4, 'the magic');
  if (!startsWith(bytes, BLOCK_MAGIC)) bad('BAD_MAGIC', 'not a Weft transfer block (magic "WFTK")');
  r.take(4, 'the magic');
  const version = r.u8('the version');
  if (version !== BLOCK_VERSION) bad('UNSUPPORTED_VERSION', `unknown version ${version}`);
  const flags = r.u8('the flags');
  if ((flags & ~(FLAG_COMPRESSED | FLAG_LAST)) !== 0)
    bad('BAD_HEADER', `unknown flags 0x${flags.toString(16)}`);
  const headerLength = r.u16('the header length');
  if (headerLength !== BLOCK_HEADER_SIZE)
    bad('BAD_HEADER', `header length ${headerLength}, expected ${BLOCK_HEADER_SIZE}`);
  r.need(BLOCK_HEADER_SIZE - 8, 'the header');
  const transferId = bytesToHex(r.take(TRANSFER_ID_BYTES, 'the transfer id'));
  const seq = r.u32('the seq');
  const offset = r.u64('the offset');
  const length = r.u32('the length');
  const storedLength = r.u32('the stored length');
  const sha256 = bytesToHex(r.take(32, 'the SHA-256'));
  const payloadCrc = r.u32('the payload CRC-32');
  const crcAt = r.offset;
  const crc = r.u32('the header CRC-32');
  if (crc32(bytes.subarray(0, crcAt)) !== crc) bad('CHECKSUM_MISMATCH', 'header CRC-32 does not match');
  if (length > MAX_BLOCK_PAYLOAD) bad('TOO_LARGE', `payload of ${length} bytes (max ${MAX_BLOCK_PAYLOAD})`);
  const compressed = (flags & FLAG_COMPRESSED) !== 0;
  if (!compressed && storedLength !== length)
    bad('BAD_HEADER', 'stored and raw lengths differ without compression');
  if (offset + length > Number.MAX_SAFE_INTEGER) bad('BAD_FIELD', 'offset + length exceeds 2^53 - 1');
  const stored = r.take(storedLength, 'the payload');
  r.expectEnd('the block');
  if (crc32(stored) !== payloadCrc) bad('CHECKSUM_MISMATCH', 'payload CRC-32 does not match');
  const payload = compressed ? inflateExact(stored, length, 'transfer-block', 'the payload') : stored;
  if (createHash('sha256').update(payload).digest('hex') !== sha256) {
    bad('CHECKSUM_MISMATCH', 'SHA-256 of the payload does not match');
  }
  return { transferId, seq, offset, last: (flags & FLAG_LAST) !== 0, payload, compressed, sha256 };
}
