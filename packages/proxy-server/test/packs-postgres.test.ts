/**
 * Packs with several proxy processes on one PostgreSQL (issue #18): two servers sharing one
 * database, one filesystem tier and one object tier, packing on (fsCopy 'drop', so a read
 * must come from the pack). Both flush at once: every content lands in exactly one pack; a
 * file uploaded through one server is read, packed, through the other; both repack the same
 * pack at once: one does it; a stub one server wrote is recovered by the next controller;
 * the index emptied is rebuilt from the footers; a user's objects (the storage health view)
 * are read from the shared pack index; /v1/cost answers per user from the shared ledger.
 * A real cluster (src/testing/postgres.ts), skipped with the reason only where the machine
 * has no PostgreSQL server.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CostResponse } from '@weft/wire';
import { PostgresPackIndex } from '../src/store/pack-index-postgres.ts';
import { type PackLocation, packKey } from '../src/store/packs.ts';
import { userObjectKeys } from '../src/store/user-objects.ts';
import { postgresBinaries } from '../src/testing/postgres.ts';
import { pseudoRandom, sha, startTestServer, TestClient } from './helpers.ts';
import { type SharedStorage, startSharedStorage } from './pg-shared.ts';

const bins = postgresBinaries();
type Server = Awaited<ReturnType<typeof startTestServer>>;

describe.skipIf('missing' in bins)(
  `packs with two proxy servers on one PostgreSQL${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let storage: SharedStorage | undefined;
    let config: Parameters<typeof startTestServer>[0];
    const servers: Server[] = [];
    const start = async (): Promise<Server> => {
      const s = await startTestServer(config);
      servers.push(s);
      return s;
    };

    beforeAll(async () => {
      storage = await startSharedStorage('weft-pg-packs-');
      config = {
        ...storage.tiers,
        // No timer and no target reached: the test flushes, both servers at the same moment.
        packs: { targetBytes: 64 * 1024 * 1024, timeoutMs: 2_000_000_000, gcIntervalMs: 0, fsCopy: 'drop' },
      };
    });
    afterAll(async () => {
      for (const s of servers) await s.stop().catch(() => undefined);
      await storage?.stop();
    });

    it('packsEachContentOnceReadsItThroughTheOtherServerRepacksOnceAndRebuildsFromFooters', async () => {
      const one = await start();
      const two = await start();
      const alice = await TestClient.enrol(one, 'alice');
      const bob = await TestClient.enrol(two, 'bob');
      const files: Record<string, Buffer> = {};
      for (let i = 0; i < 40; i++) files[`d/f${i}.bin`] = pseudoRandom(3000 + i, i + 1);
      for (const r of await alice.putSmall(files)) expect(r.result.status).toBe('applied');
      // bob, through the other server, holds two of alice's contents and one of his own.
      await bob.putSmall({ 'b/x.bin': files['d/f0.bin']!, 'b/y.bin': files['d/f1.bin']!, 'b/z.txt': 'bob' });
      const contents = new Set([...Object.values(files).map((b) => sha(b)), sha('bob')]);

      // Both flush at once: each packs only what it claimed.
      const [p1, p2] = await Promise.all([one.packer!.flush(), two.packer!.flush()]);
      expect(p1 + p2).toBeGreaterThanOrEqual(1);
      const stats = await two.packer!.stats();
      expect(stats).toHaveLength(p1 + p2);
      expect(stats.reduce((n, s) => n + s.entries, 0)).toBe(contents.size); // none packed twice
      expect(await one.packer!.pending()).toEqual([]);
      const before = new Map<string, PackLocation>();
      for (const h of contents) before.set(h, (await one.packer!.locate(h))!);
      expect([...before.values()].every((l) => l !== undefined)).toBe(true);

      // The copies were dropped for stubs; alice's files read through the other server come
      // from the packs (fs_dropped is on PostgreSQL), whole and by range.
      const onFs = (p: string): Promise<Buffer> =>
        fsp.readFile(nodePath.join(storage!.dir, 'fs', 'ns', 'alice', p));
      expect((await onFs('d/f5.bin')).subarray(0, 12).toString()).toBe('WEFTPACKED1\n');
      const aliceOnTwo = new TestClient(two.url, alice.token);
      for (const [path, body] of Object.entries(files))
        expect((await aliceOnTwo.bytes(path)).equals(body)).toBe(true);
      const ranged = await aliceOnTwo.get('d/f7.bin', 'bytes=10-19');
      expect(ranged.status).toBe(206);
      expect(Buffer.from(await ranged.arrayBuffer()).equals(files['d/f7.bin']!.subarray(10, 20))).toBe(true);

      // The storage health view's objects of a user (its small files' packs) come from the
      // pack index on PostgreSQL: the server's own SQLite file has no packs (it was read there).
      const indexSql = (await import('postgres')).default(config!.databaseUrl!, {
        max: 1,
        onnotice: () => undefined,
      });
      try {
        const objects = await userObjectKeys(two.store.meta, new PostgresPackIndex(indexSql), 'alice');
        const expected = new Map<string, number>();
        for (const b of Object.values(files)) {
          const key = packKey(before.get(sha(b))!.packId);
          expected.set(key, (expected.get(key) ?? 0) + 1);
        }
        expect(objects).toEqual(expected);
      } finally {
        await indexSql.end();
      }

      // Per-user cost from the shared ledger: sampled by one, answered by the other.
      await one.cost.sample();
      const cost = await aliceOnTwo.json<CostResponse>('GET', '/v1/cost');
      const aliceBytes = Object.values(files).reduce((n, b) => n + b.length, 0);
      expect(cost.mine.fsBytes).toBe(aliceBytes);
      expect(cost.proxy.objectsBytes).toBe(stats.reduce((n, s) => n + s.size, 0));
      expect(cost.proxy.requests.put).toBeGreaterThan(0);

      // alice deletes half her files; both servers repack the same pack at once: one does.
      for (let i = 0; i < 40; i += 2) {
        const [r] = await alice.ops({ op: 'delete', path: `d/f${i}.bin` });
        expect(r?.status).toBe('applied');
      }
      const dead = (await one.packer!.stats()).find((s) => s.deadBytes > 0)!;
      expect(dead).toBeDefined();
      const outcomes = await Promise.all([
        one.packer!.repackNow(dead.packId),
        two.packer!.repackNow(dead.packId),
      ]);
      expect(outcomes.filter((o) => o !== undefined)).toHaveLength(1);
      const after = await two.packer!.stats();
      expect(after).toHaveLength(stats.length); // the old pack gone, one new one
      expect(after.find((s) => s.packId === dead.packId)).toBeUndefined();
      for (let i = 1; i < 40; i += 2)
        expect((await aliceOnTwo.bytes(`d/f${i}.bin`)).equals(files[`d/f${i}.bin`]!)).toBe(true);
      expect((await new TestClient(one.url, bob.token).bytes('b/x.bin')).equals(files['d/f0.bin']!)).toBe(
        true,
      );

      // A kill -9 between a stub's rename and its index update: the index keeps the revision
      // from before the stub and has lost the content's fs_dropped row. The controller's
      // reconciliation (on gaining the role: both stopped, a third started) recovers the stub
      // one of the others wrote — the stub key is shared through PostgreSQL.
      const live = new Map<string, PackLocation>();
      for (const h of contents) {
        const l = await two.packer!.locate(h);
        if (l) live.set(h, l);
      }
      const sql = (await import('postgres')).default(config!.databaseUrl!, {
        max: 1,
        onnotice: () => undefined,
      });
      try {
        await sql`UPDATE entries SET fs_revision = 'stale' WHERE user_id = 'alice' AND path = 'd/f3.bin'`;
        await sql`DELETE FROM fs_dropped WHERE sha256 = ${sha(files['d/f3.bin']!)}`;
      } finally {
        await sql.end();
      }
      await one.close();
      await two.close();
      const three = await start();
      const aliceOnThree = new TestClient(three.url, alice.token);
      await vi.waitFor(
        async () => {
          const st = await aliceOnThree.json<{ fsRevision?: string; sha256: string }>(
            'GET',
            '/v1/stat?path=d%2Ff3.bin',
          );
          expect(st.sha256).toBe(sha(files['d/f3.bin']!));
          expect(await three.packer!['o'].index.droppedLocations([st.sha256])).toHaveLength(1);
        },
        { timeout: 30_000, interval: 200 },
      );
      expect((await aliceOnThree.bytes('d/f3.bin')).equals(files['d/f3.bin']!)).toBe(true);

      // The index emptied (through one server) is rebuilt from the packs' footers by another.
      const four = await start();
      await three.packer!['o'].index.clear();
      expect(await four.packer!.locate(sha(files['d/f1.bin']!))).toBeUndefined();
      expect(await four.packer!.rebuildFromFooters()).toBe(after.length);
      for (const [h, l] of live) expect(await three.packer!.locate(h)).toEqual(l);
      expect((await new TestClient(four.url, alice.token).bytes('d/f9.bin')).equals(files['d/f9.bin']!)).toBe(
        true,
      );
    }, 180_000); // four servers started in turn: minutes on a loaded 2-core machine
  },
);
