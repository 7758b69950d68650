import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { rechunk } from '../src/body.ts';

/** A producer that hands out views of one buffer and overwrites it after each chunk. */
async function* reusing(data: Buffer, chunk: number): AsyncIterable<Uint8Array> {
  const scratch = Buffer.alloc(chunk);
  for (let at = 0; at < data.length; at += chunk) {
    const n = Math.min(chunk, data.length - at);
    data.copy(scratch, 0, at, at + n);
    yield scratch.subarray(0, n);
    scratch.fill(0xee);
  }
}

async function pieces(stream: AsyncIterable<Buffer>): Promise<Buffer[]> {
  const out: Buffer[] = [];
  for await (const p of stream) out.push(p);
  return out;
}

describe('rechunk', () => {
  it.each([
    [10_000, 1000, 333],
    [10_000, 1000, 1000],
    [10_000, 1000, 4096],
    [10_001, 1000, 7],
    [1, 1000, 1],
    [999, 1000, 64],
    [2500, 1000, 2500],
  ])(
    '%i bytes in pieces of %i from chunks of %i: exact sizes, the bytes in order',
    async (n, size, chunk) => {
      const data = randomBytes(n);
      const got = await pieces(rechunk(reusing(data, chunk), size));
      expect(got.length).toBe(Math.ceil(n / size));
      got.forEach((p, i) =>
        expect(p.byteLength).toBe(i < got.length - 1 ? size : n - size * (got.length - 1)),
      );
      // The producer overwrote its buffer after every chunk: the pieces must be copies.
      expect(Buffer.concat(got).equals(data)).toBe(true);
    },
  );

  it('a short last piece does not keep a whole piece of memory alive', async () => {
    const [p] = await pieces(rechunk(reusing(randomBytes(10), 10), 1 << 20));
    expect(p!.byteLength).toBe(10);
    expect(p!.buffer.byteLength).toBeLessThan(1 << 20);
  });

  it('an empty stream gives no pieces; a bad size is refused', async () => {
    expect(await pieces(rechunk(reusing(Buffer.alloc(0), 10), 10))).toEqual([]);
    await expect(pieces(rechunk(reusing(randomBytes(5), 5), 0))).rejects.toThrow(/bad chunk size/);
  });
});
