/**
 * The packer's queue (issue #16): a flush packs the paths written since the last one, looked
 * up one by one, instead of listing every small file not yet packed (that listing cost O(all
 * small files) per flush: 290 s of a 100,000-file drop's 800 s). What only a listing can find
 * is still found: the first flush lists, a folder moved with unpacked files inside is listed
 * again, and so is what a failed flush had taken.
 */
import { afterAll, describe, expect, it, vi } from 'vitest';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const started: Server[] = [];
afterAll(async () => {
  for (const s of started) await s.close().catch(() => undefined);
});

async function setup(): Promise<{ server: Server; alice: TestClient }> {
  const server = await startTestServer({
    dataDir: await tempDir(),
    // Flushed by the test only.
    packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, gcIntervalMs: 0 },
  });
  started.push(server);
  return { server, alice: await TestClient.enrol(server, 'alice') };
}

const files = (prefix: string, n: number, seed: number): Record<string, Buffer> =>
  Object.fromEntries(
    Array.from({ length: n }, (_, i) => [`${prefix}/f${i}.bin`, pseudoRandom(2000 + i, seed + i)]),
  );

describe('packer queue', () => {
  it('packs what was written since the last flush without listing every small file', async () => {
    const { server, alice } = await setup();
    const packer = server.packer!;
    const first = files('a', 20, 1);
    await alice.putSmall(first);
    expect(await packer.flush()).toBe(1); // the first flush lists
    const listing = vi.spyOn(packer, 'pending');
    const later = files('b', 5, 100);
    await alice.putSmall(later);
    expect(await packer.flush()).toBe(1);
    expect(listing).not.toHaveBeenCalled();
    for (const body of Object.values(later)) expect(await packer.locate(sha(body))).toBeDefined();
    expect((await packer.stats()).map((s) => s.entries)).toEqual(expect.arrayContaining([20, 5]));
    listing.mockRestore();
    expect(await packer.pending()).toEqual([]);
  });

  it('finds files of a moved folder and what a failed flush had taken', async () => {
    const { server, alice } = await setup();
    const packer = server.packer!;
    await alice.putSmall(files('seed', 2, 1));
    expect(await packer.flush()).toBe(1);

    // Written under c/, moved to d/ before any flush: the queued paths are gone.
    const moved = files('c', 6, 50);
    await alice.putSmall(moved);
    const [r] = await alice.ops({ op: 'move', from: 'c', to: 'd' });
    expect(r?.status).toBe('applied');
    expect(await packer.flush()).toBe(1);
    for (const body of Object.values(moved)) expect(await packer.locate(sha(body))).toBeDefined();
    expect(await packer.pending()).toEqual([]);

    // A flush whose pack write fails: its files are packed by the next one.
    const lost = files('e', 4, 80);
    await alice.putSmall(lost);
    const objects = packer['o'].objects;
    const write = vi.spyOn(objects, 'write').mockRejectedValueOnce(new Error('object tier down'));
    await expect(packer.flush()).rejects.toThrow('object tier down');
    write.mockRestore();
    expect(await packer.pending()).toHaveLength(4);
    expect(await packer.flush()).toBe(1);
    for (const body of Object.values(lost)) expect(await packer.locate(sha(body))).toBeDefined();
    expect(await packer.pending()).toEqual([]);
  });

  it("packs a bundle's files from the bytes it received, reading nothing back, and bounds what it holds", async () => {
    const { server, alice } = await setup();
    const packer = server.packer!;
    const readSmall = vi.spyOn(packer['o'], 'readSmall');
    const sent = files('hot', 12, 7);
    await alice.putSmall(sent);
    expect(packer['hot'].size).toBeGreaterThan(0);
    expect(await packer.flush()).toBe(1);
    expect(readSmall).not.toHaveBeenCalled();
    for (const body of Object.values(sent)) {
      const loc = await packer.locate(sha(body));
      expect(loc).toBeDefined();
      expect(Buffer.from(await packer.read(loc!))).toEqual(body);
    }
    expect(packer['hot'].size).toBe(0);

    // Bytes not held (evicted, or too many): read back from the filesystem tier as before.
    const cold = files('cold', 5, 70);
    await alice.putSmall(cold);
    packer['hot'].clear();
    expect(await packer.flush()).toBe(1);
    expect(readSmall).toHaveBeenCalledTimes(5);
    for (const body of Object.values(cold))
      expect(Buffer.from(await packer.read((await packer.locate(sha(body)))!))).toEqual(body);

    // Held bytes whose files went before any flush are let go by the flushes after.
    const gone = files('gone', 3, 90);
    await alice.putSmall(gone);
    const [del] = await alice.ops({ op: 'delete', path: 'gone' });
    expect(del?.status).toBe('applied');
    await packer.flush();
    await packer.flush();
    expect(packer['hot'].size).toBe(0);
    readSmall.mockRestore();
  });
});
