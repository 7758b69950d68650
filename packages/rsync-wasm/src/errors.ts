/** Why a signature or delta was rejected. */
export type RsyncFormatErrorCode =
  | 'BAD_MAGIC'
  | 'UNSUPPORTED_VERSION'
  | 'UNSUPPORTED_ALGORITHM'
  | 'BAD_HEADER'
  | 'TRUNCATED'
  | 'BAD_OPCODE'
  | 'BAD_VARINT'
  | 'BAD_LENGTH'
  | 'COPY_OUT_OF_RANGE'
  | 'OLD_LENGTH_MISMATCH'
  | 'NEW_LENGTH_MISMATCH'
  | 'OUTPUT_TOO_LARGE'
  | 'CHECKSUM_MISMATCH'
  | 'TRAILING_DATA';

/** Base class of every error this package throws on purpose. */
export class RsyncError extends Error {
  override readonly name: string = 'RsyncError';
}

/** A signature or delta is malformed, of an unknown version, or does not fit the old file. */
export class RsyncFormatError extends RsyncError {
  override readonly name: string = 'RsyncFormatError';
  constructor(
    readonly kind: 'signature' | 'delta',
    readonly code: RsyncFormatErrorCode,
    message: string,
  ) {
    super(`${kind}: ${message}`);
  }
}

/** An option (block size, strong hash length) is out of range. */
export class RsyncOptionError extends RsyncError {
  override readonly name: string = 'RsyncOptionError';
}

/** The old-file reader returned fewer or more bytes than asked for. */
export class OldReaderError extends RsyncError {
  override readonly name: string = 'OldReaderError';
}

/** The WebAssembly module is missing (package not built) or failed to load. */
export class WasmLoadError extends RsyncError {
  override readonly name: string = 'WasmLoadError';
}
