/**
 * One redundant object tier served by two proxy instances on one PostgreSQL (issues #17 and
 * #18): the placement lives in the shared database (store/placement-postgres.ts), so a file
 * written through one instance reads through the other, striped or replicated; a backend
 * down while the non-controller writes leaves entries in the shared outage log, which the
 * controller — and only it — replays once when the backend answers again. Five directory
 * backends (one "goes down" by its folder moving away, as an unmounted volume), real
 * PostgreSQL (src/testing/postgres.ts); skipped with the reason only where the machine has
 * no PostgreSQL server. The controller killed mid-replay: placement-postgres.test.ts.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { collect } from '@weft/providers';
import type { RedundantProvider } from '@weft/providers/redundant';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, uploadLarge } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();
const KiB = 1024;

describe.skipIf('missing' in bins)(
  `a redundant object tier shared by two instances${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let cluster: RunningPostgres;
    let shared: string;
    let roots: string[];
    let one: Awaited<ReturnType<typeof startTestServer>>;
    let two: Awaited<ReturnType<typeof startTestServer>>;
    const tier = (s: typeof one): RedundantProvider => s.objects as RedundantProvider;

    beforeAll(async () => {
      cluster = await startPostgres(adminSql);
      const databaseUrl = await cluster.createDatabase();
      shared = await tempDir('weft-pg-redundant-');
      roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(shared, `d${i}`));
      const config = {
        databaseUrl,
        fsTierDir: nodePath.join(shared, 'fs'),
        adminToken: 'wfa_shared-admin-token',
        // Files from 256 KiB go to the object tier; there, below 512 KiB replicated, else striped.
        smallFileBytes: 256 * KiB,
        objectTier: {
          type: 'redundant' as const,
          backends: roots.map((dir, i) => ({ id: `d${i}`, type: 'fs' as const, dir })),
          thresholdBytes: 512 * KiB,
          maxShardBytes: 128 * KiB,
          probeIntervalMs: 200,
        },
      };
      // `two` starts first and so holds the controller role; `one` takes the writes.
      two = await startTestServer({ ...config, instanceId: 'two' });
      one = await startTestServer({ ...config, instanceId: 'one' });
    });
    afterAll(async () => {
      await one?.stop();
      await two?.stop();
      await cluster?.stop();
      await fsp.rm(shared, { recursive: true, force: true });
    });

    it('aFileWrittenThroughOneReadsThroughTheOther', async () => {
      expect(two.cluster.isController()).toBe(true);
      expect(one.cluster.isController()).toBe(false);
      const a = await TestClient.enrol(one, 'ann', 'a');
      const b = new TestClient(two.url, a.token);
      const striped = pseudoRandom(1536 * KiB + 7, 1);
      const replicated = pseudoRandom(300 * KiB + 3, 2);
      expect((await uploadLarge(a, 'big.bin', striped)).status).toBe('applied');
      expect((await uploadLarge(a, 'mid.bin', replicated)).status).toBe('applied');
      // Read through the other instance first (nothing staged in the shared relay yet).
      expect(sha(await b.bytes('big.bin'))).toBe(sha(striped));
      expect(sha(await b.bytes('mid.bin'))).toBe(sha(replicated));
      // The other instance sees both objects, one of each layout, straight from its tier
      // (beside them, whatever else the proxy keeps there, e.g. signatures).
      const layouts = new Map<number, string>();
      for await (const e of tier(two).list('', { recursive: true })) {
        if (e.kind !== 'file') continue;
        const o = await tier(two).store.object((await tier(two).store.objectOf(e.path))!);
        layouts.set(o!.size, o!.layout);
        const data = await collect(await tier(two).read(e.path));
        expect(e.hash?.value).toBe(sha(data));
      }
      expect(layouts.get(striped.length)).toBe('striped');
      expect(layouts.get(replicated.length)).toBe('replicated');
    });

    it('aWriteTakenWhileABackendIsDownIsReplayedOnceByTheController', async () => {
      const a = await TestClient.enrol(one, 'bob', 'a');
      const before = await tier(one).store.logCount('d0');
      expect(before).toBe(0);
      // d0 goes away (its folder moved, as an unmounted volume): writes through `one` go on.
      await fsp.rename(roots[0]!, `${roots[0]}.away`);
      const files = [pseudoRandom(1024 * KiB, 3), pseudoRandom(1200 * KiB, 4)];
      for (const [i, data] of files.entries())
        expect((await uploadLarge(a, `during-${i}.bin`, data)).status).toBe('applied');
      const logged = await tier(two).store.logCount('d0');
      expect(logged).toBe(files.length);
      expect(tier(one).metrics.loggedWrites).toBe(logged);
      await fsp.rename(`${roots[0]}.away`, roots[0]!);
      // The controller's probe finds d0 again and replays the log the other instance wrote.
      await vi.waitFor(
        async () => {
          expect(await tier(two).store.logCount('d0')).toBe(0);
        },
        { timeout: 30_000, interval: 100 },
      );
      expect(tier(two).metrics.replayed).toBe(logged);
      expect(tier(one).metrics.replayed).toBe(0);
      // d0 holds its fragments again: every location is good, and a read finds d0's blobs.
      for (const id of await tier(one).store.objectIds('d0'))
        for (const l of await tier(one).store.locations(id)) expect(l.state).toBe('ok');
      const onD0 = await fsp.readdir(nodePath.join(roots[0]!, '.weft-redundant'), { recursive: true });
      expect(onD0.filter((f) => /\.f\d+$/.test(String(f))).length).toBeGreaterThanOrEqual(3);
      const b = new TestClient(two.url, a.token);
      for (const [i, data] of files.entries()) expect(sha(await b.bytes(`during-${i}.bin`))).toBe(sha(data));
    });
  },
);
