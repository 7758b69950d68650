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
let expanded: usize = 0; // per (row, input): the 32-byte nibble tables of its coefficient
let inPtrs: usize = 0; // u32 address of each input shard
let outPtrs: usize = 0; // u32 address of each output shard
let stripe: usize = 0; // in-memory stripe for the zero-copy API
let stripeCap: usize = 0;

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
  expanded = alloc(<usize>maxIn * maxOut * 32);
  inPtrs = alloc(<usize>maxIn * 4);
  outPtrs = alloc(<usize>maxOut * 4);
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
export function inputTablePtr(): usize {
  return inPtrs;
}
export function outputTablePtr(): usize {
  return outPtrs;
}
/** Room for a whole stripe in wasm memory (reused while big enough; may grow memory). */
export function stripeAlloc(bytes: usize): usize {
  if (bytes > stripeCap) {
    stripe = alloc(bytes);
    stripeCap = bytes;
  }
  return stripe;
}

// Row kernels: for each 32-byte column, every input is loaded and split into nibbles once,
// then multiplied into the accumulators of up to four output rows (kept in registers).

function tail(r: u32, nIn: u32, from: usize, len: usize): void {
  const dst = <usize>load<u32>(outPtrs + ((<usize>r) << 2));
  for (let i = from; i < len; i++) {
    let acc: u32 = 0;
    for (let j: u32 = 0; j < nIn; j++) {
      const c = <usize>load<u8>(coefficients + <usize>r * nIn + j);
      const src = <usize>load<u32>(inPtrs + ((<usize>j) << 2));
      acc ^= <u32>load<u8>(mulTable + (c << 8) + <usize>load<u8>(src + i));
    }
    store<u8>(dst + i, <u8>acc);
  }
}

function rows4(r: u32, nIn: u32, len: usize): usize {
  const stride = (<usize>nIn) << 5;
  const t0 = expanded + <usize>r * stride;
  const t1 = t0 + stride;
  const t2 = t1 + stride;
  const t3 = t2 + stride;
  const d0 = <usize>load<u32>(outPtrs + ((<usize>r) << 2));
  const d1 = <usize>load<u32>(outPtrs + ((<usize>r) << 2) + 4);
  const d2 = <usize>load<u32>(outPtrs + ((<usize>r) << 2) + 8);
  const d3 = <usize>load<u32>(outPtrs + ((<usize>r) << 2) + 12);
  const mask = i8x16.splat(0x0f);
  let off: usize = 0;
  for (; off + 32 <= len; off += 32) {
    let a0 = i8x16.splat(0);
    let b0 = a0;
    let a1 = a0;
    let b1 = a0;
    let a2 = a0;
    let b2 = a0;
    let a3 = a0;
    let b3 = a0;
    for (let j: usize = 0; j < <usize>nIn; j++) {
      const src = <usize>load<u32>(inPtrs + (j << 2)) + off;
      const v = v128.load(src);
      const w = v128.load(src, 16);
      const vl = v128.and(v, mask);
      const vh = i8x16.shr_u(v, 4);
      const wl = v128.and(w, mask);
      const wh = i8x16.shr_u(w, 4);
      const k = j << 5;
      let lo = v128.load(t0 + k);
      let hi = v128.load(t0 + k, 16);
      a0 = v128.xor(a0, v128.xor(i8x16.swizzle(lo, vl), i8x16.swizzle(hi, vh)));
      b0 = v128.xor(b0, v128.xor(i8x16.swizzle(lo, wl), i8x16.swizzle(hi, wh)));
      lo = v128.load(t1 + k);
      hi = v128.load(t1 + k, 16);
      a1 = v128.xor(a1, v128.xor(i8x16.swizzle(lo, vl), i8x16.swizzle(hi, vh)));
      b1 = v128.xor(b1, v128.xor(i8x16.swizzle(lo, wl), i8x16.swizzle(hi, wh)));
      lo = v128.load(t2 + k);
      hi = v128.load(t2 + k, 16);
      a2 = v128.xor(a2, v128.xor(i8x16.swizzle(lo, vl), i8x16.swizzle(hi, vh)));
      b2 = v128.xor(b2, v128.xor(i8x16.swizzle(lo, wl), i8x16.swizzle(hi, wh)));
      lo = v128.load(t3 + k);
      hi = v128.load(t3 + k, 16);
      a3 = v128.xor(a3, v128.xor(i8x16.swizzle(lo, vl), i8x16.swizzle(hi, vh)));
      b3 = v128.xor(b3, v128.xor(i8x16.swizzle(lo, wl), i8x16.swizzle(hi, wh)));
    }
    v128.store(d0 + off, a0);
    v128.store(d0 + off, b0, 16);
    v128.store(d1 + off, a1);
    v128.store(d1 + off, b1, 16);
    v128.store(d2 + off, a2);
    v128.store(d2 + off, b2, 16);
    v128.store(d3 + off, a3);
    v128.store(d3 + off, b3, 16);
  }
  return off;
}

function rows2(r: u32, nIn: u32, len: usize): usize {
  const stride = (<usize>nIn) << 5;
  const t0 = expanded + <usize>r * stride;
  const t1 = t0 + stride;
  const d0 = <usize>load<u32>(outPtrs + ((<usize>r) << 2));
  const d1 = <usize>load<u32>(outPtrs + ((<usize>r) << 2) + 4);
  const mask = i8x16.splat(0x0f);
  let off: usize = 0;
  for (; off + 32 <= len; off += 32) {
    let a0 = i8x16.splat(0);
    let b0 = a0;
    let a1 = a0;
    let b1 = a0;
    for (let j: usize = 0; j < <usize>nIn; j++) {
      const src = <usize>load<u32>(inPtrs + (j << 2)) + off;
      const v = v128.load(src);
      const w = v128.load(src, 16);
      const vl = v128.and(v, mask);
      const vh = i8x16.shr_u(v, 4);
      const wl = v128.and(w, mask);
      const wh = i8x16.shr_u(w, 4);
      const k = j << 5;
      let lo = v128.load(t0 + k);
      let hi = v128.load(t0 + k, 16);
      a0 = v128.xor(a0, v128.xor(i8x16.swizzle(lo, vl), i8x16.swizzle(hi, vh)));
      b0 = v128.xor(b0, v128.xor(i8x16.swizzle(lo, wl), i8x16.swizzle(hi, wh)));
      lo = v128.load(t1 + k);
      hi = v128.load(t1 + k, 16);
      a1 = v128.xor(a1, v128.xor(i8x16.swizzle(lo, vl), i8x16.swizzle(hi, vh)));
      b1 = v128.xor(b1, v128.xor(i8x16.swizzle(lo, wl), i8x16.swizzle(hi, wh)));
    }
    v128.store(d0 + off, a0);
    v128.store(d0 + off, b0, 16);
    v128.store(d1 + off, a1);
    v128.store(d1 + off, b1, 16);
  }
  return off;
}

function rows1(r: u32, nIn: u32, len: usize): usize {
  const t0 = expanded + <usize>r * ((<usize>nIn) << 5);
  const d0 = <usize>load<u32>(outPtrs + ((<usize>r) << 2));
  const mask = i8x16.splat(0x0f);
  let off: usize = 0;
  for (; off + 32 <= len; off += 32) {
    let a0 = i8x16.splat(0);
    let b0 = a0;
    for (let j: usize = 0; j < <usize>nIn; j++) {
      const src = <usize>load<u32>(inPtrs + (j << 2)) + off;
      const v = v128.load(src);
      const w = v128.load(src, 16);
      const k = j << 5;
      const lo = v128.load(t0 + k);
      const hi = v128.load(t0 + k, 16);
      a0 = v128.xor(a0, v128.xor(i8x16.swizzle(lo, v128.and(v, mask)), i8x16.swizzle(hi, i8x16.shr_u(v, 4))));
      b0 = v128.xor(b0, v128.xor(i8x16.swizzle(lo, v128.and(w, mask)), i8x16.swizzle(hi, i8x16.shr_u(w, 4))));
    }
    v128.store(d0 + off, a0);
    v128.store(d0 + off, b0, 16);
  }
  return off;
}

/**
 * out[r] = Σ_j coefficients[r·nIn + j] · in[j] over len bytes, for r < nOut, where in[j] and
 * out[r] are the addresses in the input and output pointer tables (segment buffers, or the
 * shards of an in-memory stripe). Call prepare(nOut, nIn) after writing the coefficients.
 */
export function matMul(nOut: u32, nIn: u32, len: u32): void {
  let r: u32 = 0;
  while (r < nOut) {
    let done: usize;
    let count: u32;
    if (nOut - r >= 4) {
      done = rows4(r, nIn, len);
      count = 4;
    } else if (nOut - r >= 2) {
      done = rows2(r, nIn, len);
      count = 2;
    } else {
      done = rows1(r, nIn, len);
      count = 1;
    }
    for (let q: u32 = 0; q < count; q++) tail(r + q, nIn, done, len);
    r += count;
  }
}

/** Expands the coefficient matrix into per-entry nibble tables. */
export function prepare(nOut: u32, nIn: u32): void {
  for (let i: usize = 0; i < <usize>nOut * nIn; i++) {
    const c = <usize>load<u8>(coefficients + i);
    memory.copy(expanded + (i << 5), nibbles + (c << 5), 32);
  }
}
