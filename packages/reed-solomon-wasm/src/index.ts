export { ReedSolomon, type MaybeShard, type VerifyResult, type WasmStripe } from './reed-solomon.ts';
export {
  encodeStripes,
  joinShards,
  splitIntoShards,
  stripes,
  type ByteSource,
  type Stripe,
  type StripeOptions,
} from './stripes.ts';
export {
  CorruptShardError,
  InvalidParametersError,
  ReedSolomonError,
  ShardSizeMismatchError,
  TooFewShardsError,
  WasmLoadError,
} from './errors.ts';
