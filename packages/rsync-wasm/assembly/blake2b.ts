// BLAKE2b (RFC 7693), unkeyed, incremental. State lives in linear memory so that one
// module instance can hold several hashers (block hasher, whole-file hasher).
//
// State layout (B2_STATE_SIZE bytes): h[8] u64 @0, t u64 @64, buflen u32 @72, outlen u32 @76,
// buf[128] @80.

export const B2_STATE_SIZE: usize = 208;

const IV: usize = memory.data<u64>([
  0x6a09e667f3bcc908, 0xbb67ae8584caa73b, 0x3c6ef372fe94f82b, 0xa54ff53a5f1d36f1, 0x510e527fade682d1,
  0x9b05688c2b3e6c1f, 0x1f83d9abfb41bd6b, 0x5be0cd19137e2179,
]);

// Message schedule, pre-multiplied by 8 (byte offsets of the u64 words).
const SIGMA: usize = memory.data<u8>([
  0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 112, 80, 32, 64, 72, 120, 104, 48, 8, 96,
  0, 16, 88, 56, 40, 24, 88, 64, 96, 0, 40, 16, 120, 104, 80, 112, 24, 48, 56, 8, 72, 32, 56, 72, 24, 8, 104,
  96, 88, 112, 16, 48, 40, 80, 32, 0, 120, 64, 72, 0, 40, 56, 16, 32, 80, 120, 112, 8, 88, 96, 48, 64, 24,
  104, 16, 96, 48, 80, 0, 88, 64, 24, 32, 104, 56, 40, 120, 112, 8, 72, 96, 40, 8, 120, 112, 104, 32, 80, 0,
  56, 48, 24, 72, 16, 64, 88, 104, 88, 56, 112, 96, 8, 24, 72, 40, 0, 120, 32, 64, 48, 16, 80, 48, 120, 112,
  72, 88, 24, 0, 64, 96, 16, 104, 56, 8, 32, 80, 40, 80, 16, 64, 32, 56, 48, 8, 40, 120, 88, 72, 112, 24, 96,
  104, 0, 0, 8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96, 104, 112, 120, 112, 80, 32, 64, 72, 120, 104, 48,
  8, 96, 0, 16, 88, 56, 40, 24,
]);

function compress(s: usize, block: usize, last: bool): void {
  let v0 = load<u64>(s, 0);
  let v1 = load<u64>(s, 8);
  let v2 = load<u64>(s, 16);
  let v3 = load<u64>(s, 24);
  let v4 = load<u64>(s, 32);
  let v5 = load<u64>(s, 40);
  let v6 = load<u64>(s, 48);
  let v7 = load<u64>(s, 56);
  let v8 = load<u64>(IV, 0);
  let v9 = load<u64>(IV, 8);
  let v10 = load<u64>(IV, 16);
  let v11 = load<u64>(IV, 24);
  let v12 = load<u64>(IV, 32) ^ load<u64>(s, 64);
  let v13 = load<u64>(IV, 40);
  let v14 = load<u64>(IV, 48);
  let v15 = load<u64>(IV, 56);
  if (last) v14 = ~v14;
  for (let r: usize = 0; r < 12; r++) {
    const sg = SIGMA + (r << 4);
    const m0 = load<u64>(block + <usize>load<u8>(sg, 0));
    const m1 = load<u64>(block + <usize>load<u8>(sg, 1));
    const m2 = load<u64>(block + <usize>load<u8>(sg, 2));
    const m3 = load<u64>(block + <usize>load<u8>(sg, 3));
    const m4 = load<u64>(block + <usize>load<u8>(sg, 4));
    const m5 = load<u64>(block + <usize>load<u8>(sg, 5));
    const m6 = load<u64>(block + <usize>load<u8>(sg, 6));
    const m7 = load<u64>(block + <usize>load<u8>(sg, 7));
    const m8 = load<u64>(block + <usize>load<u8>(sg, 8));
    const m9 = load<u64>(block + <usize>load<u8>(sg, 9));
    const m10 = load<u64>(block + <usize>load<u8>(sg, 10));
    const m11 = load<u64>(block + <usize>load<u8>(sg, 11));
    const m12 = load<u64>(block + <usize>load<u8>(sg, 12));
    const m13 = load<u64>(block + <usize>load<u8>(sg, 13));
    const m14 = load<u64>(block + <usize>load<u8>(sg, 14));
    const m15 = load<u64>(block + <usize>load<u8>(sg, 15));
    v0 = v0 + v4 + m0;
    v12 = rotr<u64>(v12 ^ v0, 32);
    v8 = v8 + v12;
    v4 = rotr<u64>(v4 ^ v8, 24);
    v0 = v0 + v4 + m1;
    v12 = rotr<u64>(v12 ^ v0, 16);
    v8 = v8 + v12;
    v4 = rotr<u64>(v4 ^ v8, 63);
    v1 = v1 + v5 + m2;
    v13 = rotr<u64>(v13 ^ v1, 32);
    v9 = v9 + v13;
    v5 = rotr<u64>(v5 ^ v9, 24);
    v1 = v1 + v5 + m3;
    v13 = rotr<u64>(v13 ^ v1, 16);
    v9 = v9 + v13;
    v5 = rotr<u64>(v5 ^ v9, 63);
    v2 = v2 + v6 + m4;
    v14 = rotr<u64>(v14 ^ v2, 32);
    v10 = v10 + v14;
    v6 = rotr<u64>(v6 ^ v10, 24);
    v2 = v2 + v6 + m5;
    v14 = rotr<u64>(v14 ^ v2, 16);
    v10 = v10 + v14;
    v6 = rotr<u64>(v6 ^ v10, 63);
    v3 = v3 + v7 + m6;
    v15 = rotr<u64>(v15 ^ v3, 32);
    v11 = v11 + v15;
    v7 = rotr<u64>(v7 ^ v11, 24);
    v3 = v3 + v7 + m7;
    v15 = rotr<u64>(v15 ^ v3, 16);
    v11 = v11 + v15;
    v7 = rotr<u64>(v7 ^ v11, 63);
    v0 = v0 + v5 + m8;
    v15 = rotr<u64>(v15 ^ v0, 32);
    v10 = v10 + v15;
    v5 = rotr<u64>(v5 ^ v10, 24);
    v0 = v0 + v5 + m9;
    v15 = rotr<u64>(v15 ^ v0, 16);
    v10 = v10 + v15;
    v5 = rotr<u64>(v5 ^ v10, 63);
    v1 = v1 + v6 + m10;
    v12 = rotr<u64>(v12 ^ v1, 32);
    v11 = v11 + v12;
    v6 = rotr<u64>(v6 ^ v11, 24);
    v1 = v1 + v6 + m11;
    v12 = rotr<u64>(v12 ^ v1, 16);
    v11 = v11 + v12;
    v6 = rotr<u64>(v6 ^ v11, 63);
    v2 = v2 + v7 + m12;
    v13 = rotr<u64>(v13 ^ v2, 32);
    v8 = v8 + v13;
    v7 = rotr<u64>(v7 ^ v8, 24);
    v2 = v2 + v7 + m13;
    v13 = rotr<u64>(v13 ^ v2, 16);
    v8 = v8 + v13;
    v7 = rotr<u64>(v7 ^ v8, 63);
    v3 = v3 + v4 + m14;
    v14 = rotr<u64>(v14 ^ v3, 32);
    v9 = v9 + v14;
    v4 = rotr<u64>(v4 ^ v9, 24);
    v3 = v3 + v4 + m15;
    v14 = rotr<u64>(v14 ^ v3, 16);
    v9 = v9 + v14;
    v4 = rotr<u64>(v4 ^ v9, 63);
  }
  store<u64>(s, load<u64>(s, 0) ^ v0 ^ v8, 0);
  store<u64>(s, load<u64>(s, 8) ^ v1 ^ v9, 8);
  store<u64>(s, load<u64>(s, 16) ^ v2 ^ v10, 16);
  store<u64>(s, load<u64>(s, 24) ^ v3 ^ v11, 24);
  store<u64>(s, load<u64>(s, 32) ^ v4 ^ v12, 32);
  store<u64>(s, load<u64>(s, 40) ^ v5 ^ v13, 40);
  store<u64>(s, load<u64>(s, 48) ^ v6 ^ v14, 48);
  store<u64>(s, load<u64>(s, 56) ^ v7 ^ v15, 56);
}

export function b2Init(s: usize, outlen: u32): void {
  for (let i: usize = 0; i < 8; i++) store<u64>(s + (i << 3), load<u64>(IV + (i << 3)));
  store<u64>(s, load<u64>(s) ^ (0x01010000 ^ (<u64>outlen)));
  store<u64>(s, 0, 64);
  store<u32>(s, 0, 72);
  store<u32>(s, outlen, 76);
}

export function b2Update(s: usize, p: usize, n: usize): void {
  if (n == 0) return;
  let buflen = <usize>load<u32>(s, 72);
  const buf = s + 80;
  const fill: usize = <usize>128 - buflen;
  if (n > fill) {
    memory.copy(buf + buflen, p, fill);
    store<u64>(s, load<u64>(s, 64) + 128, 64);
    compress(s, buf, false);
    buflen = 0;
    p += fill;
    n -= fill;
    // Keep the final block buffered: BLAKE2b marks the last block specially.
    while (n > 128) {
      store<u64>(s, load<u64>(s, 64) + 128, 64);
      compress(s, p, false);
      p += 128;
      n -= 128;
    }
  }
  memory.copy(buf + buflen, p, n);
  store<u32>(s, <u32>(buflen + n), 72);
}

export function b2Final(s: usize, out: usize): void {
  const buflen = <usize>load<u32>(s, 72);
  const buf = s + 80;
  store<u64>(s, load<u64>(s, 64) + <u64>buflen, 64);
  memory.fill(buf + buflen, 0, <usize>128 - buflen);
  compress(s, buf, true);
  memory.copy(out, s, <usize>load<u32>(s, 76));
}
