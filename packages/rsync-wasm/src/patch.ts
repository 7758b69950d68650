import { TreeVerifier } from './engine.ts';
import { OldReaderError, RsyncFormatError, RsyncOptionError, type RsyncFormatErrorCode } from './errors.ts';
import { CHECKSUM_SIZE, DELTA_HEADER_SIZE, OP_COPY, OP_END, OP_LITERAL, parseDeltaHeader } from './format.ts';
import { chunksOf, type ByteSource } from './source.ts';

/** Random access to the old file; patch() reads it by ranges of at most 1 MiB. */
export interface OldFileReader {
  readonly size: number;
  /** Must return exactly `length` bytes starting at `offset`. */
  read(offset: number, length: number): Promise<Uint8Array> | Uint8Array;
}

const READ_LIMIT = 1 << 20;
const OUTPUT_CHUNK = 1 << 18;
/** Checksum leaves record their length as u32. */
const MAX_LITERAL_LENGTH = 0xffffffff;
const MAX_VARINT_BYTES = 8; // 56 bits, enough for any length below 2^53
/** Opcode and two varints: an instruction header is parsed from the buffer without awaiting. */
const INSTRUCTION_HEADER = 1 + 2 * MAX_VARINT_BYTES;

function fail(code: RsyncFormatErrorCode, message: string): never {
  throw new RsyncFormatError('delta', code, message);
}

/** Pulls bytes from a chunked source, with small look-ahead for headers and varints. */
class DeltaReader {
  private buf: Uint8Array = new Uint8Array(0);
  private off = 0;
  private eof = false;
  private readonly chunks: AsyncIterator<Uint8Array>;

  constructor(source: ByteSource) {
    this.chunks = chunksOf(source)[Symbol.asyncIterator]();
  }

  get available(): number {
    return this.buf.length - this.off;
  }

  /** Buffers at least n bytes unless the input ends first; returns what is available. */
  async fill(n: number): Promise<number> {
    while (this.available < n && !this.eof) {
      const next = await this.chunks.next();
      if (next.done) {
        this.eof = true;
        break;
      }
      if (next.value.length === 0) continue;
      const rest = this.buf.subarray(this.off);
      if (rest.length === 0) {
        this.buf = next.value;
      } else {
        const joined = new Uint8Array(rest.length + next.value.length);
        joined.set(rest, 0);
        joined.set(next.value, rest.length);
        this.buf = joined;
      }
      this.off = 0;
    }
    return this.available;
  }

  peek(n: number): Uint8Array {
    return this.buf.subarray(this.off, this.off + n);
  }

  skip(n: number): void {
    this.off += n;
  }

  /** Next byte from what is buffered (call fill() first). */
  byteNow(what: string): number {
    if (this.available < 1) fail('TRUNCATED', `input ends before ${what}`);
    return this.buf[this.off++] ?? 0;
  }

  /** Next varint from what is buffered (call fill() first). */
  varintNow(what: string): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < MAX_VARINT_BYTES; i++) {
      if (this.available < 1) fail('TRUNCATED', `input ends inside ${what}`);
      const b = this.buf[this.off++] ?? 0;
      value += (b & 0x7f) * scale;
      if ((b & 0x80) === 0) {
        if (i > 0 && b === 0) fail('BAD_VARINT', `${what} is not minimally encoded`);
        if (value > Number.MAX_SAFE_INTEGER) fail('BAD_VARINT', `${what} exceeds 2^53 - 1`);
        return value;
      }
      scale *= 0x80;
    }
    return fail('BAD_VARINT', `${what} is longer than ${MAX_VARINT_BYTES} bytes`);
  }

  /** Up to n bytes (at least 1), without copying; fails at end of input. */
  async take(n: number, what: string): Promise<Uint8Array> {
    if (this.available > 0) return this.takeNow(n);
    if (this.available < 1 && (await this.fill(1)) < 1) fail('TRUNCATED', `input ends inside ${what}`);
    return this.takeNow(n);
  }

  private takeNow(n: number): Uint8Array {
    const part = this.buf.subarray(this.off, this.off + Math.min(n, this.available));
    this.off += part.length;
    return part;
  }

  async atEnd(): Promise<boolean> {
    return (await this.fill(1)) === 0;
  }
}

/** Groups small pieces into ~256 KiB output chunks. */
class OutputBuffer {
  private buf: Uint8Array = new Uint8Array(OUTPUT_CHUNK);
  private used = 0;
  length = 0;

  /** Adds bytes; returns chunks ready to be yielded. */
  push(bytes: Uint8Array, ready: Uint8Array[]): void {
    this.length += bytes.length;
    if (bytes.length >= OUTPUT_CHUNK / 4) {
      this.flush(ready);
      ready.push(bytes);
      return;
    }
    if (this.used + bytes.length > this.buf.length) this.flush(ready);
    this.buf.set(bytes, this.used);
    this.used += bytes.length;
  }

  flush(ready: Uint8Array[]): void {
    if (this.used === 0) return;
    ready.push(this.buf.subarray(0, this.used));
    this.buf = new Uint8Array(OUTPUT_CHUNK);
    this.used = 0;
  }
}

function asReader(old: OldFileReader | Uint8Array): OldFileReader {
  if (old instanceof Uint8Array) {
    return { size: old.length, read: (offset, length) => old.subarray(offset, offset + length) };
  }
  return old;
}

export interface PatchOptions {
  /**
   * The most bytes the output may have (the size the caller was told to expect). A delta
   * that would produce more fails with OUTPUT_TOO_LARGE before any byte past the limit is
   * yielded: a few bytes of COPY instructions can repeat the old file without end.
   */
  readonly maxOutputBytes?: number;
}

/**
 * Rebuilds the new file from the old one and a delta, streaming the output.
 * Throws RsyncFormatError for a malformed delta, one made for another old file, one whose
 * output would exceed `maxOutputBytes`, or (at the end) a checksum mismatch: write the
 * output to a temporary file and keep it only if the iteration finishes without error.
 * Memory: at most one 1 MiB read plus 256 KiB of output.
 */
export async function* patch(
  old: OldFileReader | Uint8Array,
  deltaSource: ByteSource,
  options: PatchOptions = {},
): AsyncGenerator<Uint8Array, void, undefined> {
  const maxOutput = options.maxOutputBytes ?? Number.MAX_SAFE_INTEGER;
  if (!Number.isSafeInteger(maxOutput) || maxOutput < 0)
    throw new RsyncOptionError(`maxOutputBytes must be a non-negative safe integer, got ${maxOutput}`);
  const oldFile = asReader(old);
  const reader = new DeltaReader(deltaSource);
  await reader.fill(DELTA_HEADER_SIZE);
  const header = parseDeltaHeader(reader.peek(DELTA_HEADER_SIZE));
  reader.skip(DELTA_HEADER_SIZE);
  if (header.oldLength !== oldFile.size) {
    fail('OLD_LENGTH_MISMATCH', `delta is for an old file of ${header.oldLength} bytes, got ${oldFile.size}`);
  }
  const output = new OutputBuffer();
  /** Checked before each instruction's bytes are produced, so nothing past the limit is read or yielded. */
  const room = (length: number, what: string): void => {
    if (output.length + length > maxOutput)
      fail(
        'OUTPUT_TOO_LARGE',
        `${what} of ${length} bytes at output offset ${output.length} exceeds the limit of ${maxOutput} bytes`,
      );
  };
  const verifier = header.hasChecksum ? await TreeVerifier.create(header.blockSize) : undefined;
  const ready: Uint8Array[] = [];
  let cursor = 0;
  for (;;) {
    if (reader.available < INSTRUCTION_HEADER) await reader.fill(INSTRUCTION_HEADER);
    const op = reader.byteNow('an instruction');
    if (op === OP_LITERAL) {
      const length = reader.varintNow('literal length');
      if (length === 0) fail('BAD_LENGTH', 'empty literal');
      if (length > MAX_LITERAL_LENGTH) fail('BAD_LENGTH', `literal of ${length} bytes exceeds 2^32 - 1`);
      room(length, 'literal');
      for (let left = length; left > 0;) {
        const part = await reader.take(left, 'literal data');
        verifier?.literal(part);
        output.push(part, ready);
        left -= part.length;
        if (ready.length > 0) yield* ready.splice(0);
      }
      verifier?.endInstruction();
    } else if (op === OP_COPY) {
      const zigzag = reader.varintNow('copy offset');
      const diff = zigzag % 2 === 0 ? zigzag / 2 : -(zigzag + 1) / 2;
      const length = reader.varintNow('copy length');
      const offset = cursor + diff;
      if (length === 0) fail('BAD_LENGTH', 'empty copy');
      if (offset < 0 || offset + length > oldFile.size) {
        fail(
          'COPY_OUT_OF_RANGE',
          `copy [${offset}, ${offset + length}) outside old file of ${oldFile.size} bytes`,
        );
      }
      room(length, 'copy');
      cursor = offset + length;
      for (let at = offset; at < cursor;) {
        const n = Math.min(READ_LIMIT, cursor - at);
        const pending = oldFile.read(at, n);
        const piece = pending instanceof Uint8Array ? pending : await pending;
        if (piece.length !== n) {
          throw new OldReaderError(`old file read at ${at} returned ${piece.length} bytes, expected ${n}`);
        }
        verifier?.copy(piece);
        output.push(piece, ready);
        at += n;
        if (ready.length > 0) yield* ready.splice(0);
      }
      verifier?.endInstruction();
    } else if (op === OP_END) {
      const newLength = reader.varintNow('new length');
      let expected: Uint8Array | undefined;
      if (header.hasChecksum) {
        if ((await reader.fill(CHECKSUM_SIZE)) < CHECKSUM_SIZE)
          fail('TRUNCATED', 'input ends inside checksum');
        expected = reader.peek(CHECKSUM_SIZE).slice();
        reader.skip(CHECKSUM_SIZE);
      }
      if (!(await reader.atEnd())) fail('TRAILING_DATA', 'bytes follow END');
      if (newLength !== output.length) {
        fail('NEW_LENGTH_MISMATCH', `END says ${newLength} bytes, instructions produced ${output.length}`);
      }
      output.flush(ready);
      if (expected && verifier) {
        const actual = verifier.digest();
        if (!actual.every((b, i) => b === expected[i]))
          fail('CHECKSUM_MISMATCH', 'BLAKE2b-256 of the output differs');
      }
      yield* ready.splice(0);
      return;
    } else {
      fail('BAD_OPCODE', `unknown instruction 0x${op.toString(16).padStart(2, '0')}`);
    }
  }
}
