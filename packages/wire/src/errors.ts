/**
 * Typed errors for everything @weft/wire parses. Decoders never throw anything else on
 * bad input (no RangeError, no zlib error, no InvalidPathError escaping unwrapped).
 */
export type WireFormat = 'bundle' | 'transfer-block' | 'delta-container' | 'api' | 'pack';

export type WireErrorCode =
  | 'BAD_MAGIC'
  | 'UNSUPPORTED_VERSION'
  | 'BAD_HEADER'
  | 'TRUNCATED'
  | 'TRAILING_DATA'
  | 'TOO_LARGE'
  | 'BAD_PATH'
  | 'DUPLICATE_PATH'
  | 'BAD_FIELD'
  | 'BAD_COMPRESSION'
  | 'CHECKSUM_MISMATCH'
  | 'BAD_MESSAGE';

export class WireFormatError extends Error {
  override readonly name: string = 'WireFormatError';
  constructor(
    readonly format: WireFormat,
    readonly code: WireErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${format}: ${message}`, options);
  }
}

export function isWireFormatError(e: unknown): e is WireFormatError {
  return e instanceof WireFormatError;
}
