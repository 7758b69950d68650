/**
 * Proxy selection (CoCloud §III-B): a cloud is served by the proxies within +10 % of the
 * best measured bandwidth to it; measurements are periodic probes. The probes run against
 * real (memory) providers seen through a simulated link that advances a test clock by
 * bytes / rate, so the figures are exact and nothing depends on wall-clock time.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  ForwardingProvider,
  MemoryProvider,
  collect,
  type Body,
  type CallInfo,
  type Entry,
  type ReadOptions,
  type WriteOptions,
} from '@weft/providers';
import { BandwidthProbe, ProxySelector } from '../src/interproxy/selection.ts';

const MB = 1e6;

class TestClock {
  ms = 0;
  readonly now = (): number => this.ms;
}

/** A provider reached through a link of `rate` bytes/s: each byte moved advances the clock. */
class SimulatedLink extends ForwardingProvider {
  writes = 0;
  constructor(
    inner: MemoryProvider,
    private readonly clock: TestClock,
    public rate: number,
  ) {
    super(inner);
  }
  protected call<T>(_info: CallInfo, fn: () => Promise<T>): Promise<T> {
    return fn();
  }
  override async write(path: string, body: Body, options?: WriteOptions): Promise<Entry> {
    this.writes += 1;
    if (body instanceof Uint8Array) this.clock.ms += (body.byteLength / this.rate) * 1000;
    return super.write(path, body, options);
  }
  override async read(path: string, options?: ReadOptions): Promise<AsyncIterable<Uint8Array>> {
    const bytes = await collect(await super.read(path, options));
    this.clock.ms += (bytes.byteLength / this.rate) * 1000;
    return (async function* () {
      yield bytes;
    })();
  }
}

afterEach(() => {
  vi.useRealTimers();
});

describe('proxy selection', () => {
  it('serves a cloud from every proxy within +10 % of the best, each cloud on its own', () => {
    const s = new ProxySelector();
    s.record('virginia', 'dropbox', 10 * MB);
    s.record('california', 'dropbox', (10 * MB) / 1.1); // exactly at the bound: in
    s.record('beijing', 'dropbox', 9 * MB); // 11 % slower: out
    s.record('beijing', 'baidu', 30 * MB);
    s.record('virginia', 'baidu', 1 * MB);
    expect(s.servers('dropbox')).toEqual(['virginia', 'california']);
    expect(s.servers('baidu')).toEqual(['beijing']);
    expect(s.servers('onedrive')).toEqual([]);
    // Among the serving proxies, the least loaded takes the next transfer.
    const load = new Map([
      ['virginia', 3],
      ['california', 1],
      ['beijing', 0],
    ]);
    expect(s.pick('dropbox', (p) => load.get(p) ?? 0)).toBe('california');
  });

  it('averages the last probes harmonically and forgets proxies that stopped reporting', () => {
    const clock = new TestClock();
    const s = new ProxySelector({ samples: 3, maxAgeMs: 60_000, now: clock.now });
    for (const r of [1, 4, 4, 4]) s.record('a', 'drive', r * MB); // the first falls out of the window
    s.record('b', 'drive', 3.8 * MB);
    expect(s.measurements().find((m) => m.proxy === 'a')?.bytesPerSecond).toBeCloseTo(4 * MB);
    expect(s.servers('drive')).toEqual(['a', 'b']);
    s.record('a', 'drive', 1 * MB); // harmonic mean of 4, 4, 1 = 2: b (3.8) is now the best
    expect(s.servers('drive')).toEqual(['b']);
    clock.ms += 61_000;
    s.record('a', 'drive', 2 * MB);
    expect(s.servers('drive')).toEqual(['a']); // b's figures aged out
  });

  it('re-measures periodically and moves a cloud to the proxy that became faster', async () => {
    vi.useFakeTimers();
    // Each proxy times its probes on its own clock (they run at the same time).
    const clockA = new TestClock();
    const clockB = new TestClock();
    const selector = new ProxySelector({ samples: 1 });
    const drive = new MemoryProvider({ name: 'drive' });
    const fromA = new SimulatedLink(drive, clockA, 10 * MB);
    const fromB = new SimulatedLink(drive, clockB, 6 * MB);
    const probeA = new BandwidthProbe({
      proxy: 'a',
      clouds: new Map([['drive', fromA]]),
      selector,
      clock: clockA.now,
      intervalMs: 60_000,
    });
    const probeB = new BandwidthProbe({
      proxy: 'b',
      clouds: new Map([['drive', fromB]]),
      selector,
      clock: clockB.now,
      intervalMs: 60_000,
    });
    const stopA = probeA.start();
    const stopB = probeB.start();
    await vi.advanceTimersByTimeAsync(0);
    expect(fromA.writes).toBe(1);
    const first = new Map(selector.measurements().map((m) => [m.proxy, m.bytesPerSecond]));
    expect(first.get('a')).toBeCloseTo(10 * MB, -3);
    expect(first.get('b')).toBeCloseTo(6 * MB, -3);
    expect(selector.servers('drive')).toEqual(['a']);

    // A's route to Drive degrades; the next periodic probe sees it.
    fromA.rate = 5 * MB;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(fromA.writes).toBe(2);
    expect(fromB.writes).toBe(2);
    expect(selector.servers('drive')).toEqual(['b']); // 5 MB/s × 1.1 < 6 MB/s
    // Back within 10 % of the best: served by both again.
    fromA.rate = 5.6 * MB;
    await vi.advanceTimersByTimeAsync(60_000);
    expect(selector.servers('drive')).toEqual(['b', 'a']);
    await stopA();
    await stopB();
    await vi.advanceTimersByTimeAsync(120_000);
    expect(fromA.writes).toBe(3); // stopped: no more probes
    const left: string[] = [];
    for await (const e of drive.list('', { recursive: true })) if (e.kind === 'file') left.push(e.path);
    expect(left).toEqual([]); // probe files are removed
  });
});
