import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  BlockSizePredictor,
  CANDIDATE_BLOCK_SIZES,
  DEFAULT_BLOCK_SIZE,
  TRANSFER_BLOCK_BYTES,
  chooseCompression,
  compareBatch,
  planTransfers,
} from '../src/interproxy/compare.ts';

const h = (s: string): string => createHash('sha256').update(s).digest('hex');

describe('metadata batch compare (unchanged / new / changed)', () => {
  const cache = new Map([
    ['a.txt', { size: 1, sha256: h('a') }],
    ['big.bin', { size: 9_000_000, sha256: h('big v1') }],
  ]);
  const dest = { get: (p: string) => cache.get(p), hasContent: (s: string) => s === h('moved') };

  it('answers per file, in order', () => {
    const verdicts = compareBatch(
      [
        { path: 'a.txt', size: 1, sha256: h('a') },
        { path: 'big.bin', size: 9_100_000, sha256: h('big v2') },
        { path: 'new/n.txt', size: 3, sha256: h('n') },
        { path: 'renamed.txt', size: 5, sha256: h('moved') },
      ],
      dest,
      () => 8192,
    );
    expect(verdicts).toEqual([
      { path: 'a.txt', verdict: 'unchanged' },
      { path: 'big.bin', verdict: 'changed', basisSha256: h('big v1'), blockSize: 8192 },
      { path: 'new/n.txt', verdict: 'new' },
      { path: 'renamed.txt', verdict: 'unchanged' },
    ]);
  });

  it('refuses bad input whole: traversal, bad hash, duplicates, bad size', () => {
    const ok = { size: 1, sha256: h('x') };
    expect(() => compareBatch([{ path: '../etc/passwd', ...ok }], dest)).toThrow(/entry 0/);
    expect(() => compareBatch([{ path: '/abs', ...ok }], dest)).toThrow(/entry 0/);
    expect(() => compareBatch([{ path: 'a', size: 1, sha256: 'XYZ' }], dest)).toThrow(/sha256/);
    expect(() => compareBatch([{ path: 'a', size: -1, sha256: h('x') }], dest)).toThrow(/size/);
    expect(() =>
      compareBatch(
        [
          { path: 'a', ...ok },
          { path: 'a', ...ok },
        ],
        dest,
      ),
    ).toThrow(/twice/);
  });
});

describe('adaptive block size (CoCloud Eq. 1–2)', () => {
  it('starts at the default and follows the sizes that deduplicate best', () => {
    const p = new BlockSizePredictor();
    expect(p.choose('f')).toBe(DEFAULT_BLOCK_SIZE);
    const favour = (size: number) => CANDIDATE_BLOCK_SIZES.map((c) => (c === size ? 0.9 : 0.1));
    p.record('f', favour(32768));
    expect(p.choose('f')).toBe(32768);
    // One contrary observation does not flip a history (α = n/(n+1) weighs the past).
    p.record('f', favour(512));
    p.record('f', favour(32768));
    expect(p.choose('f')).toBe(32768);
    for (let i = 0; i < 10; i++) p.record('f', favour(512));
    expect(p.choose('f')).toBe(512);
    expect(p.choose('other')).toBe(DEFAULT_BLOCK_SIZE);
  });
});

describe('adaptive compression (CoCloud Eq. 3–4)', () => {
  const options = [
    { ratio: 1.5, rate: 400e6 }, // fast, light
    { ratio: 3, rate: 20e6 }, // slow, strong
  ];
  it('on a slow link picks the strongest compression that keeps up', () => {
    expect(chooseCompression(0.2, 500e6, options, 1e6).index).toBe(1);
  });
  it('on a fast link picks the lighter one; faster still, none', () => {
    expect(chooseCompression(0.2, 500e6, options, 50e6).index).toBe(0);
    expect(chooseCompression(0.2, 500e6, options, 5e9).index).toBe(-1);
  });
});

describe('transfer plan (bundles of small files, blocks or deltas for large ones)', () => {
  it('bundles small files up to 4 MiB; large files alone; unchanged skipped', () => {
    const batch = [
      ...Array.from({ length: 100 }, (_, i) => ({ path: `s/${i}.txt`, size: 10_000, sha256: h(`s${i}`) })),
      { path: 'big.tar', size: 60_000_000, sha256: h('tar') },
      { path: 'same.txt', size: 3, sha256: h('same') },
      ...Array.from({ length: 3 }, (_, i) => ({ path: `m/${i}.bin`, size: 1_500_000, sha256: h(`m${i}`) })),
    ];
    const verdicts = compareBatch(batch, {
      get: (p) => (p === 'same.txt' ? { size: 3, sha256: h('same') } : undefined),
    });
    const plan = planTransfers(batch, verdicts);
    expect(plan.unchanged).toEqual(['same.txt']);
    expect(plan.large.map((l) => l.file.path)).toEqual(['big.tar']);
    const sizes = plan.bundles.map((b) => b.reduce((s, f) => s + f.size, 0));
    expect(sizes.every((s) => s <= TRANSFER_BLOCK_BYTES)).toBe(true);
    expect(plan.bundles.flat()).toHaveLength(103);
    expect(plan.bundles.length).toBe(2);
  });
});
