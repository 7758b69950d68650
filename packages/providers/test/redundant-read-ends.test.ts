/**
 * A striped read consumes every range stream it opens to its end (issue #17). Returning
 * early from an HTTP body that has not yet signalled its end aborts the request and closes
 * the connection, so every range request of a read paid a new connection (a TLS handshake
 * on a real cloud; 3× the connects on s3proxy). Backends here are memory providers whose
 * read streams count the ones left before their end.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { collect } from '../src/body.ts';
import type { ReadOptions } from '../src/provider.ts';
import { type CallInfo, ForwardingProvider } from '../src/wrappers/forwarding.ts';
import { memoryTier } from './redundant-memory-rig.ts';

const KiB = 1024;

class EndCounting extends ForwardingProvider {
  opened = 0;
  leftEarly = 0;
  protected call<T>(_info: CallInfo, fn: () => Promise<T>): Promise<T> {
    return fn();
  }
  protected override async openRead(path: string, o: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    const inner = await this.inner.read(path, o);
    this.opened += 1;
    const early = (): void => void (this.leftEarly += 1);
    return (async function* () {
      let ended = false;
      try {
        yield* inner;
        ended = true;
      } finally {
        if (!ended) early();
      }
    })();
  }
}

describe('striped reads', () => {
  it('read every range stream to its end, whole and ranged', async () => {
    const backends = [0, 1, 2, 3, 4].map(() => new EndCounting(new MemoryProvider()));
    const { tier } = await memoryTier('weft-redundant-ends-', backends);
    const data = randomBytes(3 * 16 * KiB * 40 + 123); // 41 stripes
    await tier.write('big.bin', data);
    expect(Buffer.compare(await collect(await tier.read('big.bin')), data)).toBe(0);
    const ranged = await collect(await tier.read('big.bin', { offset: 100 * KiB, length: 700 * KiB }));
    expect(Buffer.compare(ranged, data.subarray(100 * KiB, 800 * KiB))).toBe(0);
    const opened = backends.reduce((n, b) => n + b.opened, 0);
    expect(opened).toBeGreaterThan(10); // many range requests, not one per fragment
    expect(backends.map((b) => b.leftEarly)).toEqual([0, 0, 0, 0, 0]);
  });
});
