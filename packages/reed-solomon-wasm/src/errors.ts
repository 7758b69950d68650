/** Base class of every error this package throws on purpose. */
export class ReedSolomonError extends Error {
  override readonly name: string = 'ReedSolomonError';
}

/** n and k must satisfy 2 ≤ k < n ≤ 255. */
export class InvalidParametersError extends ReedSolomonError {
  override readonly name: string = 'InvalidParametersError';
}

/** Fewer than k shards survive: the data cannot be rebuilt. */
export class TooFewShardsError extends ReedSolomonError {
  override readonly name: string = 'TooFewShardsError';
  constructor(
    readonly present: number,
    readonly needed: number,
    readonly missing: readonly number[],
  ) {
    super(`${present} shards present, ${needed} needed; missing ${missing.join(', ')}`);
  }
}

/** Shards differ in length, or the shard count is not n (or k for data). */
export class ShardSizeMismatchError extends ReedSolomonError {
  override readonly name: string = 'ShardSizeMismatchError';
}

/** Shards are present but inconsistent with each other. */
export class CorruptShardError extends ReedSolomonError {
  override readonly name: string = 'CorruptShardError';
  constructor(
    message: string,
    /** Shards that disagree with the codeword of the first k present shards. */
    readonly inconsistent: readonly number[],
    /** The corrupt shard, when it could be located. */
    readonly corruptShard: number | undefined,
  ) {
    super(message);
  }
}

/** The WebAssembly module is missing (package not built) or failed to load. */
export class WasmLoadError extends ReedSolomonError {
  override readonly name: string = 'WasmLoadError';
}
