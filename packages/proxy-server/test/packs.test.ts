/** Packs (issue #16, docs/formats/pack.md) on the embedded object directory and on s3proxy. */
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { ProxyConfigInput } from '../src/config.ts';
import { type PackLocation, packKey } from '../src/store/packs.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, packTiers } from './helpers.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

function tiers(): ReturnType<typeof packTiers> {
  return packTiers(`packs-${Date.now()}`);
}

const started: Server[] = [];
afterAll(async () => {
  for (const s of started) await s.stop().catch(() => undefined);
});

describe.each(tiers())('packs on $name', ({ objectTier }) => {
  it('packs small files after the timeout, reads them by range, rebuilds the index from footers, repacks', async () => {
    const dataDir = await tempDir();
    const config: ProxyConfigInput = {
      dataDir,
      packs: { targetBytes: 64 * 1024, timeoutMs: 50 },
      ...(objectTier ? { objectTier } : {}),
    };
    let server = await startTestServer(config);
    started.push(server);
    const alice = await TestClient.enrol(server, 'alice');
    const bob = await TestClient.enrol(server, 'bob');
    const files: Record<string, Buffer> = {};
    for (let i = 0; i < 30; i++) files[`d/f${i}.bin`] = pseudoRandom(3000 + i, i + 1);
    await alice.putSmall(files);
    // bob holds two of alice's contents and one of his own: stored once in the packs.
    await bob.putSmall({ 'b/x.bin': files['d/f0.bin']!, 'b/y.bin': files['d/f1.bin']!, 'b/z.txt': 'bob' });
    const packer = server.packer!;
    // Nobody calls flush: the timeout (and the 64 KiB target) does.
    await vi.waitFor(() => expect(packer.pending()).toHaveLength(0), { timeout: 20_000, interval: 50 });

    const shas = [...Object.values(files).map((b) => sha(b)), sha('bob')];
    const locs = shas.map((h) => packer.locate(h)!);
    expect(locs.every((l) => l !== undefined)).toBe(true);
    const stats = packer.stats();
    expect(stats.length).toBeGreaterThanOrEqual(2); // 90 KB over a 64 KiB target
    expect(stats.reduce((n, s) => n + s.entries, 0)).toBe(31); // deduplicated across namespaces
    expect(stats.every((s) => s.deadBytes === 0)).toBe(true);
    for (const [path, body] of Object.entries(files)) {
      const loc = packer.locate(sha(body))!;
      expect(Buffer.from(await packer.read(loc)).equals(body)).toBe(true);
      expect((await alice.bytes(path)).equals(body)).toBe(true);
    }
    const many = await packer.readMany(locs);
    for (const h of shas) expect(sha(many.get(h)!)).toBe(h);

    // Recovery: the pack tables emptied, the server rebuilds them from the footers at startup.
    const before = new Map(locs.map((l) => [l.sha256, l]));
    server.packer!['o'].db.exec('DELETE FROM pack_entries; DELETE FROM packs;');
    await server.close();
    server = await startTestServer(config);
    started.push(server);
    for (const h of shas) expect(server.packer!.locate(h)).toEqual(before.get(h));
    expect(server.packer!.stats()).toHaveLength(stats.length);
    // And on demand.
    expect(await server.packer!.rebuildFromFooters()).toBe(stats.length);
    for (const h of shas) expect(server.packer!.locate(h)).toEqual(before.get(h));

    // Liveness and repack: alice deletes half her files; bob still holds f0 and f1.
    const alice2 = new TestClient(server.url, alice['token'] as string);
    for (let i = 0; i < 30; i += 2) {
      const [r] = await alice2.ops({ op: 'delete', path: `d/f${i}.bin` });
      expect(r?.status).toBe('applied');
    }
    const dead = server.packer!.stats();
    const deadBytes = dead.reduce((n, s) => n + s.deadBytes, 0);
    const expectedDead = Object.entries(files)
      .filter(([p]) => Number(/f(\d+)/.exec(p)![1]) % 2 === 0 && p !== 'd/f0.bin')
      .reduce((n, [, b]) => n + b.length, 0);
    expect(deadBytes).toBe(expectedDead); // pseudo-random content is stored, not deflated
    const victim = dead.find((s) => s.deadBytes > 0)!;
    expect(await server.packer!.repack(victim.packId, () => false)).toBeUndefined();
    const into = await server.packer!.repack(victim.packId, (s) => s.deadBytes > 0);
    expect(into).toBeTruthy();
    expect(server.packer!.stats(victim.packId)).toHaveLength(0);
    expect(server.packer!.stats(into).at(0)?.deadBytes).toBe(0);
    await expect(server.packer!['o'].objects.stat(packKey(victim.packId))).rejects.toThrow();
    const live = Object.entries(files).filter(
      ([p]) => Number(/f(\d+)/.exec(p)![1]) % 2 === 1 || p === 'd/f0.bin',
    );
    for (const [, body] of live) {
      const loc: PackLocation = server.packer!.locate(sha(body))!;
      expect(Buffer.from(await server.packer!.read(loc)).equals(body)).toBe(true);
    }
    for (const [path, body] of live.filter(([p]) => p !== 'd/f0.bin'))
      expect((await alice2.bytes(path)).equals(body)).toBe(true);
  });
});
