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
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, uploadLarge } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

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
      expect(r).toMatchObject({ preferred: 'solo', controller: null });
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
    let cluster: RunningPostgres;
    let shared: string;
    let databaseUrl: string;
    let tiers: Record<string, unknown>;

    beforeAll(async () => {
      cluster = await startPostgres(adminSql);
      databaseUrl = await cluster.createDatabase();
      shared = await tempDir('weft-cluster-');
      tiers = {
        databaseUrl,
        fsTierDir: nodePath.join(shared, 'fs'),
        objectTier: { type: 'fs' as const, dir: nodePath.join(shared, 'objects') },
        adminToken: 'wfa_shared-admin-token',
      };
    });
    afterAll(async () => {
      await cluster?.stop();
      await fsp.rm(shared, { recursive: true, force: true });
    });

    const cfg = (id: string, cluster: Record<string, unknown>) => ({
      ...tiers,
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

        // A new transfer opened on 'small' names 'big'; one opened on 'big' stays there.
        const open = (c: TestClient, path: string) =>
          c.json<TransferState>('POST', '/v1/transfers', {
            path,
            size: 3 * MiB,
            sha256: sha(path),
            mtimeMs: 1,
          });
        expect((await open(onSmall, 'a.bin')).preferred).toEqual({ id: 'big', url: big.url });
        expect((await open(onBig, 'b.bin')).preferred).toBeUndefined();

        // A real upload through 'big' uses up its bandwidth (MiBs a second against its declared
        // 400 kB/s): while it runs, 'small' has more available and transfers are steered there.
        const data = pseudoRandom(24 * MiB, 7);
        let ended: number | undefined;
        const upload = uploadLarge(onBig, 'load.bin', data).finally(() => (ended = Date.now()));
        const steered = await until('steering to small', async () => {
          const t = await open(onBig, 'c.bin');
          if (t.preferred?.id === 'small') return t;
          // Its bytes stay in big's 1 s window for a while after it ends.
          if (ended !== undefined && Date.now() - ended > 3000)
            throw new Error('the upload ended long before big was seen loaded');
          return undefined;
        });
        expect(steered.preferred).toEqual({ id: 'small', url: small.url });
        expect((await upload).status).toBe('applied');

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
        const sql = postgres(databaseUrl, { max: 1, onnotice: () => undefined });
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
      const url = await cluster.createDatabase();
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
