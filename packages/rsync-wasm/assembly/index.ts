// Why this file is over 600 lines: it is the wasm module's entry, its exports are the whole
// ABI that src/ binds by name, and the three engines (hasher, signature, delta) share the
// module-level state one instance holds: the input window, the output buffer, the BLAKE2b
// states and the block parameters. Split into files, that state would have to become exported
// mutable globals read across modules; the engines are kept as marked sections below instead.
//
// rsync engine: signature, delta scan and hashing. One module instance runs one engine
// (a signature writer, a delta scanner or a hasher); the TypeScript side drives it in
// chunks, so memory stays bounded by the signature plus a fixed window.
//
// Formats are specified in docs/formats/delta.md; this file produces the signature
// records and the delta instruction stream (without header and END, which the
// TypeScript side writes).

import { B2_STATE_SIZE, b2Init, b2Update, b2Final } from './blake2b';

const CHAR_OFFSET: u32 = 31;
/** Longest literal run kept before it is flushed. */
const MAX_LITERAL: u32 = 1 << 16;
/** Input accepted per append. */
const INPUT_CAP: u32 = 1 << 18;
/** A scan stops when this much output is waiting, so the caller can drain it. */
const OUT_SOFT: u32 = 1 << 16;
/** Bound on hash-chain steps per probe: adversarial weak collisions cannot make a scan quadratic. */
const MAX_CHAIN: u32 = 256;

const OP_LITERAL: u8 = 0x01;
const OP_COPY: u8 = 0x02;

let blockSize: u32 = 0;
let strongLen: u32 = 0;
let recordSize: u32 = 0;

let hasher: usize = 0; // BLAKE2b state for block hashes
let digest: usize = 0; // 32-byte scratch digest
let s1: u32 = 0;
let s2: u32 = 0;

// ---------------------------------------------------------------- shared helpers

function alloc(n: usize): usize {
  const p = heap.alloc(n);
  memory.fill(p, 0, n);
  return p;
}

// Weights 0..15 of the bytes within a 16-byte chunk, as two i16x8 halves.
const W_LO: v128 = i16x8(0, 1, 2, 3, 4, 5, 6, 7);
const W_HI: v128 = i16x8(8, 9, 10, 11, 12, 13, 14, 15);

/**
 * Sets s1, s2 to the rolling checksum of [p, p + n). With X = Σ x_i and Y = Σ (n − i)·x_i:
 * s1 = X + 31n and s2 = Y + 31·n(n+1)/2. SIMD computes, per 16-byte chunk c, S_c = Σ x and
 * W_c = Σ t·x (t = 0..15), and P = Σ_c Σ_{c' < c} S_c'; then, with C chunks,
 * Y = n·X − 16·((C − 1)·X − P) − Σ W_c. Everything is exact mod 2^32.
 */
function sumBlock(p: usize, n: u32): void {
  const chunks = n >> 4;
  let vs = i32x4.splat(0);
  let vw = i32x4.splat(0);
  let vp = i32x4.splat(0);
  for (let c: u32 = 0; c < chunks; c++) {
    const v = v128.load(p + ((<usize>c) << 4));
    vp = i32x4.add(vp, vs);
    vs = i32x4.add(vs, i32x4.extadd_pairwise_i16x8_u(i16x8.extadd_pairwise_i8x16_u(v)));
    const lo = i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_u(v), W_LO);
    const hi = i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_u(v), W_HI);
    vw = i32x4.add(vw, i32x4.add(lo, hi));
  }
  let x: u32 =
    i32x4.extract_lane(vs, 0) +
    i32x4.extract_lane(vs, 1) +
    i32x4.extract_lane(vs, 2) +
    i32x4.extract_lane(vs, 3);
  const w: u32 =
    i32x4.extract_lane(vw, 0) +
    i32x4.extract_lane(vw, 1) +
    i32x4.extract_lane(vw, 2) +
    i32x4.extract_lane(vw, 3);
  const pp: u32 =
    i32x4.extract_lane(vp, 0) +
    i32x4.extract_lane(vp, 1) +
    i32x4.extract_lane(vp, 2) +
    i32x4.extract_lane(vp, 3);
  let y: u32 = chunks > 0 ? n * x - 16 * ((chunks - 1) * x - pp) - w : 0;
  for (let i: u32 = chunks << 4; i < n; i++) {
    const b = <u32>load<u8>(p + i);
    x += b;
    y += (n - i) * b;
  }
  s1 = x + CHAR_OFFSET * n;
  s2 = y + CHAR_OFFSET * <u32>((<u64>n * (<u64>n + 1)) >> 1);
}

function weakOf(a: u32, b: u32): u32 {
  return (b << 16) | (a & 0xffff);
}

function strongOf(p: usize, n: u32): void {
  b2Init(hasher, 32);
  b2Update(hasher, p, n);
  b2Final(hasher, digest);
}

// ---------------------------------------------------------------- hasher engine

let hashInput: usize = 0;

export function hashInit(): void {
  hasher = alloc(B2_STATE_SIZE);
  digest = alloc(64);
  hashInput = alloc(INPUT_CAP);
  b2Init(hasher, 32);
}
export function hashInputPtr(): usize {
  return hashInput;
}
export function hashInputCap(): u32 {
  return INPUT_CAP;
}
export function hashUpdate(n: u32): void {
  b2Update(hasher, hashInput, n);
}
/** Finishes the hash; the 32-byte digest is at the returned pointer. */
export function hashFinal(): usize {
  b2Final(hasher, digest);
  return digest;
}

// ---------------------------------------------------------------- signature engine

let sigIn: usize = 0;
let sigCarry: usize = 0;
let sigCarryLen: u32 = 0;
let sigOut: usize = 0;

export function sigInit(bs: u32, sl: u32): void {
  blockSize = bs;
  strongLen = sl;
  recordSize = 4 + sl;
  hasher = alloc(B2_STATE_SIZE);
  digest = alloc(64);
  sigIn = alloc(INPUT_CAP);
  sigCarry = alloc(bs);
  sigOut = alloc(<usize>(INPUT_CAP / bs + 2) * recordSize);
}
export function sigInputPtr(): usize {
  return sigIn;
}
export function sigInputCap(): u32 {
  return INPUT_CAP;
}
export function sigOutputPtr(): usize {
  return sigOut;
}

function sigRecord(p: usize, n: u32, o: u32): u32 {
  sumBlock(p, n);
  store<u32>(sigOut + o, weakOf(s1, s2));
  strongOf(p, n);
  memory.copy(sigOut + o + 4, digest, strongLen);
  return o + recordSize;
}

/** Consumes n bytes at sigInputPtr(); returns the number of record bytes at sigOutputPtr(). */
export function sigUpdate(n: u32): u32 {
  let o: u32 = 0;
  let p = sigIn;
  let left = n;
  if (sigCarryLen > 0) {
    const take = min(blockSize - sigCarryLen, left);
    memory.copy(sigCarry + sigCarryLen, p, take);
    sigCarryLen += take;
    p += take;
    left -= take;
    if (sigCarryLen == blockSize) {
      o = sigRecord(sigCarry, blockSize, o);
      sigCarryLen = 0;
    }
  }
  while (left >= blockSize) {
    o = sigRecord(p, blockSize, o);
    p += blockSize;
    left -= blockSize;
  }
  if (left > 0) {
    memory.copy(sigCarry, p, left);
    sigCarryLen = left;
  }
  return o;
}

/** Emits the record of the final short block, if any. */
export function sigFinish(): u32 {
  let o: u32 = 0;
  if (sigCarryLen > 0) {
    o = sigRecord(sigCarry, sigCarryLen, 0);
    sigCarryLen = 0;
  }
  return o;
}

// ---------------------------------------------------------------- delta engine

let nBlocks: u32 = 0;
let lastLen: u32 = 0;
let records: usize = 0;
let heads: usize = 0;
let nexts: usize = 0;
let hashShift: u32 = 0;
// One bit per slot of a table ~32× larger than the block count: most non-matching
// positions are rejected with one L1/L2 load instead of a probe of the hash chains.
let filter: usize = 0;
let filterShift: u32 = 0;

let buf: usize = 0;
let bufCap: u32 = 0;
let litStart: u32 = 0;
let pos: u32 = 0;
let end: u32 = 0;
let hasSum: bool = false;

let out: usize = 0;
let outLen: u32 = 0;
let outPending: bool = false;

let copyOff: u64 = 0;
let copyLen: u64 = 0;
let cursor: u64 = 0;
let nextExpected: u32 = 0xffffffff;

// Whole-file checksum (docs/formats/delta.md, "Checksum"): BLAKE2b-256 over one 36-byte
// record (u32 LE length, BLAKE2b-256 digest) per leaf, where the leaves are the copied
// blocks and the literal instructions in output order. A copied block's leaf digest is the
// full strong hash already computed to confirm the match, so no byte is hashed twice.
let wholeHash: bool = false;
let rootHasher: usize = 0;
let leafHasher: usize = 0;
let leafDigest: usize = 0;
let leafRecord: usize = 0;

function addLeaf(len: u32, d: usize): void {
  store<u32>(leafRecord, len);
  memory.copy(leafRecord + 4, d, 32);
  b2Update(rootHasher, leafRecord, 36);
}

function treeInit(): void {
  rootHasher = alloc(B2_STATE_SIZE);
  leafHasher = alloc(B2_STATE_SIZE);
  leafDigest = alloc(64);
  leafRecord = alloc(64);
  b2Init(rootHasher, 32);
  b2Init(leafHasher, 32);
}

function bucketOf(weak: u32): usize {
  return (<usize>((weak * 0x9e3779b1) >> hashShift)) << 2;
}

function bitOf(f: u32): u8 {
  const bit: u32 = (<u32>1) << (f & 7);
  return <u8>bit;
}

function recordPtr(i: u32): usize {
  return records + <usize>i * recordSize;
}

function strongEquals(i: u32): bool {
  const r = recordPtr(i) + 4;
  for (let k: u32 = 0; k < strongLen; k++) {
    if (load<u8>(r + k) != load<u8>(digest + k)) return false;
  }
  return true;
}

/**
 * Prepares a delta scan against a signature with nb records (the last one lastLen bytes
 * long). The caller then writes the records to deltaRecordsPtr() and calls deltaBuild().
 */
export function deltaInit(bs: u32, sl: u32, nb: u32, last: u32, hashWhole: bool): void {
  blockSize = bs;
  strongLen = sl;
  recordSize = 4 + sl;
  nBlocks = nb;
  lastLen = last;
  hasher = alloc(B2_STATE_SIZE);
  digest = alloc(64);
  records = alloc(<usize>nb * recordSize + 8);
  let bits: u32 = 4;
  while (bits < 30 && (<u32>1) << bits < nb * 2) bits++;
  hashShift = 32 - bits;
  heads = alloc((<usize>4) << bits);
  let fbits: u32 = 10;
  while (fbits < 30 && (<u32>1) << fbits < nb * 32) fbits++;
  filterShift = 32 - fbits;
  filter = alloc((<usize>1) << (fbits - 3));
  nexts = alloc(<usize>nb * 4 + 4);
  bufCap = MAX_LITERAL + bs + INPUT_CAP;
  buf = alloc(bufCap);
  out = alloc(OUT_SOFT + 2 * MAX_LITERAL + 2 * bs + 256);
  wholeHash = hashWhole;
  if (hashWhole) treeInit();
}

export function deltaRecordsPtr(): usize {
  return records;
}

/** Indexes the records by weak checksum; identical blocks are indexed once. */
export function deltaBuild(): void {
  for (let i: u32 = 0; i < nBlocks; i++) {
    const ri = recordPtr(i);
    const w = load<u32>(ri);
    const h = heads + bucketOf(w);
    let e = load<u32>(h);
    let steps: u32 = 0;
    let duplicate = false;
    const len = i == nBlocks - 1 ? lastLen : blockSize;
    while (e != 0 && steps < MAX_CHAIN) {
      const j = e - 1;
      const rj = recordPtr(j);
      const lenJ = j == nBlocks - 1 ? lastLen : blockSize;
      if (load<u32>(rj) == w && lenJ == len && memory.compare(rj + 4, ri + 4, strongLen) == 0) {
        duplicate = true;
        break;
      }
      e = load<u32>(nexts + ((<usize>j) << 2));
      steps++;
    }
    if (duplicate) continue;
    store<u32>(nexts + ((<usize>i) << 2), load<u32>(h));
    store<u32>(h, i + 1);
    const f = (w * 0x9e3779b1) >> filterShift;
    const q = filter + (f >> 3);
    store<u8>(q, load<u8>(q) | bitOf(f));
  }
}

export function deltaInputPtr(): usize {
  return buf + end;
}
export function deltaInputSpace(): u32 {
  return bufCap - end;
}
/** Moves the unconsumed window to the start of the buffer. */
export function deltaCompact(): void {
  if (litStart == 0) return;
  memory.copy(buf, buf + litStart, end - litStart);
  pos -= litStart;
  end -= litStart;
  litStart = 0;
}
/** Accepts n bytes written at deltaInputPtr(). */
export function deltaAppend(n: u32): void {
  end += n;
  scanned += n;
}
export function deltaOutputPtr(): usize {
  return out;
}
/** 1 when the last deltaRun() stopped to let the caller drain output. */
export function deltaPending(): bool {
  return outPending;
}
export function deltaFinalHash(): usize {
  b2Final(rootHasher, digest);
  return digest;
}

function putVarint(v: u64): void {
  while (v >= 0x80) {
    store<u8>(out + outLen, <u8>(v | 0x80));
    outLen++;
    v >>= 7;
  }
  store<u8>(out + outLen, <u8>v);
  outLen++;
}

function flushCopy(): void {
  if (copyLen == 0) return;
  const diff = <i64>(copyOff - cursor);
  store<u8>(out + outLen, OP_COPY);
  outLen++;
  putVarint(<u64>((diff << 1) ^ (diff >> 63)));
  putVarint(copyLen);
  cursor = copyOff + copyLen;
  copyLen = 0;
}

function emitLiteral(from: u32, to: u32): void {
  if (to <= from) return;
  flushCopy();
  const n = to - from;
  store<u8>(out + outLen, OP_LITERAL);
  outLen++;
  putVarint(n);
  memory.copy(out + outLen, buf + from, n);
  outLen += n;
  if (wholeHash) {
    b2Init(leafHasher, 32);
    b2Update(leafHasher, buf + from, n);
    b2Final(leafHasher, leafDigest);
    addLeaf(n, leafDigest);
  }
}

function addCopy(off: u64, len: u64): void {
  if (copyLen > 0 && copyOff + copyLen == off) {
    copyLen += len;
    return;
  }
  flushCopy();
  copyOff = off;
  copyLen = len;
}

// Bytes hashed for strong checks that found no match. Real data rarely wastes any, but a
// crafted signature can make every position a weak hit; past this budget such candidates
// are skipped, so a scan costs at most ~8 hashes per input byte (a delta, never a hang).
let scanned: u64 = 0;
let wasted: u64 = 0;

function overBudget(): bool {
  return wasted > (scanned << 3) + (16 << 20);
}

/** Finds a block whose checksums match the window [p, p + blockSize); -1 when none. */
function findBlock(p: usize, weak: u32): i64 {
  let strongDone = false;
  // Prefer the block after the previous match: keeps copies contiguous.
  const ne = nextExpected;
  if (ne < nBlocks && (ne != nBlocks - 1 || lastLen == blockSize) && load<u32>(recordPtr(ne)) == weak) {
    if (overBudget()) return -1;
    strongOf(p, blockSize);
    strongDone = true;
    if (strongEquals(ne)) return <i64>ne;
  }
  let e = load<u32>(heads + bucketOf(weak));
  let steps: u32 = 0;
  while (e != 0 && steps < MAX_CHAIN) {
    const i = e - 1;
    if (load<u32>(recordPtr(i)) == weak && (i != nBlocks - 1 || lastLen == blockSize)) {
      if (!strongDone) {
        if (overBudget()) return -1;
        strongOf(p, blockSize);
        strongDone = true;
      }
      if (strongEquals(i)) return <i64>i;
    }
    e = load<u32>(nexts + ((<usize>i) << 2));
    steps++;
  }
  if (strongDone) wasted += blockSize;
  return -1;
}

/**
 * Scans the buffered input. Returns the number of instruction bytes at deltaOutputPtr();
 * the caller drains them and calls again while deltaPending() is true. With last = true the
 * remaining tail is emitted (the caller then writes END).
 */
export function deltaRun(last: bool): u32 {
  outLen = 0;
  outPending = false;
  const bs = blockSize;
  const mult: u32 = bs * CHAR_OFFSET;
  let a = s1;
  let b = s2;
  if (nBlocks > 0) {
    // Hot loop: state lives in locals (wasm globals are memory accesses in V8).
    const base = buf;
    const e = end;
    const flt = filter;
    const fsh = filterShift;
    let p = pos;
    let ls = litStart;
    let hs = hasSum;
    while (true) {
      let candidate = false;
      if (!hs) {
        if (p + bs > e) break;
        // Right after a match the next old block usually follows. With a strong hash of at
        // least 64 bits, comparing it alone is safe and skips the weak sum of the window.
        const ne = nextExpected;
        if (strongLen >= 8 && ne < nBlocks && (ne != nBlocks - 1 || lastLen == bs) && !overBudget()) {
          strongOf(base + p, bs);
          if (strongEquals(ne)) {
            emitLiteral(ls, p);
            addCopy(<u64>ne * bs, bs);
            if (wholeHash) addLeaf(bs, digest);
            nextExpected = ne + 1;
            p += bs;
            ls = p;
            if (outLen >= OUT_SOFT) {
              outPending = true;
              break;
            }
            continue;
          }
          wasted += bs;
        }
        sumBlock(base + p, bs);
        a = s1;
        b = s2;
        hs = true;
        const f0 = (((b << 16) | (a & 0xffff)) * 0x9e3779b1) >> fsh;
        candidate = (load<u8>(flt + (f0 >> 3)) & ((<u32>1) << (f0 & 7))) != 0;
      } else {
        if (p + bs >= e) break;
        // Roll until the filter says a block may match, the literal is full, or input ends.
        let lim = e - bs;
        if (ls + MAX_LITERAL < lim) lim = ls + MAX_LITERAL;
        do {
          const x = <u32>load<u8>(base + p);
          const y = <u32>load<u8>(base + p + bs);
          a += y - x;
          b += a - bs * x - mult;
          p++;
          const f = (((b << 16) | (a & 0xffff)) * 0x9e3779b1) >> fsh;
          if ((load<u8>(flt + (f >> 3)) & ((<u32>1) << (f & 7))) != 0) {
            candidate = true;
            break;
          }
        } while (p < lim);
      }
      if (candidate) {
        const found = findBlock(base + p, weakOf(a, b));
        if (found >= 0) {
          const idx = <u32>found;
          emitLiteral(ls, p);
          addCopy(<u64>idx * bs, bs);
          if (wholeHash) addLeaf(bs, digest);
          nextExpected = idx + 1;
          p += bs;
          ls = p;
          hs = false;
          if (outLen >= OUT_SOFT) {
            outPending = true;
            break;
          }
          continue;
        }
      }
      // The window at p did not match; bytes before it are settled literals.
      if (p - ls >= MAX_LITERAL) {
        emitLiteral(ls, p);
        ls = p;
        if (outLen >= OUT_SOFT) {
          outPending = true;
          break;
        }
      }
    }
    pos = p;
    litStart = ls;
    hasSum = hs;
  } else {
    // Empty signature: everything is literal.
    while (end - litStart >= MAX_LITERAL) {
      if (outLen >= OUT_SOFT) {
        outPending = true;
        break;
      }
      emitLiteral(litStart, litStart + MAX_LITERAL);
      litStart += MAX_LITERAL;
    }
    pos = litStart;
  }
  s1 = a;
  s2 = b;
  if (last && !outPending) {
    // The old file's short last block can only match at the very end of the new data.
    if (nBlocks > 0 && lastLen < bs && lastLen > 0 && end - litStart >= lastLen) {
      const tail = end - lastLen;
      const li = nBlocks - 1;
      sumBlock(buf + tail, lastLen);
      if (load<u32>(recordPtr(li)) == weakOf(s1, s2)) {
        strongOf(buf + tail, lastLen);
        if (strongEquals(li)) {
          emitLiteral(litStart, tail);
          addCopy(<u64>li * bs, lastLen);
          if (wholeHash) addLeaf(lastLen, digest);
          litStart = end;
        }
      }
    }
    emitLiteral(litStart, end);
    litStart = end;
    pos = end;
    flushCopy();
  }
  return outLen;
}

// ---------------------------------------------------------------- checksum verifier (patch)

let vInput: usize = 0;
let leafLen: u32 = 0;

export function verifyInit(bs: u32): void {
  blockSize = bs;
  treeInit();
  digest = alloc(64);
  vInput = alloc(INPUT_CAP);
  leafLen = 0;
}
export function verifyInputPtr(): usize {
  return vInput;
}
export function verifyInputCap(): u32 {
  return INPUT_CAP;
}
/** Closes the open leaf, if any. Called at the end of each instruction. */
export function verifyEndLeaf(): void {
  if (leafLen == 0) return;
  b2Final(leafHasher, leafDigest);
  addLeaf(leafLen, leafDigest);
  b2Init(leafHasher, 32);
  leafLen = 0;
}
/** Literal bytes: one leaf per instruction, however long. */
export function verifyLiteral(n: u32): void {
  b2Update(leafHasher, vInput, n);
  leafLen += n;
}
/** Copied bytes: leaves of blockSize bytes counted from the start of the instruction. */
export function verifyCopy(n: u32): void {
  let p = vInput;
  while (n > 0) {
    const take = min(n, blockSize - leafLen);
    b2Update(leafHasher, p, take);
    leafLen += take;
    p += take;
    n -= take;
    if (leafLen == blockSize) verifyEndLeaf();
  }
}
export function verifyFinal(): usize {
  b2Final(rootHasher, digest);
  return digest;
}
