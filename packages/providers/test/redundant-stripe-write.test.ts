/**
 * A striped write streams each fragment to its backend as it is encoded (issue #17: no spool
 * round trip). What must hold: memory stays bounded when a backend is slow (the source is
 * not read further ahead than a few stripes of what the slowest backend has taken); a write
 * refused for its size or checksum stores nothing whole, leaves no blob behind and marks no
 * backend down; a backend whose write breaks in the middle is owed its fragment (outage
 * log) while the write succeeds and reads back whole.
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { collect, openBody } from '../src/body.ts';
import { NotFoundError, TransientError } from '../src/errors.ts';
import type { Body, Provider, WriteOptions } from '../src/provider.ts';
import { BLOB_DIR } from '../src/redundant/index.ts';
import { FRAGMENT_QUEUE } from '../src/redundant/stripe-write.ts';
import { forwardingTo, memoryTier } from './redundant-memory-rig.ts';

const KiB = 1024;
const SHARD = 16 * KiB;

/** A backend whose writes' bodies pass through `tap` (to slow or break them). */
function tapped(p: Provider, tap: (body: AsyncIterable<Uint8Array>) => AsyncIterable<Uint8Array>): Provider {
  return forwardingTo(p, {
    write: (q: string, b: Body, o?: WriteOptions) => p.write(q, tap(openBody(b)), o),
  });
}

async function rig(taps: ((b: AsyncIterable<Uint8Array>) => AsyncIterable<Uint8Array>)[] = []) {
  const inner = [0, 1, 2, 3, 4].map(() => new MemoryProvider());
  const backends = inner.map((p, i) => (taps[i] ? tapped(p, taps[i]) : p));
  const { tier } = await memoryTier('weft-redundant-stripe-write-', backends, {
    maxShardBytes: SHARD,
    hedgeAfterMs: 2000, // the tier's default
  });
  return { tier, inner };
}

async function blobCount(p: Provider): Promise<number> {
  let n = 0;
  const walk = async (d: string): Promise<void> => {
    try {
      for await (const e of p.list(d)) {
        if (e.kind === 'dir') await walk(e.path);
        else n += 1;
      }
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  };
  await walk(BLOB_DIR);
  return n;
}

/** `data` in chunks of `chunk` bytes, counting what has been taken. */
function source(data: Buffer, chunk: number, taken: { bytes: number }): AsyncIterable<Uint8Array> {
  return (async function* () {
    for (let at = 0; at < data.byteLength; at += chunk) {
      const piece = data.subarray(at, at + chunk);
      taken.bytes += piece.byteLength;
      yield piece;
    }
  })();
}

describe('striped write, streamed to the backends', () => {
  it('reads the source no further ahead than a few stripes of what a slow backend has taken', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => (release = r));
    let slowTook = 0;
    // Backend b4 takes its header and 2 shards, then waits for the gate.
    const slow = (body: AsyncIterable<Uint8Array>) =>
      (async function* () {
        for await (const c of body) {
          if (slowTook === 3) await gate;
          slowTook += 1;
          yield c;
        }
      })();
    const { tier } = await rig([undefined!, undefined!, undefined!, undefined!, slow]);
    const size = 3 * SHARD * 40 + 11; // 41 stripes
    const data = randomBytes(size);
    const taken = { bytes: 0 };
    const write = tier.write('slow.bin', source(data, 5000, taken), { size });
    // Wait until the source stops advancing (the writer waits for b4).
    let last = -1;
    while (last !== taken.bytes) {
      last = taken.bytes;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(slowTook).toBe(3);
    // b4 has 2 shards; the writer may hold FRAGMENT_QUEUE more per fragment, one stripe
    // being filled and the chunk it reads from: far from the 41 stripes of the file.
    const stripeBytes = 3 * SHARD;
    expect(taken.bytes).toBeLessThanOrEqual((2 + FRAGMENT_QUEUE + 1) * stripeBytes + 5000);
    expect(taken.bytes).toBeLessThan(size / 4);
    release();
    await write;
    expect(taken.bytes).toBe(size);
    expect((await collect(await tier.read('slow.bin'))).equals(data)).toBe(true);
    const locs = await tier.store.locations((await tier.store.objectOf('slow.bin'))!);
    expect(locs.map((l) => l.state)).toEqual(['ok', 'ok', 'ok', 'ok', 'ok']);
  });

  it('refuses a wrong size or checksum: InvalidArgument, no blob left, no backend marked down', async () => {
    const { tier, inner } = await rig();
    const data = randomBytes(3 * SHARD * 5 + 100);
    const sha = createHash('sha256').update(data).digest('hex');
    const bad = [
      () => tier.write('a.bin', data, { size: data.byteLength + 1 }),
      () => tier.write('a.bin', data, { size: data.byteLength - 1 }),
      // The short one ends exactly on a stripe: every full stripe sent, the last held back.
      () => tier.write('a.bin', data.subarray(0, 3 * SHARD * 4), { size: data.byteLength }),
      () => tier.write('a.bin', data, { size: data.byteLength, sha256: '0'.repeat(64) }),
    ];
    for (const w of bad) await expect(w()).rejects.toMatchObject({ code: 'InvalidArgument' });
    for (const p of inner) expect(await blobCount(p)).toBe(0);
    for (let i = 0; i < 5; i++) expect(tier.isUp(`b${i}`)).toBe(true);
    await expect(tier.stat('a.bin')).rejects.toMatchObject({ code: 'NotFound' });
    await tier.write('a.bin', data, { size: data.byteLength, sha256: sha });
    expect((await collect(await tier.read('a.bin'))).equals(data)).toBe(true);
  });

  it('a backend whose write breaks midway is owed its fragment; the write succeeds', async () => {
    const broken = (body: AsyncIterable<Uint8Array>) =>
      (async function* () {
        let n = 0;
        for await (const c of body) {
          if (++n === 4) throw new TransientError('connection reset');
          yield c;
        }
      })();
    const { tier, inner } = await rig([undefined!, broken]);
    const data = randomBytes(3 * SHARD * 10 + 7);
    await tier.write('b.bin', data, { size: data.byteLength });
    const id = (await tier.store.objectOf('b.bin'))!;
    const states = (await tier.store.locations(id)).map((l) => [l.backend, l.state]);
    expect(states.filter(([, s]) => s === 'owed')).toEqual([['b1', 'owed']]);
    expect(await blobCount(inner[1]!)).toBe(0);
    expect((await collect(await tier.read('b.bin'))).equals(data)).toBe(true);
  });
});
