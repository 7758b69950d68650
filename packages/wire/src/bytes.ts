/**
 * Bounds-checked little-endian reader and writer shared by the codecs. Every read checks
 * the remaining length first and reports TRUNCATED through a WireFormatError, so a decoder
 * built on it can never read out of bounds or leak a RangeError.
 */
import { crc32 as zlibCrc32, deflateRaw, deflateRawSync, inflateRawSync } from 'node:zlib';
import { WireFormatError, type WireFormat } from './errors.ts';

export class ByteReader {
  private readonly view: DataView;
  offset = 0;

  constructor(
    readonly bytes: Uint8Array,
    private readonly format: WireFormat,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get remaining(): number {
    return this.bytes.byteLength - this.offset;
  }

  fail(code: ConstructorParameters<typeof WireFormatError>[1], message: string): never {
    throw new WireFormatError(this.format, code, message);
  }

  need(n: number, what: string): void {
    if (n > this.remaining)
      this.fail('TRUNCATED', `input ends inside ${what} (needs ${n} bytes at ${this.offset})`);
  }

  u8(what: string): number {
    this.need(1, what);
    return this.view.getUint8(this.offset++);
  }

  u16(what: string): number {
    this.need(2, what);
    const v = this.view.getUint16(this.offset, true);
    this.offset += 2;
    return v;
  }

  u32(what: string): number {
    this.need(4, what);
    const v = this.view.getUint32(this.offset, true);
    this.offset += 4;
    return v;
  }

  /** An unsigned 64-bit field that must fit a JS safe integer. */
  u64(what: string): number {
    this.need(8, what);
    const v = this.view.getBigUint64(this.offset, true);
    this.offset += 8;
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) this.fail('BAD_FIELD', `${what} ${v} exceeds 2^53 - 1`);
    return Number(v);
  }

  /** A view (no copy) of the next n bytes. */
  take(n: number, what: string): Uint8Array {
    this.need(n, what);
    const out = this.bytes.subarray(this.offset, this.offset + n);
    this.offset += n;
    return out;
  }

  expectEnd(what: string): void {
    if (this.remaining !== 0) this.fail('TRAILING_DATA', `${this.remaining} bytes follow the end of ${what}`);
  }
}

export class ByteWriter {
  private buf: Uint8Array;
  private view: DataView;
  /** `buf` as a Buffer, for writing strings in place (no intermediate buffer per string). */
  private text: Buffer;
  offset = 0;

  /** `initial`: a capacity, or a buffer to write into (left for a larger one if it overflows). */
  constructor(initial: number | Uint8Array = 256) {
    this.buf = typeof initial === 'number' ? new Uint8Array(initial) : initial;
    this.view = new DataView(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
    this.text = Buffer.from(this.buf.buffer, this.buf.byteOffset, this.buf.byteLength);
  }

  private ensure(n: number): void {
    if (this.offset + n <= this.buf.byteLength) return;
    let size = this.buf.byteLength * 2;
    while (size < this.offset + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.offset));
    this.buf = next;
    this.view = new DataView(next.buffer);
    this.text = Buffer.from(next.buffer);
  }

  u8(v: number): this {
    this.ensure(1);
    this.view.setUint8(this.offset, v);
    this.offset += 1;
    return this;
  }

  u16(v: number): this {
    this.ensure(2);
    this.view.setUint16(this.offset, v, true);
    this.offset += 2;
    return this;
  }

  u32(v: number): this {
    this.ensure(4);
    this.view.setUint32(this.offset, v, true);
    this.offset += 4;
    return this;
  }

  /** A non-negative safe integer as 8 bytes, little-endian (two u32 halves: no BigInt per call). */
  u64(v: number): this {
    this.ensure(8);
    this.view.setUint32(this.offset, v % 0x1_0000_0000, true);
    this.view.setUint32(this.offset + 4, Math.floor(v / 0x1_0000_0000), true);
    this.offset += 8;
    return this;
  }

  /**
   * `s` in UTF-8 after its byte length as a u16, written in place (issue #16: an encoded copy
   * of every path of a bundle was garbage for the collector). The caller keeps `s` short enough.
   */
  utf8WithU16Length(s: string): this {
    const n = Buffer.byteLength(s, 'utf8');
    this.u16(n);
    this.ensure(n);
    this.text.write(s, this.offset, n, 'utf8');
    this.offset += n;
    return this;
  }

  /** Lower-case hex digits (an even number of them, checked by the caller) as bytes, in place. */
  hex(s: string): this {
    const n = s.length >>> 1;
    this.ensure(n);
    if (this.text.write(s, this.offset, n, 'hex') !== n) throw new RangeError('not hex digits');
    this.offset += n;
    return this;
  }

  /** Printable ASCII (checked by the caller), one byte a character, in place. */
  ascii(s: string): this {
    this.ensure(s.length);
    this.text.write(s, this.offset, s.length, 'latin1');
    this.offset += s.length;
    return this;
  }

  bytes(b: Uint8Array): this {
    this.ensure(b.byteLength);
    this.buf.set(b, this.offset);
    this.offset += b.byteLength;
    return this;
  }

  /** Overwrite a u32 written earlier (for lengths known only at the end). */
  patchU32(at: number, v: number): void {
    this.view.setUint32(at, v, true);
  }

  finish(): Uint8Array {
    return this.buf.slice(0, this.offset);
  }

  /** What was written, without a copy (the writer must not be written to afterwards). */
  written(): Uint8Array {
    return this.buf.subarray(0, this.offset);
  }
}

export function startsWith(bytes: Uint8Array, magic: Uint8Array): boolean {
  if (bytes.byteLength < magic.byteLength) return false;
  for (let i = 0; i < magic.byteLength; i++) if (bytes[i] !== magic[i]) return false;
  return true;
}

export function ascii(text: string): Uint8Array {
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

export function deflate(bytes: Uint8Array): Uint8Array {
  return deflateRawSync(bytes, { level: 6 });
}

/** deflate, worked in zlib's thread pool: the caller's event loop runs on meanwhile. */
export function deflateAsync(bytes: Uint8Array): Promise<Uint8Array> {
  return new Promise((resolve, reject) =>
    deflateRaw(bytes, { level: 6 }, (err, out) => (err ? reject(err) : resolve(out))),
  );
}

/**
 * Inflate raw-deflate data that must come out at exactly `expected` bytes. The output is
 * capped (a zip bomb stops at the cap); any zlib failure becomes BAD_COMPRESSION.
 */
export function inflateExact(
  bytes: Uint8Array,
  expected: number,
  format: WireFormat,
  what: string,
): Uint8Array {
  let out: Buffer;
  try {
    out = inflateRawSync(bytes, { maxOutputLength: Math.max(1, expected) });
  } catch (cause) {
    throw new WireFormatError(format, 'BAD_COMPRESSION', `${what} does not inflate to ${expected} bytes`, {
      cause,
    });
  }
  if (out.byteLength !== expected) {
    throw new WireFormatError(
      format,
      'BAD_COMPRESSION',
      `${what} inflates to ${out.byteLength} bytes, header says ${expected}`,
    );
  }
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

const HEX = /^[0-9a-f]{64}$/;

export function isSha256Hex(s: string): boolean {
  return HEX.test(s);
}

export function hexToBytes(hex: string): Uint8Array {
  return new Uint8Array(Buffer.from(hex, 'hex'));
}

export function bytesToHex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/** CRC-32 (IEEE 802.3, as zlib computes it) of `bytes`. */
export function crc32(bytes: Uint8Array): number {
  return zlibCrc32(bytes) >>> 0;
}
