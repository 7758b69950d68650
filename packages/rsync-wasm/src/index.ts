export { signature, delta, loadSignature, type SignatureOptions, type DeltaOptions } from './api.ts';
export { patch, type OldFileReader, type PatchOptions } from './patch.ts';
export { estimateEliminationRatios, type EliminationEstimate, type EstimateOptions } from './estimate.ts';
export { parseSignature, suggestStrongLength, type Signature } from './format.ts';
export {
  DEFAULT_STRONG_LENGTH,
  FORMAT_VERSION,
  MAX_BLOCK_SIZE,
  MAX_STRONG_LENGTH,
  MIN_BLOCK_SIZE,
  MIN_STRONG_LENGTH,
} from './format.ts';
export { collect, type ByteSource } from './source.ts';
export {
  OldReaderError,
  RsyncError,
  RsyncFormatError,
  RsyncOptionError,
  WasmLoadError,
  type RsyncFormatErrorCode,
} from './errors.ts';
