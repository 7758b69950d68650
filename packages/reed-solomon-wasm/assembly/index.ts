// GF(2^8) matrix × shards kernel for Reed–Solomon, with wasm SIMD.
//
// Multiplying 16 bytes by a constant c uses two 16-entry tables (c·x for the low nibble,
// c·(x << 4) for the high nibble) and i8x16.swizzle as a parallel table lookup:
//   c·v = lo[v & 15] ^ hi[v >> 4]
// The TypeScript side copies shard segments in, calls matMul, and copies results out.

const POLY: u32 = 0x11d; // x^8 + x^4 + x^3 + x^2 + 1

let expTable: usize = 0; // 512 bytes: exp[i] for i < 510, so exp[log a + log b] needs no mod
let logTable: usize = 0; // 256 bytes
let mulTable: usize = 0; // 65536 bytes: mul[c << 8 | x]
let nibbles: usize = 0; // 256 × 32 bytes: per c, lo[16] then hi[16]

let segment: u32 = 0;
let inputs: usize = 0;
let outputs: usize = 0;
let coefficients: usize = 0;

function alloc(n: usize): usize {
  const p = heap.alloc(n);
  memory.fill(p, 0, n);
  return p;
}

function gfMul(a: u32, b: u32): u32 {
  if (a == 0 || b == 0) return 0;
  return <u32>load<u8>(expTable + <usize>load<u8>(logTable + a) + <usize>load<u8>(logTable + b));
}

/**
 * Builds the tables and buffers for up to maxIn input and maxOut output shards, processed
 * seg bytes at a time (seg a multiple of 16).
 */
export function init(maxIn: u32, maxOut: u32, seg: u32): void {
  expTable = alloc(512);
  logTable = alloc(256);
  let x: u32 = 1;
  for (let i: u32 = 0; i < 255; i++) {
    store<u8>(expTable + i, <u8>x);
    store<u8>(expTable + i + 255, <u8>x);
    store<u8>(logTable + x, <u8>i);
    x <<= 1;
    if (x & 0x100) x ^= POLY;
  }
  mulTable = alloc(65536);
  nibbles = alloc(256 * 32);
  for (let c: u32 = 0; c < 256; c++) {
    for (let v: u32 = 0; v < 256; v++) store<u8>(mulTable + (c << 8) + v, <u8>gfMul(c, v));
    for (let v: u32 = 0; v < 16; v++) {
      store<u8>(nibbles + (c << 5) + v, <u8>gfMul(c, v));
      store<u8>(nibbles + (c << 5) + 16 + v, <u8>gfMul(c, v << 4));
    }
  }
  segment = seg;
  inputs = alloc(<usize>maxIn * seg);
  outputs = alloc(<usize>maxOut * seg);
  coefficients = alloc(<usize>maxIn * maxOut + 16);
}

export function inputPtr(): usize {
  return inputs;
}
export function outputPtr(): usize {
  return outputs;
}
export function coefficientPtr(): usize {
  return coefficients;
}
export function segmentSize(): u32 {
  return segment;
}

/** dst = c·src (first) or dst ^= c·src, over len bytes. */
function mulRow(dst: usize, src: usize, c: u32, len: usize, first: bool): void {
  let i: usize = 0;
  if (c == 0) {
    if (first) memory.fill(dst, 0, len);
    return;
  }
  if (c == 1) {
    if (first) {
      memory.copy(dst, src, len);
      return;
    }
    for (; i + 16 <= len; i += 16) v128.store(dst + i, v128.xor(v128.load(dst + i), v128.load(src + i)));
    for (; i < len; i++) store<u8>(dst + i, load<u8>(dst + i) ^ load<u8>(src + i));
    return;
  }
  const lo = v128.load(nibbles + ((<usize>c) << 5));
  const hi = v128.load(nibbles + ((<usize>c) << 5) + 16);
  const mask = i8x16.splat(0x0f);
  if (first) {
    for (; i + 32 <= len; i += 32) {
      const a = v128.load(src + i);
      const b = v128.load(src + i + 16);
      v128.store(
        dst + i,
        v128.xor(i8x16.swizzle(lo, v128.and(a, mask)), i8x16.swizzle(hi, i8x16.shr_u(a, 4))),
      );
      v128.store(
        dst + i + 16,
        v128.xor(i8x16.swizzle(lo, v128.and(b, mask)), i8x16.swizzle(hi, i8x16.shr_u(b, 4))),
      );
    }
  } else {
    for (; i + 32 <= len; i += 32) {
      const a = v128.load(src + i);
      const b = v128.load(src + i + 16);
      const pa = v128.xor(i8x16.swizzle(lo, v128.and(a, mask)), i8x16.swizzle(hi, i8x16.shr_u(a, 4)));
      const pb = v128.xor(i8x16.swizzle(lo, v128.and(b, mask)), i8x16.swizzle(hi, i8x16.shr_u(b, 4)));
      v128.store(dst + i, v128.xor(v128.load(dst + i), pa));
      v128.store(dst + i + 16, v128.xor(v128.load(dst + i + 16), pb));
    }
  }
  const row = mulTable + ((<usize>c) << 8);
  for (; i < len; i++) {
    const p = load<u8>(row + <usize>load<u8>(src + i));
    store<u8>(dst + i, first ? p : load<u8>(dst + i) ^ p);
  }
}

/**
 * outputs[r] = Σ_j coefficients[r·nIn + j] · inputs[j] over len bytes (len ≤ segment),
 * for r < nOut. Shard j lives at inputPtr() + j·segment; output r at outputPtr() + r·segment.
 */
export function matMul(nOut: u32, nIn: u32, len: u32): void {
  const seg = <usize>segment;
  for (let r: u32 = 0; r < nOut; r++) {
    const dst = outputs + <usize>r * seg;
    const row = coefficients + <usize>r * nIn;
    for (let j: u32 = 0; j < nIn; j++) {
      mulRow(dst, inputs + <usize>j * seg, <u32>load<u8>(row + j), len, j == 0);
    }
  }
}
