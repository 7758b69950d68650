import { collect, delta, patch, signature, type DeltaOptions, type SignatureOptions } from '../src/index.ts';

/** Splits a buffer into chunks of the given sizes (cycled), to exercise streaming. */
export function* chunked(bytes: Uint8Array, sizes: readonly number[]): Generator<Uint8Array> {
  let i = 0;
  for (let offset = 0; offset < bytes.length; i++) {
    const size = Math.max(1, sizes[i % sizes.length] ?? bytes.length);
    yield bytes.subarray(offset, offset + size);
    offset += size;
  }
}

export async function roundTrip(
  oldBytes: Uint8Array,
  newBytes: Uint8Array,
  options: SignatureOptions & DeltaOptions,
  chunkSizes: readonly number[] = [1 << 20],
): Promise<{ out: Uint8Array; sig: Uint8Array; delta: Uint8Array }> {
  const sig = await collect(signature(chunked(oldBytes, chunkSizes), options));
  const d = await collect(delta(sig, chunked(newBytes, chunkSizes), options));
  const out = await collect(patch(oldBytes, chunked(d, chunkSizes)));
  return { out, sig, delta: d };
}

/** The weak checksum of docs/formats/delta.md, written independently of the wasm. */
export function rollsum(block: Uint8Array): number {
  let a = 0;
  let b = 0;
  for (const x of block) {
    a = (a + x + 31) >>> 0;
    b = (b + a) >>> 0;
  }
  return ((b << 16) | (a & 0xffff)) >>> 0;
}

export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Deterministic pseudo-random bytes (xorshift), for large inputs without fast-check. */
export function pseudoRandom(length: number, seed: number): Uint8Array {
  const out = new Uint8Array(length);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < length; i++) {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    out[i] = s & 0xff;
  }
  return out;
}
