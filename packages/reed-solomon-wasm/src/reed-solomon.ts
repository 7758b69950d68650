import {
  CorruptShardError,
  InvalidParametersError,
  ShardSizeMismatchError,
  TooFewShardsError,
} from './errors.ts';
import { generatorRow, invert, parityMatrix } from './gf256.ts';
import { instantiate, type ReedSolomonWasm } from './wasm.ts';

/** Bytes of each shard handled per wasm call; bounds wasm memory to n × 16 KiB. */
const SEGMENT = 16384;

/** A shard slot: a shard, or null/undefined when it is missing. */
export type MaybeShard = Uint8Array | null | undefined;

export interface VerifyResult {
  /** True when every shard is present and all agree. */
  readonly ok: boolean;
  /** Indices of missing shards. */
  readonly missing: readonly number[];
  /** Present shards that disagree with the codeword decoded from the first k present shards. */
  readonly inconsistent: readonly number[];
  /** The one corrupt shard, when exactly one is corrupt and enough redundancy remains to tell. */
  readonly corruptShard: number | undefined;
}

/**
 * Systematic RS(n, k) over GF(2^8): shards 0..k-1 are the data, k..n-1 the parity.
 * Any k shards rebuild the rest. Create with `await ReedSolomon.create(n, k)`; the
 * methods are then synchronous. Not safe to share across workers (one wasm instance).
 */
export class ReedSolomon {
  readonly parityShards: number;
  private readonly parity: Uint8Array[];

  private constructor(
    private readonly wasm: ReedSolomonWasm,
    readonly n: number,
    readonly k: number,
  ) {
    this.parityShards = n - k;
    this.parity = parityMatrix(n, k);
  }

  static async create(n: number, k: number): Promise<ReedSolomon> {
    if (!Number.isInteger(n) || !Number.isInteger(k) || k < 2 || k >= n || n > 255) {
      throw new InvalidParametersError(`RS(n, k) needs integers 2 ≤ k < n ≤ 255, got n = ${n}, k = ${k}`);
    }
    const wasm = await instantiate();
    wasm.init(k, Math.max(n - k, 1), SEGMENT);
    return new ReedSolomon(wasm, n, k);
  }

  /** Computes the n − k parity shards of k equally long data shards. */
  encode(data: readonly Uint8Array[]): Uint8Array[] {
    const size = this.checkData(data);
    const parity = Array.from({ length: this.parityShards }, () => new Uint8Array(size));
    this.multiply(this.parity, data, parity);
    return parity;
  }

  /** Like encode(), writing into caller-provided parity shards of the data's length. */
  encodeInto(data: readonly Uint8Array[], parity: readonly Uint8Array[]): void {
    const size = this.checkData(data);
    if (parity.length !== this.parityShards || parity.some((p) => p.length !== size)) {
      throw new ShardSizeMismatchError(`need ${this.parityShards} parity shards of ${size} bytes`);
    }
    this.multiply(this.parity, data, parity);
  }

  /**
   * Zero-copy stripe: n shards of shardSize bytes that live in wasm memory. Fill the data
   * shards (e.g. read a file straight into them), then encode() or reconstruct() work in
   * place without copying shards in and out. One stripe per codec: calling stripe() again
   * may move it and makes the previous views unusable (their length becomes 0).
   */
  stripe(shardSize: number): WasmStripe {
    if (!Number.isInteger(shardSize) || shardSize < 0 || shardSize * this.n > 0x7fff0000) {
      throw new ShardSizeMismatchError(`shard size ${shardSize} does not fit in wasm memory`);
    }
    const w = this.wasm;
    const base = w.stripeAlloc(Math.max(1, this.n * shardSize));
    const shards = Array.from(
      { length: this.n },
      (_, i) => new Uint8Array(w.memory.buffer, base + i * shardSize, shardSize),
    );
    const address = (i: number): number => base + i * shardSize;
    return {
      shardSize,
      shards,
      encode: () =>
        this.multiplyInPlace(
          this.parity,
          range(this.k).map(address),
          range(this.k, this.n).map(address),
          shardSize,
        ),
      reconstruct: (missing: readonly number[]) => {
        const lost = new Set(missing);
        for (const i of lost) {
          if (!Number.isInteger(i) || i < 0 || i >= this.n) throw new ShardSizeMismatchError(`no shard ${i}`);
        }
        const present = range(this.n).filter((i) => !lost.has(i));
        if (present.length < this.k)
          throw new TooFewShardsError(
            present.length,
            this.k,
            [...lost].sort((a, b) => a - b),
          );
        const missingData = [...lost].filter((i) => i < this.k).sort((a, b) => a - b);
        if (missingData.length > 0) {
          const chosen = present.slice(0, this.k);
          const decode = invert(chosen.map((i) => generatorRow(this.parity, this.k, i)));
          this.multiplyInPlace(
            missingData.map((i) => decode[i] ?? new Uint8Array(this.k)),
            chosen.map(address),
            missingData.map(address),
            shardSize,
          );
        }
        const missingParity = [...lost].filter((i) => i >= this.k).sort((a, b) => a - b);
        if (missingParity.length > 0) {
          this.multiplyInPlace(
            missingParity.map((i) => generatorRow(this.parity, this.k, i)),
            range(this.k).map(address),
            missingParity.map(address),
            shardSize,
          );
        }
      },
    };
  }

  /**
   * Returns all n shards, rebuilding the missing ones from any k present ones.
   * Present shards are returned as given; with `verify: true` the shards beyond the first k
   * present ones are checked and CorruptShardError is thrown if any disagree.
   * Throws TooFewShardsError when fewer than k are present, ShardSizeMismatchError when
   * lengths differ or the slot count is not n.
   */
  reconstruct(shards: readonly MaybeShard[], options: { verify?: boolean } = {}): Uint8Array[] {
    if (options.verify) {
      const report = this.verify(shards);
      if (report.inconsistent.length > 0) {
        const where =
          report.corruptShard === undefined ? 'cannot tell which' : `shard ${report.corruptShard}`;
        throw new CorruptShardError(
          `shards ${report.inconsistent.join(', ')} disagree with the others (${where} is corrupt)`,
          report.inconsistent,
          report.corruptShard,
        );
      }
    }
    const { present, missing, size } = this.survey(shards);
    if (present.length < this.k) throw new TooFewShardsError(present.length, this.k, missing);
    const out = shards.slice() as MaybeShard[];
    if (missing.length === 0) return out as Uint8Array[];
    const missingData = missing.filter((i) => i < this.k);
    if (missingData.length > 0) {
      const chosen = present.slice(0, this.k);
      const decode = invert(chosen.map((i) => generatorRow(this.parity, this.k, i)));
      const rows = missingData.map((i) => decode[i] ?? new Uint8Array(this.k));
      const rebuilt = missingData.map(() => new Uint8Array(size));
      this.multiply(
        rows,
        chosen.map((i) => shards[i] as Uint8Array),
        rebuilt,
      );
      missingData.forEach((i, r) => (out[i] = rebuilt[r]));
    }
    const missingParity = missing.filter((i) => i >= this.k);
    if (missingParity.length > 0) {
      const rebuilt = missingParity.map(() => new Uint8Array(size));
      this.multiply(
        missingParity.map((i) => generatorRow(this.parity, this.k, i)),
        out.slice(0, this.k) as Uint8Array[],
        rebuilt,
      );
      missingParity.forEach((i, r) => (out[i] = rebuilt[r]));
    }
    return out as Uint8Array[];
  }

  /**
   * Checks that the present shards form one codeword; reports missing and inconsistent
   * shards, and locates a single corrupt shard when at least k + 2 shards are present.
   */
  verify(shards: readonly MaybeShard[]): VerifyResult {
    const { present, missing } = this.survey(shards);
    if (present.length < this.k) throw new TooFewShardsError(present.length, this.k, missing);
    const inconsistent = this.disagreeing(shards, present);
    let corruptShard: number | undefined;
    if (inconsistent.length > 0 && present.length >= this.k + 2) {
      const candidates = present.filter((suspect) => {
        const others = present.filter((i) => i !== suspect);
        const without = shards.map((s, i) => (i === suspect ? undefined : s));
        return this.disagreeing(without, others).length === 0;
      });
      if (candidates.length === 1) corruptShard = candidates[0];
    }
    return { ok: missing.length === 0 && inconsistent.length === 0, missing, inconsistent, corruptShard };
  }

  /** Present shards (beyond the first k present) that differ from the decoded codeword. */
  private disagreeing(shards: readonly MaybeShard[], present: readonly number[]): number[] {
    const rest = present.slice(this.k);
    if (rest.length === 0) return [];
    const basis = shards.map((s, i) => (present.slice(0, this.k).includes(i) ? s : undefined));
    const full = this.reconstruct(basis);
    return rest.filter((i) => {
      const a = full[i];
      const b = shards[i];
      return !a || !b || !equalBytes(a, b);
    });
  }

  private checkData(data: readonly Uint8Array[]): number {
    if (data.length !== this.k) {
      throw new ShardSizeMismatchError(`expected ${this.k} data shards, got ${data.length}`);
    }
    const size = data[0]?.length ?? 0;
    if (data.some((d) => d.length !== size)) throw new ShardSizeMismatchError('data shards differ in length');
    return size;
  }

  private survey(shards: readonly MaybeShard[]): { present: number[]; missing: number[]; size: number } {
    if (shards.length !== this.n) {
      throw new ShardSizeMismatchError(`expected ${this.n} shard slots, got ${shards.length}`);
    }
    const present: number[] = [];
    const missing: number[] = [];
    let size = -1;
    shards.forEach((s, i) => {
      if (!s) {
        missing.push(i);
        return;
      }
      if (size === -1) size = s.length;
      else if (s.length !== size) {
        throw new ShardSizeMismatchError(`shard ${i} has ${s.length} bytes, expected ${size}`);
      }
      present.push(i);
    });
    return { present, missing, size: Math.max(size, 0) };
  }

  /** out[r] = Σ_j rows[r][j] · in[j] for shards already in wasm memory (addresses). */
  private multiplyInPlace(
    rows: readonly Uint8Array[],
    inputs: readonly number[],
    outputs: readonly number[],
    size: number,
  ): void {
    const w = this.wasm;
    const memory = new Uint8Array(w.memory.buffer);
    rows.forEach((row, r) =>
      memory.set(row.subarray(0, inputs.length), w.coefficientPtr() + r * inputs.length),
    );
    w.prepare(outputs.length, inputs.length);
    const tables = new Uint32Array(w.memory.buffer);
    inputs.forEach((address, j) => (tables[(w.inputTablePtr() >> 2) + j] = address));
    outputs.forEach((address, r) => (tables[(w.outputTablePtr() >> 2) + r] = address));
    if (size > 0 && outputs.length > 0) w.matMul(outputs.length, inputs.length, size);
  }

  /** outputs[r] = Σ_j rows[r][j] · inputs[j], one segment at a time in wasm. */
  private multiply(
    rows: readonly Uint8Array[],
    inputs: readonly Uint8Array[],
    outputs: readonly Uint8Array[],
  ): void {
    const w = this.wasm;
    const nIn = inputs.length;
    const nOut = outputs.length;
    if (nOut === 0) return;
    const memory = new Uint8Array(w.memory.buffer);
    const coefficients = w.coefficientPtr();
    rows.forEach((row, r) => memory.set(row.subarray(0, nIn), coefficients + r * nIn));
    w.prepare(nOut, nIn);
    const inputPtr = w.inputPtr();
    const outputPtr = w.outputPtr();
    const tables = new Uint32Array(w.memory.buffer);
    for (let j = 0; j < nIn; j++) tables[(w.inputTablePtr() >> 2) + j] = inputPtr + j * SEGMENT;
    for (let r = 0; r < nOut; r++) tables[(w.outputTablePtr() >> 2) + r] = outputPtr + r * SEGMENT;
    const size = outputs[0]?.length ?? 0;
    for (let offset = 0; offset < size; offset += SEGMENT) {
      const length = Math.min(SEGMENT, size - offset);
      inputs.forEach((input, j) =>
        memory.set(input.subarray(offset, offset + length), inputPtr + j * SEGMENT),
      );
      w.matMul(nOut, nIn, length);
      outputs.forEach((output, r) =>
        output.set(memory.subarray(outputPtr + r * SEGMENT, outputPtr + r * SEGMENT + length), offset),
      );
    }
  }
}

/** A stripe whose shards live in wasm memory (see ReedSolomon.stripe). */
export interface WasmStripe {
  readonly shardSize: number;
  /** n views: data shards 0..k-1, then parity shards k..n-1. */
  readonly shards: readonly Uint8Array[];
  /** Computes the parity shards from the data shards, in place. */
  encode(): void;
  /** Rebuilds the listed shards in place from the others (any k of them suffice). */
  reconstruct(missing: readonly number[]): void;
}

function range(from: number, to?: number): number[] {
  const [start, end] = to === undefined ? [0, from] : [from, to];
  return Array.from({ length: Math.max(0, end - start) }, (_, i) => start + i);
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
