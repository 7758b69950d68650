/**
 * The packer's idle flush (issue #16): what is pending is packed once no bundle has been in
 * flight for `idleMs`, not only at the target size or the maximum age — the tail of a drop
 * (its last, partial pack) reaches the object tier soon after the last bundle. While a bundle
 * is in flight there is no idle flush. Counted in packs, never timed: the maximum age is
 * out of reach here.
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { pseudoRandom, startTestServer, tempDir, TestClient } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const started: Server[] = [];
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
});

const files = (prefix: string, n: number, seed: number): Record<string, Buffer> =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`${prefix}/f${i}.bin`, pseudoRandom(2000 + i, seed + i)]),
  );

describe('packer idle flush', () => {
  it('flushesAPartialPackOnceNoBundleIsInFlight', async () => {
    const server = await startTestServer({
      dataDir: await tempDir(),
      // Neither the target nor the maximum age is reached in this test.
      packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, idleMs: 50, gcIntervalMs: 0 },
    });
    started.push(server);
    const alice = await TestClient.enrol(server, 'alice');
    const packer = server.packer!;
    const flushes = vi.spyOn(packer, 'flush');
    // A bundle still in flight (another device's) holds the idle flush back...
    const ended = packer.busy();
    await alice.putSmall(files('a', 20, 1));
    await alice.putSmall(files('b', 20, 100));
    expect(await packer.pendingCount()).toBe(40);
    // (the answer to each bundle came after its ingest ended: any idle timer was armed then)
    await new Promise((r) => setTimeout(r, 300));
    expect(flushes).not.toHaveBeenCalled();
    // ...and once it ends, everything pending goes in one pack.
    ended();
    await vi.waitFor(async () => expect(await packer.pendingCount()).toBe(0), { timeout: 20_000 });
    expect(flushes).toHaveBeenCalledTimes(1);
    expect((await packer.stats()).length).toBe(1);
  });

  it('asksForOneFlushAtTheTargetWhileOneIsRunning', async () => {
    const server = await startTestServer({
      dataDir: await tempDir(),
      packs: { targetBytes: 64 * 1024, timeoutMs: 2_000_000_000, idleMs: 0, gcIntervalMs: 0 },
    });
    started.push(server);
    const alice = await TestClient.enrol(server, 'alice');
    await alice.putSmall(files('a', 5, 1));
    const packer = server.packer!;
    const flushes = vi.spyOn(packer, 'flush');
    const running = packer.flush(); // in flight until its pack is written
    // Files past the target, one by one, while it runs: one more flush, not one per file.
    for (let i = 0; i < 200; i++) packer.notify(100_000, { userId: 'nobody', path: `x${i}` });
    await running;
    await vi.waitFor(() => expect(flushes).toHaveBeenCalledTimes(2), { timeout: 10_000 });
    await new Promise((r) => setTimeout(r, 200));
    expect(flushes).toHaveBeenCalledTimes(2);
  });

  it('keepsTheMaximumAgeWithoutIdleFlush', async () => {
    const server = await startTestServer({
      dataDir: await tempDir(),
      packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, idleMs: 0, gcIntervalMs: 0 },
    });
    started.push(server);
    const alice = await TestClient.enrol(server, 'alice');
    const flushes = vi.spyOn(server.packer!, 'flush');
    await alice.putSmall(files('a', 10, 1));
    await new Promise((r) => setTimeout(r, 300));
    expect(flushes).not.toHaveBeenCalled();
    expect(await server.packer!.pendingCount()).toBe(10);
  });
});
