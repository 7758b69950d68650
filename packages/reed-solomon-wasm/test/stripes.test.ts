import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { encodeStripes, joinShards, ReedSolomon, splitIntoShards, stripes } from '../src/index.ts';

describe('stripe helpers', () => {
  it('splitIntoShards pads and joinShards restores the buffer', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 5000 }), fc.integer({ min: 1, max: 20 }), (data, k) => {
        const shards = splitIntoShards(data, k);
        expect(shards).toHaveLength(k);
        expect(new Set(shards.map((s) => s.length)).size).toBe(1);
        expect(joinShards(shards, data.length)).toEqual(data);
      }),
    );
  });

  it('stripes() cuts any chunking into padded stripes that rebuild the stream', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 20_000 }),
        fc.integer({ min: 2, max: 6 }),
        fc.integer({ min: 1, max: 3000 }),
        fc.array(fc.integer({ min: 1, max: 7000 }), { minLength: 1, maxLength: 4 }),
        async (data, k, shardSize, cuts) => {
          function* chunks(): Generator<Uint8Array> {
            let i = 0;
            for (let o = 0; o < data.length; i++) {
              const n = cuts[i % cuts.length] ?? 1;
              yield data.subarray(o, o + n);
              o += n;
            }
          }
          const rs = await ReedSolomon.create(k + 2, k);
          const parts: Uint8Array[] = [];
          let index = 0;
          for await (const stripe of encodeStripes(rs, chunks(), shardSize)) {
            expect(stripe.index).toBe(index++);
            expect(stripe.shards).toHaveLength(k + 2);
            expect(stripe.shards.every((s) => s.length === shardSize)).toBe(true);
            const lost = stripe.shards.map((s, i) => (i === 0 || i === k - 1 ? null : s));
            parts.push(joinShards(rs.reconstruct(lost).slice(0, k), stripe.dataLength));
          }
          expect(Buffer.concat(parts)).toEqual(Buffer.from(data));
          expect(index).toBe(Math.ceil(data.length / (k * shardSize)));
        },
      ),
      { numRuns: 60 },
    );
    const none = [];
    for await (const s of stripes(new Uint8Array(0), { k: 2, shardSize: 4 })) none.push(s);
    expect(none).toEqual([]);
  });
});
