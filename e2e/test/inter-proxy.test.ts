/**
 * Two proxy servers joined by a throttled link (the inter-proxy protocol, scaled down from
 * bench/inter-proxy.bench.ts): files go from the Dropbox emulator through proxy A, the
 * link and proxy B into the Drive emulator, byte-identical; small files bundled, a large
 * changed file as a delta; and a link cut mid-transfer costs only the unacknowledged blocks.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { collect, type Provider } from '@weft/providers';
import { startInterProxyPair, type InterProxyPair } from '../src/interproxy-harness.ts';

let pair: InterProxyPair | undefined;
afterEach(async () => {
  await pair?.close();
  pair = undefined;
});

async function bytes(p: Provider, path: string): Promise<Buffer> {
  return Buffer.from(await collect(await p.read(path)));
}

function words(n: number): Buffer {
  const vocab = [
    'const',
    'function',
    'return',
    'export',
    'import',
    'type',
    'interface',
    'await',
    '=>',
    '{',
    '}',
  ];
  const r = randomBytes(n);
  return Buffer.from(Array.from(r, (b) => vocab[b % vocab.length]).join(' '));
}

describe('inter-proxy transfer through a throttled link', () => {
  it('delivers files byte-identical: small ones bundled, a changed large one as a delta, unchanged ones not at all', async () => {
    pair = await startInterProxyPair({ bitsPerSecond: 20_000_000, latencyMs: 10 });
    const { dropbox, drive } = pair;
    await dropbox.mkdir('small');
    await dropbox.mkdir('big');
    const small = Array.from({ length: 30 }, (_, i) => ({
      path: `small/f${i}.bin`,
      data: randomBytes(10_000),
    }));
    const big = words(800_000); // ~5 MiB: two transfer blocks
    for (const f of small) await dropbox.write(f.path, f.data);
    await dropbox.write('big/src.txt', big);
    const paths = [...small.map((f) => f.path), 'big/src.txt'];

    const first = await pair.forward(paths);
    expect(first.every((o) => o.status === 'committed')).toBe(true);
    expect(first.find((o) => o.path === 'big/src.txt')?.mode).toBe('whole');
    expect(first.filter((o) => o.mode === 'bundle')).toHaveLength(30);
    for (const p of paths)
      expect((await bytes(drive, `ours/${p}`)).equals(await bytes(dropbox, p))).toBe(true);

    // A new version: a few bytes edited in the middle of the large file, one small file rewritten.
    const big2 = Buffer.concat([
      big.subarray(0, 2_000_000),
      Buffer.from('/* edited */'),
      big.subarray(2_000_000),
    ]);
    await dropbox.write('big/src.txt', big2);
    await dropbox.write('small/f3.bin', randomBytes(9_000));
    const sentBefore = pair.sender.stats.bytesSent;
    const second = await pair.forward(paths);
    const by = new Map(second.map((o) => [o.path, o]));
    expect(by.get('big/src.txt')).toMatchObject({ status: 'committed', mode: 'delta' });
    expect(by.get('small/f3.bin')).toMatchObject({ status: 'committed', mode: 'bundle' });
    expect(second.filter((o) => o.status === 'unchanged')).toHaveLength(29);
    expect(pair.sender.stats.bytesSent - sentBefore).toBeLessThan(200_000);
    for (const p of paths)
      expect((await bytes(drive, `ours/${p}`)).equals(await bytes(dropbox, p))).toBe(true);

    // The baseline the bench compares with moves the same bytes.
    await pair.baseline(paths);
    for (const p of paths)
      expect((await bytes(drive, `baseline/${p}`)).equals(await bytes(dropbox, p))).toBe(true);
  });

  it('after a cut mid-transfer, re-sends only the blocks that were not acknowledged', async () => {
    pair = await startInterProxyPair({
      bitsPerSecond: 20_000_000,
      latencyMs: 10,
      blockBytes: 256 * 1024,
      maxInFlight: 8,
    });
    const { dropbox, drive, sender, link } = pair;
    const data = randomBytes(6 * 1024 * 1024); // 24 blocks of 256 KiB
    await dropbox.write('video.bin', data);
    const sent = new Set<number>();
    const acked = new Set<number>();
    const resent: number[] = [];
    const expected: number[] = [];
    let ackedAtCut = 0;
    sender.on('sent', (seq: number) => sent.add(seq));
    sender.on('resent', (seq: number) => {
      if (acked.has(seq)) throw new Error(`acknowledged block ${seq} sent again`);
      resent.push(seq);
    });
    sender.on('welcome', (w: { acked: number[] }) => {
      expected.push(...[...sent].filter((q) => !acked.has(q) && !w.acked.includes(q)));
    });
    sender.on('ack', (seq: number) => {
      acked.add(seq);
      if (ackedAtCut === 0 && acked.size === 4) {
        ackedAtCut = acked.size;
        link.cutAll();
      }
    });
    const [outcome] = await pair.forward(['video.bin']);
    expect(outcome).toMatchObject({ status: 'committed', mode: 'whole' });
    expect((await bytes(drive, 'ours/video.bin')).equals(data)).toBe(true);

    expect(ackedAtCut).toBe(4);
    expect(sender.stats.reconnects).toBeGreaterThanOrEqual(1);
    expect(sender.stats.blocksSent).toBe(24);
    expect(expected.length).toBeGreaterThan(0);
    expect(expected.length).toBeLessThanOrEqual(8); // at most the window, never the file
    expect(resent.sort((a, b) => a - b)).toEqual(expected.sort((a, b) => a - b));
    expect(sender.stats.blocksResent).toBe(expected.length);
    expect(pair.proxyB.peerLink?.receiver.stats.blocksStored).toBe(24);
  });
});
