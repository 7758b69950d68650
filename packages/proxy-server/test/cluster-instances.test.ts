/**
 * The instance registry and steering (issue #18, HyCloud §III-C): two proxy servers sharing one
 * real PostgreSQL (src/testing/postgres.ts), one filesystem tier and one object tier. Each lists
 * both on GET /v1/cluster/instances; a new transfer is steered to the instance with the most
 * available bandwidth (declared capacities, then real uploads that use one up); a draining
 * instance is never preferred; one that stops leaves the list; on SQLite a server lists itself.
 * Heartbeats are 100 ms here (1 s by default) so the test waits little.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterInstancesResponse, TransferState } from '@weft/wire';
import { markDraining } from '../src/cluster/registry.ts';
import { migratePostgres } from '../src/store/postgres-db.ts';
import { postgresBinaries } from '../src/testing/postgres.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, uploadLarge } from './helpers.ts';
import { type SharedStorage, startSharedStorage } from './pg-shared.ts';

const bins = postgresBinaries();
const MiB = 1024 * 1024;

async function until<T>(what: string, fn: () => Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('instance registry on SQLite', () => {
  it('listsOnlyItselfAsPreferredAndDocumentsTheRoute', async () => {
    const s = await startTestServer({ databaseUrl: undefined, instanceId: 'solo' });
    try {
      const c = await TestClient.enrol(s, 'ann');
      const r = await c.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
      expect(r).toMatchObject({ preferred: 'solo', controller: 'solo' });
      expect(r.instances).toEqual([
        expect.objectContaining({ id: 'solo', url: s.url, state: 'active', self: true }),
      ]);
      expect(r.instances[0]!.availableBps).toBe(r.instances[0]!.measuredBps);
      const t = await c.json<TransferState>('POST', '/v1/transfers', {
        path: 'a.bin',
        size: 3 * MiB,
        sha256: sha('x'),
        mtimeMs: 1,
      });
      expect(t.preferred).toBeUndefined();
      expect((await c.json<TransferState>('GET', `/v1/transfers/${t.transferId}`)).preferred).toBeUndefined();
      expect((await new TestClient(s.url, 'nope').req('GET', '/v1/cluster/instances')).status).toBe(401);
      const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as {
        paths: Record<string, { get: { security: unknown } }>;
      };
      expect(doc.paths['/v1/cluster/instances']!.get.security).toEqual([{ device: [] }]);
    } finally {
      await s.stop();
    }
  });
});

describe.skipIf('missing' in bins)(
  `instance registry on PostgreSQL${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let storage: SharedStorage;

    beforeAll(async () => {
      storage = await startSharedStorage('weft-cluster-');
    });
    afterAll(async () => {
      await storage?.stop();
    });

    const cfg = (id: string, cluster: Record<string, unknown>) => ({
      ...storage.tiers,
      instanceId: id,
      cluster: { heartbeatMs: 100, aliveMs: 2000, windowMs: 1000, ...cluster },
    });

    it('bothServersListBothAndSteerToTheMostAvailableBandwidth', async () => {
      // Declared capacities: 'big' has more bandwidth than 'small' while both are idle.
      const KB = 1000;
      const small = await startTestServer(cfg('small', { capacityBps: 200 * KB }));
      const big = await startTestServer(cfg('big', { capacityBps: 400 * KB }));
      try {
        const onSmall = await TestClient.enrol(small, 'ann');
        const onBig = new TestClient(big.url, onSmall.token);
        const both = await until('both instances listed', async () => {
          const r = await onSmall.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
          return r.instances.length === 2 ? r : undefined;
        });
        expect(both.instances.map((i) => [i.id, i.url, i.self, i.state])).toEqual([
          ['small', small.url, true, 'active'],
          ['big', big.url, false, 'active'],
        ]);
        expect(both.instances.find((i) => i.id === 'big')).toMatchObject({
          measuredBps: 400 * KB,
          availableBps: 400 * KB,
        });
        expect(both.preferred).toBe('big');
        const fromBig = await onBig.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
        expect(fromBig.instances.map((i) => [i.id, i.self])).toEqual([
          ['small', false],
          ['big', true],
        ]);
        expect(fromBig.preferred).toBe('big');
        // The controller is whichever of the two holds the lease (pg-migrations/004).
        const controller = await until('a controller', async () => {
          const r = await onSmall.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
          return r.controller ?? undefined;
        });
        expect(['small', 'big']).toContain(controller);

        // A new transfer opened on 'small' names 'big'; one opened on 'big' stays there.
        const open = (c: TestClient, path: string) =>
          c.json<TransferState>('POST', '/v1/transfers', {
            path,
            size: 3 * MiB,
            sha256: sha(path),
            mtimeMs: 1,
          });
        const opened = await open(onSmall, 'a.bin');
        expect(opened.preferred).toEqual({ id: 'big', url: big.url });
        expect((await open(onBig, 'b.bin')).preferred).toBeUndefined();
        // A transfer resumed later (the agent restarted, or failed over) is steered the same
        // way: its state names the instance preferred now, from whichever instance answers.
        const resumed = (c: TestClient) => c.json<TransferState>('GET', `/v1/transfers/${opened.transferId}`);
        const read = await resumed(onSmall);
        expect(read).toMatchObject({ transferId: opened.transferId, receivedBytes: 0, haveObject: false });
        expect(read.preferred).toEqual({ id: 'big', url: big.url });
        expect((await resumed(onBig)).preferred).toBeUndefined();

        // Real uploads through 'big' use up its bandwidth (MiBs a second against its declared
        // 400 kB/s): while they run, 'small' has more available and transfers are steered there.
        let steering = true;
        const uploads = (async () => {
          for (let i = 0; steering; i++) {
            const r = await uploadLarge(onBig, `load${i}.bin`, pseudoRandom(8 * MiB, i + 7));
            expect(r.status).toBe('applied');
          }
        })();
        let seen: unknown;
        const steered = await until(
          'steering to small',
          async () => {
            const t = await open(onBig, 'c.bin');
            seen = await onBig.json('GET', '/v1/cluster/instances');
            return t.preferred?.id === 'small' ? t : undefined;
          },
          30_000,
        ).catch((e: Error) => {
          throw new Error(`${e.message}; last seen ${JSON.stringify(seen)}`);
        });
        steering = false;
        await uploads;
        expect(steered.preferred).toEqual({ id: 'small', url: small.url });

        // Once the window passes, 'big' is idle again and preferred again.
        await until('big idle again', async () => {
          const t = await open(onSmall, 'd.bin');
          return t.preferred?.id === 'big' ? t : undefined;
        });
      } finally {
        await small.stop();
        await big.stop();
      }
    });

    it('aDrainingInstanceIsNeverPreferredAndAStoppedOneLeavesTheList', async () => {
      const a = await startTestServer(cfg('a', { capacityBps: 1 * MiB }));
      const b = await startTestServer(cfg('b', { capacityBps: 8 * MiB }));
      let bStopped = false;
      try {
        const onA = await TestClient.enrol(a, 'bea');
        const list = () => onA.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
        await until('b preferred', async () => ((await list()).preferred === 'b' ? true : undefined));
        const sql = postgres(storage.tiers.databaseUrl, { max: 1, onnotice: () => undefined });
        try {
          expect(await markDraining(sql, 'b')).toBe(true);
          expect(await markDraining(sql, 'nobody')).toBe(false);
        } finally {
          await sql.end();
        }
        const drained = await until('b draining', async () => {
          const r = await list();
          return r.instances.find((i) => i.id === 'b')?.state === 'draining' ? r : undefined;
        });
        expect(drained.preferred).toBe('a');
        // b learns it at its next heartbeat.
        await until('b knows', async () => (b.instances.state === 'draining' ? true : undefined));
        // b itself steers its new transfers to a.
        const onB = new TestClient(b.url, onA.token);
        const t = await onB.json<TransferState>('POST', '/v1/transfers', {
          path: 'x.bin',
          size: 3 * MiB,
          sha256: sha('x'),
          mtimeMs: 1,
        });
        expect(t.preferred).toEqual({ id: 'a', url: a.url });
        await b.stop();
        bStopped = true;
        await until('b gone', async () => ((await list()).instances.length === 1 ? true : undefined));
        expect((await list()).instances.map((i) => i.id)).toEqual(['a']);
      } finally {
        await a.stop();
        if (!bStopped) await b.stop();
      }
    });

    it('migrationsLandingOutOfOrderEachRunOnce', async () => {
      const url = await storage.cluster.createDatabase();
      const dir = await tempDir('weft-pgmig-');
      const sql = postgres(url, { max: 1, onnotice: () => undefined });
      try {
        await fsp.writeFile(nodePath.join(dir, '001_a.sql'), 'CREATE TABLE a (x int);');
        await fsp.writeFile(nodePath.join(dir, '003_c.sql'), 'CREATE TABLE c (x int);');
        expect(await migratePostgres(sql, dir)).toBe(3);
        // 002 lands after 003 was applied: it still runs, and nothing runs twice.
        await fsp.writeFile(nodePath.join(dir, '002_b.sql'), 'CREATE TABLE b (x int);');
        expect(await migratePostgres(sql, dir)).toBe(3);
        expect(await migratePostgres(sql, dir)).toBe(3);
        const v = await sql<{ version: number }[]>`SELECT version FROM schema_migrations ORDER BY version`;
        expect(v.map((r) => r.version)).toEqual([1, 2, 3]);
        // A version this program has no file for was written by a newer one: refused.
        await fsp.rm(nodePath.join(dir, '003_c.sql'));
        await expect(migratePostgres(sql, dir)).rejects.toThrow(/schema 3 is newer/);
      } finally {
        await sql.end();
        await fsp.rm(dir, { recursive: true, force: true });
      }
    });
  },
);
