import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { collect, parseSignature, signature } from '@weft/rsync-wasm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CANDIDATE_BLOCK_SIZES,
  COMPRESSION_SAMPLE_BYTES,
  CompressionAdvisor,
  RateEstimator,
  chooseBlockSize,
  chooseCompression,
  deltaPays,
  initialBlockSize,
  initialHistory,
  planDelta,
  updateHistory,
} from '../src/adaptive.ts';
import { calibrateDeltaRate, estimateDelta } from '../src/delta-estimate.ts';

describe('adaptive block size (HyCloud Eq. 1)', () => {
  it('moves towards the block size with the best elimination ratio, with decaying memory', () => {
    let h = initialHistory();
    const ratios = CANDIDATE_BLOCK_SIZES.map((s) => (s === 4096 ? 0.9 : 0.1));
    h = updateHistory(h, ratios);
    expect(chooseBlockSize(h, 100e6)).toBe(4096);
    expect(h.probs.reduce((a, b) => a + b, 0)).toBeCloseTo(1);
    // Later evidence for 16 KiB takes over only gradually (λ = n/(n+1)).
    const other = CANDIDATE_BLOCK_SIZES.map((s) => (s === 16384 ? 0.95 : 0.05));
    h = updateHistory(h, other);
    expect(h.n).toBe(2);
    for (let i = 0; i < 5; i++) h = updateHistory(h, other);
    expect(chooseBlockSize(h, 1e3)).toBe(16384);
  });

  it('without history starts from the file size (≈ √size), not from the smallest candidate', () => {
    const h = initialHistory();
    expect(chooseBlockSize(h, 61_000_000)).toBe(8192); // √ = 7,810
    expect(chooseBlockSize(h, 22_500_000)).toBe(4096); // √ = 4,743
    expect(chooseBlockSize(h, 2 * 1024 * 1024)).toBe(1024); // √ = 1,448: halfway, the smaller
    expect(initialBlockSize(0)).toBe(512);
    expect(initialBlockSize(100_000)).toBe(512);
    expect(initialBlockSize(1e12)).toBe(65536);
    // The signature of a 61 MB file: 12 bytes a block (4 weak + 8 strong) → ≈ 89 KB, not
    // the 1.43 MB the 512-byte first choice made.
    expect((61_000_000 / initialBlockSize(61_000_000)) * 12).toBeLessThan(100_000);
    // Candidates given by the caller are honoured.
    expect(initialBlockSize(1e8, [1024, 2048])).toBe(2048);
  });

  it('refuses a negative or non-finite size', () => {
    expect(() => initialBlockSize(-1)).toThrow(RangeError);
    expect(() => initialBlockSize(Number.NaN)).toThrow(RangeError);
  });

  it('rejects a ratio vector of the wrong length', () => {
    expect(() => updateHistory(initialHistory(), [1, 2])).toThrow(RangeError);
  });
});

describe('delta or whole upload (HyCloud Eq. 2)', () => {
  it('sends a delta on a slow uplink with a good elimination ratio, whole on a fast one', () => {
    const MB = 1e6;
    expect(deltaPays(1 * MB, 100 * MB, 200 * MB, 0.9)).toBe(true);
    expect(deltaPays(500 * MB, 100 * MB, 200 * MB, 0.9)).toBe(false);
    expect(deltaPays(1 * MB, 100 * MB, 200 * MB, 0)).toBe(false);
  });

  it('is asked before the delta: the bound (γ = 1) rules out a delta on a link faster than the engine', () => {
    const MB = 1e6;
    // r_c = 100 MB/s, r_t = 200 MB/s: no delta can pay once r_u ≥ 100·200/(200+200) = 50 MB/s.
    expect(planDelta(400 * MB, 100 * MB, 200 * MB)).toMatchObject({ use: 'whole', stage: 'bound', gamma: 1 });
    expect(planDelta(6 * MB, 100 * MB, 200 * MB)).toMatchObject({ use: 'delta', stage: 'bound' });
    expect(planDelta(6 * MB, 100 * MB, 200 * MB, 0.9)).toMatchObject({ use: 'delta', stage: 'estimate' });
    expect(planDelta(6 * MB, 100 * MB, 200 * MB, 0.05)).toMatchObject({ use: 'whole', stage: 'estimate' });
  });
});

describe('delta estimate before the delta (Eq. 2 inputs from a sample)', () => {
  let dir: string;
  const MiB = 1024 * 1024;
  const size = 24 * MiB;
  let base: Buffer;
  beforeAll(async () => {
    dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-delta-estimate-'));
    base = Buffer.alloc(size);
    let x = 12345;
    for (let i = 0; i < size; i += 4) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      base.writeUInt32LE(x >>> 0, i);
    }
  });
  afterAll(() => fsp.rm(dir, { recursive: true, force: true }));

  const sigOf = async (b: Buffer, blockSize: number) =>
    parseSignature(await collect(signature(b, { blockSize })));

  it('measures γ̂ and r_c on windows of the new file: a light edit is near 1, a rewrite near 0', async () => {
    const sig = await sigOf(base, 8192);
    const light = Buffer.from(base);
    for (let i = 1; i < 50; i++) light.writeUInt8(((light[i * 400_000] ?? 0) + 1) & 0xff, i * 400_000);
    await fsp.writeFile(nodePath.join(dir, 'light'), light);
    const e1 = await estimateDelta(sig, nodePath.join(dir, 'light'), size);
    expect(e1.sampledBytes).toBeLessThanOrEqual(4 * MiB);
    expect(e1.sampledBytes).toBeGreaterThan(0);
    expect(e1.seconds).toBeGreaterThan(0);
    expect(e1.wholeDelta).toBeUndefined();
    expect(e1.gamma).toBeGreaterThan(0.9);

    const rewritten = Buffer.from(base).reverse();
    await fsp.writeFile(nodePath.join(dir, 'rewritten'), rewritten);
    const e2 = await estimateDelta(sig, nodePath.join(dir, 'rewritten'), size);
    expect(e2.gamma).toBeLessThan(0.05);

    // Decided on those estimates (r_c fixed at 80 MB/s here, so that no timing decides the
    // test; r_t = 100 MiB/s): a 50 Mbit/s uplink takes the light edit as a delta, a
    // 10 Gbit/s one sends the file whole, and no link takes the rewrite as a delta.
    expect(planDelta(6.25e6, 80e6, 100 * MiB, e1.gamma).use).toBe('delta');
    expect(planDelta(1.25e9, 80e6, 100 * MiB, e1.gamma).use).toBe('whole');
    expect(planDelta(6.25e6, 80e6, 100 * MiB, e2.gamma).use).toBe('whole');
  });

  it('diffs a file not much larger than the sample whole, and hands that delta over', async () => {
    const small = base.subarray(0, 3 * MiB);
    const sig = await sigOf(small, 2048);
    const edited = Buffer.concat([small.subarray(0, MiB), Buffer.from('inserted'), small.subarray(MiB)]);
    await fsp.writeFile(nodePath.join(dir, 'small'), edited);
    const e = await estimateDelta(sig, nodePath.join(dir, 'small'), edited.byteLength);
    expect(e.sampledBytes).toBe(edited.byteLength);
    expect(e.wholeDelta).toBeDefined();
    expect(e.gamma).toBeGreaterThan(0.95);
  });

  it('refuses a bad size, and calibrates the engine rate on this machine', async () => {
    const sig = await sigOf(base.subarray(0, 4096), 512);
    await expect(estimateDelta(sig, nodePath.join(dir, 'light'), -1)).rejects.toThrow(RangeError);
    const c = await calibrateDeltaRate();
    expect(c.bytes).toBe(MiB);
    expect(c.seconds).toBeGreaterThan(0);
  });
});

describe('adaptive compression (CoCloud Eq. 3–4)', () => {
  const levels = [
    { level: 1, ratio: 2, rate: 200e6 },
    { level: 6, ratio: 3, rate: 40e6 },
    { level: 9, ratio: 3.2, rate: 5e6 },
  ];
  it('picks the strongest level whose output still outruns the link', () => {
    // No hashing on the send path: r_c = r_b/β — level 9 → 1.56 MB/s, level 6 → 13.3 MB/s,
    // level 1 → 100 MB/s.
    expect(chooseCompression(levels, 0.5e6)?.level).toBe(9);
    expect(chooseCompression(levels, 5e6)?.level).toBe(6);
    expect(chooseCompression(levels, 40e6)?.level).toBe(1);
    expect(chooseCompression(levels, 150e6)).toBeUndefined();
    expect(chooseCompression([{ level: 1, ratio: 1, rate: 1e9 }], 1)).toBeUndefined();
  });

  it('slows the compute path by a hash in series (r_a), less the deduplicated share (γ)', () => {
    // r'_a = (1−γ)/β·r_a: a 6 MB/s hash before level 6 → r_c = 1/(1/2 + 1/13.3) MB/s = 1.74 MB/s.
    expect(chooseCompression(levels, 5e6, 0, 6e6)).toBeUndefined();
    expect(chooseCompression(levels, 1.5e6, 0, 6e6)?.level).toBe(6);
    // Half of it deduplicated: half as much to hash per byte sent — r'_a = 0.5/3·20 = 3.3 MB/s.
    expect(chooseCompression(levels, 2e6, 0.5, 20e6)?.level).toBe(6);
    // Without the deduplication, level 6 no longer keeps up; level 1 (r'_a = 3 MB/s) does.
    expect(chooseCompression(levels, 2e6, 0, 6e6)?.level).toBe(1);
  });

  it('compresses a corpus deflating 3× at 30 MB/s for a 50 Mbit/s link (the shaped-link run sent it raw)', () => {
    // r_c = 30/3 = 10 MB/s ≥ 6.25 MB/s; read as before (r/(2β) = 5 MB/s) it was sent raw.
    expect(chooseCompression([{ level: 6, ratio: 3, rate: 30e6 }], 6.25e6)?.level).toBe(6);
  });
});

describe('rate estimate (HyCloud Eq. 4)', () => {
  it('is the harmonic mean of the last five samples', () => {
    const r = new RateEstimator(5);
    r.add(100, 1);
    r.add(100, 4); // 25/s
    expect(r.rate).toBeCloseTo(2 / (1 / 100 + 1 / 25));
    for (let i = 0; i < 5; i++) r.add(10, 1);
    expect(r.rate).toBeCloseTo(10);
  });
});

describe('compression advisor (CoCloud Eq. 3–4 on measured samples)', () => {
  const measureWith = (ratio: number, bytesPerSecond: number) => (sample: Uint8Array) => ({
    outBytes: Math.round(sample.byteLength / ratio),
    seconds: sample.byteLength / bytesPerSecond,
  });
  const data = [new Uint8Array(300 * 1024)];

  it('compresses on a slow link when the compressor keeps up', () => {
    const a = new CompressionAdvisor(measureWith(4, 100e6));
    expect(a.shouldCompress(data, 1e6)).toBe(true);
  });

  it('compresses for a 50 Mbit/s link a sample deflating 3× at 30 MB/s (issue #16’s shaped-link run went raw)', () => {
    expect(new CompressionAdvisor(measureWith(3, 30e6)).shouldCompress(data, 6.25e6)).toBe(true);
    expect(new CompressionAdvisor(measureWith(3, 30e6)).shouldCompress(data, 50e6)).toBe(false);
  });

  it('deflates a sample of at most COMPRESSION_SAMPLE_BYTES of a bundle, on the event loop', () => {
    // Issue #16: 256 KiB a sample was ~4 µs of CPU per file of a first sync.
    const sizes: number[] = [];
    const a = new CompressionAdvisor((sample) => {
      sizes.push(sample.byteLength);
      return measureWith(4, 100e6)(sample);
    });
    a.shouldCompress([new Uint8Array(3 * 1024 * 1024), new Uint8Array(1024 * 1024)], 1e6);
    expect(sizes).toEqual([COMPRESSION_SAMPLE_BYTES]);
  });

  it('sends raw on a link faster than the compressor, or when data does not shrink', () => {
    expect(new CompressionAdvisor(measureWith(4, 100e6)).shouldCompress(data, 1e9)).toBe(false);
    expect(new CompressionAdvisor(measureWith(1, 100e6)).shouldCompress(data, 1e3)).toBe(false);
  });

  it('keeps its choice while the link stays within the hysteresis band', () => {
    // ratio 4, 100 MB/s: r_c = r_b / β = 25 MB/s.
    const rc = 100e6 / 4;
    const a = new CompressionAdvisor(measureWith(4, 100e6), 0.3);
    expect(a.choice).toBeUndefined();
    expect(a.shouldCompress(data, rc * 0.95)).toBe(true);
    // The measured link wobbles around r_c (±20 %): the choice holds.
    for (const f of [1.1, 1.2, 0.9, 1.15, 1.05]) expect(a.shouldCompress(data, rc * f)).toBe(true);
    // Well beyond the band it changes, and then holds on the other side.
    expect(a.shouldCompress(data, rc * 1.5)).toBe(false);
    for (const f of [0.9, 0.8, 1.2, 0.95]) expect(a.shouldCompress(data, rc * f)).toBe(false);
    expect(a.shouldCompress(data, rc * 0.6)).toBe(true);
    // Without a band the same wobble flips the choice.
    const b = new CompressionAdvisor(measureWith(4, 100e6), 0);
    const flips = [0.9, 1.1, 0.9, 1.1].map((f) => b.shouldCompress(data, rc * f));
    expect(flips).toEqual([true, false, true, false]);
  });

  it('refuses a band outside [0, 1)', () => {
    expect(() => new CompressionAdvisor(measureWith(4, 100e6), 1)).toThrow(RangeError);
    expect(() => new CompressionAdvisor(measureWith(4, 100e6), -0.1)).toThrow(RangeError);
  });
});
