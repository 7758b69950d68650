import { describe, expect, it } from 'vitest';
import {
  CANDIDATE_BLOCK_SIZES,
  CompressionAdvisor,
  RateEstimator,
  chooseBlockSize,
  chooseCompression,
  deltaPays,
  initialHistory,
  updateHistory,
} from '../src/adaptive.ts';

describe('adaptive block size (HyCloud Eq. 1)', () => {
  it('moves towards the block size with the best elimination ratio, with decaying memory', () => {
    let h = initialHistory();
    const ratios = CANDIDATE_BLOCK_SIZES.map((s) => (s === 4096 ? 0.9 : 0.1));
    h = updateHistory(h, ratios);
    expect(chooseBlockSize(h)).toBe(4096);
    expect(h.probs.reduce((a, b) => a + b, 0)).toBeCloseTo(1);
    // Later evidence for 16 KiB takes over only gradually (λ = n/(n+1)).
    const other = CANDIDATE_BLOCK_SIZES.map((s) => (s === 16384 ? 0.95 : 0.05));
    h = updateHistory(h, other);
    expect(h.n).toBe(2);
    for (let i = 0; i < 5; i++) h = updateHistory(h, other);
    expect(chooseBlockSize(h)).toBe(16384);
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
});

describe('adaptive compression (CoCloud Eq. 3–4)', () => {
  const levels = [
    { level: 1, ratio: 2, rate: 200e6 },
    { level: 6, ratio: 3, rate: 40e6 },
    { level: 9, ratio: 3.2, rate: 5e6 },
  ];
  it('picks the strongest level that still outruns the link', () => {
    // r_c = (1−γ)·r_a·r_b / (β(1−γ)·r_a + β·r_b), with r_b = r_a: level 9 → 0.78 MB/s,
    // level 6 → 6.7 MB/s, level 1 → 50 MB/s.
    expect(chooseCompression(levels, 0.5e6)?.level).toBe(9);
    expect(chooseCompression(levels, 5e6)?.level).toBe(6);
    expect(chooseCompression(levels, 40e6)?.level).toBe(1);
    expect(chooseCompression(levels, 100e6)).toBeUndefined();
    // Deduplication (γ) leaves less to compress, so the compute path slows relative to the link.
    expect(chooseCompression(levels, 5e6, 0.5)?.level).toBe(1);
    expect(chooseCompression([{ level: 1, ratio: 1, rate: 1e9 }], 1)).toBeUndefined();
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

  it('sends raw on a link faster than the compressor, or when data does not shrink', () => {
    expect(new CompressionAdvisor(measureWith(4, 100e6)).shouldCompress(data, 1e9)).toBe(false);
    expect(new CompressionAdvisor(measureWith(1, 100e6)).shouldCompress(data, 1e3)).toBe(false);
  });
});
