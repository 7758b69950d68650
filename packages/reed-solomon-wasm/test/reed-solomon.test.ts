import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CorruptShardError,
  InvalidParametersError,
  ReedSolomon,
  ShardSizeMismatchError,
  TooFewShardsError,
  type MaybeShard,
} from '../src/index.ts';
import { gfMul, gfInv } from '../src/gf256.ts';

/** Plain reference: parity[i] = Σ_j 1/((k+i) ^ j) · data[j], byte by byte. */
function referenceParity(n: number, k: number, data: readonly Uint8Array[]): Uint8Array[] {
  const size = data[0]?.length ?? 0;
  return Array.from({ length: n - k }, (_, i) => {
    const out = new Uint8Array(size);
    data.forEach((shard, j) => {
      const c = gfInv((k + i) ^ j);
      for (let b = 0; b < size; b++) out[b] = (out[b] ?? 0) ^ gfMul(c, shard[b] ?? 0);
    });
    return out;
  });
}

/** Fast deep equality for shard lists (vitest's toEqual is slow on many typed arrays). */
function sameShards(a: readonly MaybeShard[], b: readonly MaybeShard[]): boolean {
  return (
    a.length === b.length &&
    a.every((s, i) => {
      const t = b[i];
      return (
        !!s &&
        !!t &&
        Buffer.from(s.buffer, s.byteOffset, s.length).equals(Buffer.from(t.buffer, t.byteOffset, t.length))
      );
    })
  );
}

function randomShards(count: number, size: number, seed: number): Uint8Array[] {
  let s = seed >>> 0 || 1;
  return Array.from({ length: count }, () => {
    const shard = new Uint8Array(size);
    for (let i = 0; i < size; i++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      shard[i] = s >>> 24;
    }
    return shard;
  });
}

function* combinations(n: number, k: number, start = 0, prefix: number[] = []): Generator<number[]> {
  if (prefix.length === k) {
    yield prefix;
    return;
  }
  for (let i = start; i <= n - (k - prefix.length); i++) yield* combinations(n, k, i + 1, [...prefix, i]);
}

function keepOnly(shards: readonly Uint8Array[], keep: readonly number[]): MaybeShard[] {
  return shards.map((s, i) => (keep.includes(i) ? s : i % 2 === 0 ? null : undefined));
}

const cache = new Map<string, Promise<ReedSolomon>>();
function codec(n: number, k: number): Promise<ReedSolomon> {
  const key = `${n},${k}`;
  let rs = cache.get(key);
  if (!rs) {
    rs = ReedSolomon.create(n, k);
    cache.set(key, rs);
  }
  return rs;
}

describe('ReedSolomon encode', () => {
  it('matches a byte-by-byte reference for random (n, k) and shard sizes', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc
          .integer({ min: 2, max: 40 })
          .chain((k) => fc.tuple(fc.constant(k), fc.integer({ min: k + 1, max: Math.min(255, k + 12) }))),
        fc.oneof(fc.integer({ min: 0, max: 100 }), fc.integer({ min: 16_370, max: 16_400 })),
        fc.integer(),
        async ([k, n], size, seed) => {
          const rs = await codec(n, k);
          const bytes = size > 1000 && k * (n - k) > 40 ? 200 : size;
          const data = randomShards(k, bytes, seed);
          expect(sameShards(rs.encode(data), referenceParity(n, k, data))).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('handles the extremes RS(255, 2) and RS(255, 254)', async () => {
    for (const [n, k] of [
      [255, 2],
      [255, 254],
    ] as const) {
      const rs = await codec(n, k);
      const data = randomShards(k, 33, n + k);
      const parity = rs.encode(data);
      expect(sameShards(parity, referenceParity(n, k, data))).toBe(true);
      const all = [...data, ...parity];
      const keep = Array.from({ length: k }, (_, i) => n - 1 - i);
      expect(sameShards(rs.reconstruct(keepOnly(all, keep)), all)).toBe(true);
    }
  });
});

describe('ReedSolomon reconstruct', () => {
  it('rebuilds exactly from every choice of k surviving shards (all subsets for n ≤ 9)', async () => {
    for (let n = 3; n <= 9; n++) {
      for (let k = 2; k < n; k++) {
        const rs = await codec(n, k);
        const data = randomShards(k, 45, n * 31 + k);
        const all = [...data, ...rs.encode(data)];
        for (const keep of combinations(n, k)) {
          expect(sameShards(rs.reconstruct(keepOnly(all, keep)), all), `RS(${n},${k}) keeping ${keep}`).toBe(
            true,
          );
        }
      }
    }
  });

  it('rebuilds exactly from sampled choices of k shards for large n', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc
          .integer({ min: 10, max: 255 })
          .chain((n) => fc.tuple(fc.constant(n), fc.integer({ min: 2, max: n - 1 }))),
        fc.integer({ min: 1, max: 300 }),
        fc.integer(),
        fc.integer(),
        async ([n, k], size, seed, pick) => {
          const rs = await codec(n, k);
          const data = randomShards(k, size, seed);
          const all = [...data, ...rs.encode(data)];
          // A pseudo-random k-subset (partial Fisher–Yates).
          const order = Array.from({ length: n }, (_, i) => i);
          let s = pick >>> 0 || 7;
          for (let i = 0; i < k; i++) {
            s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
            const j = i + (s % (n - i));
            [order[i], order[j]] = [order[j] ?? 0, order[i] ?? 0];
          }
          expect(sameShards(rs.reconstruct(keepOnly(all, order.slice(0, k))), all)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  it('works across the 16 KiB segment boundary and for empty shards', async () => {
    const rs = await codec(10, 4);
    for (const size of [0, 1, 16, 16_383, 16_384, 16_385, 100_001]) {
      const data = randomShards(4, size, size + 1);
      const all = [...data, ...rs.encode(data)];
      expect(sameShards(rs.reconstruct(keepOnly(all, [1, 5, 7, 9])), all)).toBe(true);
    }
  });
});

describe('ReedSolomon errors', () => {
  it('rejects parameters outside 2 ≤ k < n ≤ 255', async () => {
    for (const [n, k] of [
      [3, 1],
      [3, 3],
      [256, 4],
      [5, 6],
      [4.5, 2],
    ]) {
      await expect(ReedSolomon.create(n ?? 0, k ?? 0)).rejects.toBeInstanceOf(InvalidParametersError);
    }
  });

  it('reports too few shards with the missing indices', async () => {
    const rs = await codec(6, 4);
    const data = randomShards(4, 10, 1);
    const all = [...data, ...rs.encode(data)];
    const error = (() => {
      try {
        rs.reconstruct(keepOnly(all, [0, 2, 5]));
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(TooFewShardsError);
    expect((error as TooFewShardsError).missing).toEqual([1, 3, 4]);
    expect(() => rs.verify(keepOnly(all, [0]))).toThrow(TooFewShardsError);
  });

  it('reports size mismatches and wrong shard counts', async () => {
    const rs = await codec(6, 4);
    const data = randomShards(4, 10, 1);
    expect(() => rs.encode([...data.slice(0, 3), new Uint8Array(9)])).toThrow(ShardSizeMismatchError);
    expect(() => rs.encode(data.slice(0, 3))).toThrow(ShardSizeMismatchError);
    const all: MaybeShard[] = [...data, ...rs.encode(data)];
    all[5] = new Uint8Array(11);
    expect(() => rs.reconstruct(all)).toThrow(ShardSizeMismatchError);
    expect(() => rs.reconstruct(all.slice(0, 5))).toThrow(ShardSizeMismatchError);
    expect(() => rs.encodeInto(data, [new Uint8Array(10)])).toThrow(ShardSizeMismatchError);
  });

  it('verify reports missing shards, disagreeing shards and locates a single corrupt one', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom([3, 2], [6, 4], [10, 4], [14, 10], [20, 5]),
        fc.nat(),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        async ([n, k], victim0, byte0, xor) => {
          const rs = await codec(n ?? 0, k ?? 0);
          const data = randomShards(k ?? 0, 64, victim0 + 3);
          const all = [...data, ...rs.encode(data)];
          expect(rs.verify(all)).toEqual({
            ok: true,
            missing: [],
            inconsistent: [],
            corruptShard: undefined,
          });
          const victim = victim0 % all.length;
          const bad = all.map((s) => s.slice());
          const shard = bad[victim] ?? new Uint8Array(0);
          shard[byte0 % 64] = (shard[byte0 % 64] ?? 0) ^ xor;
          const report = rs.verify(bad);
          expect(report.ok).toBe(false);
          expect(report.inconsistent.length).toBeGreaterThan(0);
          if ((n ?? 0) - (k ?? 0) >= 2) expect(report.corruptShard).toBe(victim);
          expect(() => rs.reconstruct(bad, { verify: true })).toThrow(CorruptShardError);
          const gap = bad.map((s, i) => (i === victim ? null : s));
          expect(rs.verify(gap).missing).toEqual([victim]);
          expect(sameShards(rs.reconstruct(gap), all)).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('ReedSolomon.stripe (zero-copy, shards in wasm memory)', () => {
  it('encodes like encode() and reconstructs any n − k lost shards in place', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom([3, 2], [6, 4], [10, 4], [14, 10], [40, 7]),
        fc.integer({ min: 0, max: 40_000 }),
        fc.integer(),
        fc.integer(),
        async ([n, k], size, seed, pick) => {
          const rs = await codec(n ?? 0, k ?? 0);
          const data = randomShards(k ?? 0, size, seed);
          const expected = [...data, ...rs.encode(data)];
          const stripe = rs.stripe(size);
          data.forEach((d, i) => stripe.shards[i]?.set(d));
          stripe.encode();
          expect(sameShards(stripe.shards, expected)).toBe(true);
          // Lose a pseudo-random set of n − k shards, overwrite them with junk, rebuild.
          const order = Array.from({ length: n ?? 0 }, (_, i) => i);
          let s = pick >>> 0 || 3;
          for (let i = order.length - 1; i > 0; i--) {
            s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
            const j = s % (i + 1);
            [order[i], order[j]] = [order[j] ?? 0, order[i] ?? 0];
          }
          const lost = order.slice(0, (n ?? 0) - (k ?? 0));
          for (const i of lost) stripe.shards[i]?.fill(0xa5);
          stripe.reconstruct(lost);
          expect(sameShards(stripe.shards, expected)).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('reports too few shards and unknown indices', async () => {
    const rs = await codec(6, 4);
    const stripe = rs.stripe(64);
    expect(() => stripe.reconstruct([0, 1, 2])).toThrow(TooFewShardsError);
    expect(() => stripe.reconstruct([6])).toThrow(ShardSizeMismatchError);
    expect(() => rs.stripe(-1)).toThrow(ShardSizeMismatchError);
  });
});
