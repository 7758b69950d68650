/**
 * Packs (issue #16, docs/formats/pack.md) on the embedded object directory and on s3proxy, with
 * the pack index in SQLite, and on the embedded directory with it in PostgreSQL (issue #18; a
 * real cluster, src/testing/postgres.ts, skipped with the reason only where the machine has
 * no PostgreSQL server).
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { ProxyConfigInput } from '../src/config.ts';
import { type PackLocation, packKey } from '../src/store/packs.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, packTiers } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

type Server = Awaited<ReturnType<typeof startTestServer>>;

const pg = postgresBinaries();

function tiers(): (ReturnType<typeof packTiers>[number] & { postgres?: boolean })[] {
  return [
    ...packTiers(`packs-${Date.now()}`),
    {
      name: `embedded, index on PostgreSQL${'missing' in pg ? ` (skipped: ${pg.missing})` : ''}`,
      postgres: true,
    },
  ];
}

const started: Server[] = [];
let cluster: RunningPostgres | undefined;
beforeAll(async () => {
  if (!('missing' in pg)) cluster = await startPostgres(adminSql);
});
afterAll(async () => {
  for (const s of started) await s.stop().catch(() => undefined);
  await cluster?.stop();
});

describe.each(tiers())('packs on $name', ({ objectTier, postgres }) => {
  it.skipIf(postgres && 'missing' in pg)(
    'packs small files after the timeout, reads them by range, rebuilds the index from footers, repacks',
    async () => {
      const dataDir = await tempDir();
      const config: ProxyConfigInput = {
        dataDir,
        packs: { targetBytes: 64 * 1024, timeoutMs: 50 },
        ...(objectTier ? { objectTier } : {}),
        ...(postgres ? { databaseUrl: await cluster!.createDatabase() } : {}),
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
      await vi.waitFor(async () => expect(await packer.pending()).toHaveLength(0), {
        timeout: 20_000,
        interval: 50,
      });

      const shas = [...Object.values(files).map((b) => sha(b)), sha('bob')];
      const locs: PackLocation[] = [];
      for (const h of shas) locs.push((await packer.locate(h))!);
      expect(locs.every((l) => l !== undefined)).toBe(true);
      const stats = await packer.stats();
      expect(stats.length).toBeGreaterThanOrEqual(2); // 90 KB over a 64 KiB target
      expect(stats.reduce((n, s) => n + s.entries, 0)).toBe(31); // deduplicated across namespaces
      expect(stats.every((s) => s.deadBytes === 0)).toBe(true);
      for (const [path, body] of Object.entries(files)) {
        const loc = (await packer.locate(sha(body)))!;
        expect(Buffer.from(await packer.read(loc)).equals(body)).toBe(true);
        expect((await alice.bytes(path)).equals(body)).toBe(true);
      }
      const many = await packer.readMany(locs);
      for (const h of shas) expect(sha(many.get(h)!)).toBe(h);

      // Recovery: the pack tables emptied, the server rebuilds them from the footers at startup.
      const before = new Map(locs.map((l) => [l.sha256, l]));
      await server.packer!['o'].index.clear();
      await server.close();
      server = await startTestServer(config);
      started.push(server);
      for (const h of shas) expect(await server.packer!.locate(h)).toEqual(before.get(h));
      expect(await server.packer!.stats()).toHaveLength(stats.length);
      // And on demand.
      expect(await server.packer!.rebuildFromFooters()).toBe(stats.length);
      for (const h of shas) expect(await server.packer!.locate(h)).toEqual(before.get(h));

      // Liveness and repack: alice deletes half her files; bob still holds f0 and f1.
      const alice2 = new TestClient(server.url, alice['token'] as string);
      for (let i = 0; i < 30; i += 2) {
        const [r] = await alice2.ops({ op: 'delete', path: `d/f${i}.bin` });
        expect(r?.status).toBe('applied');
      }
      const dead = await server.packer!.stats();
      const deadBytes = dead.reduce((n, s) => n + s.deadBytes, 0);
      const expectedDead = Object.entries(files)
        .filter(([p]) => Number(/f(\d+)/.exec(p)![1]) % 2 === 0 && p !== 'd/f0.bin')
        .reduce((n, [, b]) => n + b.length, 0);
      expect(deadBytes).toBe(expectedDead); // pseudo-random content is stored, not deflated
      const victim = dead.find((s) => s.deadBytes > 0)!;
      expect(await server.packer!.repack(victim.packId, () => false)).toBeUndefined();
      const into = await server.packer!.repack(victim.packId, (s) => s.deadBytes > 0);
      expect(into).toBeTruthy();
      expect(await server.packer!.stats(victim.packId)).toHaveLength(0);
      expect((await server.packer!.stats(into)).at(0)?.deadBytes).toBe(0);
      await expect(server.packer!['o'].objects.stat(packKey(victim.packId))).rejects.toThrow();
      const live = Object.entries(files).filter(
        ([p]) => Number(/f(\d+)/.exec(p)![1]) % 2 === 1 || p === 'd/f0.bin',
      );
      for (const [, body] of live) {
        const loc: PackLocation = (await server.packer!.locate(sha(body)))!;
        expect(Buffer.from(await server.packer!.read(loc)).equals(body)).toBe(true);
      }
      for (const [path, body] of live.filter(([p]) => p !== 'd/f0.bin'))
        expect((await alice2.bytes(path)).equals(body)).toBe(true);
    },
  );
});
