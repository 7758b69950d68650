/**
 * Draining an instance without SQL (issue #18; http/cluster.ts, cluster/admin-cli.ts): the
 * admin routes POST /v1/admin/cluster/instances/{id}/drain and …/activate, sent to any
 * instance, change any live instance's state; a drained instance is no longer steered new
 * transfers (its own answer steers them to another), its heartbeat keeps the state the row
 * says, and `weft-proxy cluster drain|activate` does the same from the command line; the
 * supervisor keeps an instance it was draining when the operator activates it again. Bad
 * input (no admin token, a device token, an unknown or malformed id) changes nothing.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterInstanceChange, ClusterInstancesResponse, TransferState } from '@weft/wire';
import pino from 'pino';
import { clusterAdminCommand } from '../src/cluster/admin-cli.ts';
import { liveInstances, setInstanceState } from '../src/cluster/registry.ts';
import { ClusterSupervisor } from '../src/cluster/supervisor.ts';
import { parseConfig } from '../src/config.ts';
import { connect, migratePostgres } from '../src/store/postgres-db.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { sha, startTestServer, tempDir, TestClient } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();
const ADMIN = 'wfa_drain-test-admin-token';

const post = (base: string, path: string, token?: string): Promise<Response> =>
  fetch(`${base}${path}`, {
    method: 'POST',
    headers: token ? { authorization: `Bearer ${token}` } : {},
  });

async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('drain and activate on SQLite', () => {
  it('theOneInstanceDrainsAndActivatesAndBadInputChangesNothing', async () => {
    const s = await startTestServer({ databaseUrl: undefined, instanceId: 'solo', adminToken: ADMIN });
    try {
      const c = await TestClient.enrol(s, 'ann');
      const state = () => s.instances.state;
      // Refused: no token, a device's token, a wrong admin token, an unknown or malformed id.
      expect((await post(s.url, '/v1/admin/cluster/instances/solo/drain')).status).toBe(403);
      expect((await post(s.url, '/v1/admin/cluster/instances/solo/drain', c.token)).status).toBe(403);
      expect((await post(s.url, '/v1/admin/cluster/instances/solo/drain', 'wfa_wrong')).status).toBe(403);
      const unknown = await post(s.url, '/v1/admin/cluster/instances/nobody/drain', ADMIN);
      expect(unknown.status).toBe(404);
      expect(await unknown.json()).toMatchObject({ error: { code: 'NOT_FOUND' } });
      expect((await post(s.url, '/v1/admin/cluster/instances/a%20b/drain', ADMIN)).status).toBe(400);
      expect(state()).toBe('active');

      const drained = await post(s.url, '/v1/admin/cluster/instances/solo/drain', ADMIN);
      expect(drained.status).toBe(200);
      expect((await drained.json()) as ClusterInstanceChange).toMatchObject({
        changed: true,
        instance: { id: 'solo', state: 'draining', self: true },
      });
      expect(state()).toBe('draining');
      const again = (await (
        await post(s.url, '/v1/admin/cluster/instances/solo/drain', ADMIN)
      ).json()) as ClusterInstanceChange;
      expect(again.changed).toBe(false);
      const listed = await c.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
      expect(listed.instances[0]).toMatchObject({ id: 'solo', state: 'draining' });
      const back = (await (
        await post(s.url, '/v1/admin/cluster/instances/solo/activate', ADMIN)
      ).json()) as ClusterInstanceChange;
      expect(back).toMatchObject({ changed: true, instance: { state: 'active' } });
      expect(state()).toBe('active');

      const doc = (await (await fetch(`${s.url}/openapi.json`)).json()) as {
        paths: Record<string, { post?: { security: unknown } }>;
      };
      for (const verb of ['drain', 'activate'])
        expect(doc.paths[`/v1/admin/cluster/instances/{id}/${verb}`]?.post?.security).toEqual([
          { admin: [] },
        ]);
    } finally {
      await s.stop();
    }
  });
});

describe.skipIf('missing' in bins)(
  `drain and activate across instances${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let cluster: RunningPostgres;
    let shared: string;
    let one: Awaited<ReturnType<typeof startTestServer>>;
    let two: Awaited<ReturnType<typeof startTestServer>>;

    beforeAll(async () => {
      cluster = await startPostgres(adminSql);
      const databaseUrl = await cluster.createDatabase();
      shared = await tempDir('weft-drain-');
      const tiers = {
        databaseUrl,
        fsTierDir: nodePath.join(shared, 'fs'),
        objectTier: { type: 'fs' as const, dir: nodePath.join(shared, 'objects') },
        adminToken: ADMIN,
        shares: { enabled: false },
        cluster: { heartbeatMs: 100, capacityBps: 1e9 },
      };
      one = await startTestServer({ ...tiers, instanceId: 'one' });
      two = await startTestServer({ ...tiers, instanceId: 'two' });
    });
    afterAll(async () => {
      await one?.stop();
      await two?.stop();
      await cluster?.stop();
      await fsp.rm(shared, { recursive: true, force: true });
    });

    it('anyInstanceDrainsAnotherWhichIsNoLongerSteeredNewTransfersUntilActivated', async () => {
      const c = await TestClient.enrol(one, 'dora');
      const onTwo = new TestClient(two.url, c.token);
      await until('both instances listed', async () => {
        const r = await c.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
        return r.instances.length === 2;
      });
      // Drained through the other instance.
      const res = await post(one.url, '/v1/admin/cluster/instances/two/drain', ADMIN);
      expect(res.status).toBe(200);
      expect((await res.json()) as ClusterInstanceChange).toMatchObject({
        changed: true,
        instance: { id: 'two', state: 'draining', self: false },
      });
      const listed = await c.json<ClusterInstancesResponse>('GET', '/v1/cluster/instances');
      expect(listed.preferred).toBe('one');
      expect(listed.instances.find((i) => i.id === 'two')?.state).toBe('draining');
      // Two learns it at its next heartbeat, keeps it across the following ones, and steers
      // a new transfer to one.
      await until('two to learn it is draining', () => two.instances.state === 'draining');
      const beats = async (n: number): Promise<void> => {
        const since = two.instances.instances().find((i) => i.id === 'two')!.heartbeatMs;
        await until(`${n} heartbeats`, () => {
          const now = two.instances.instances().find((i) => i.id === 'two')!.heartbeatMs;
          return now >= since + n * 100;
        });
      };
      await beats(3);
      expect(two.instances.state).toBe('draining');
      const t = await onTwo.json<TransferState>('POST', '/v1/transfers', {
        path: 'big.bin',
        size: 8 * 1024 * 1024,
        sha256: sha('big'),
        mtimeMs: 1,
      });
      expect(t.preferred?.id).toBe('one');

      // The command line, through one: bad input first, then activate.
      const env = { WEFT_PROXY_ADMIN_TOKEN: ADMIN };
      await expect(clusterAdminCommand('activate', ['nobody', '--server', one.url], env)).rejects.toThrow(
        /404 NOT_FOUND/,
      );
      await expect(clusterAdminCommand('activate', ['two', '--server', one.url], {})).rejects.toThrow(
        /WEFT_PROXY_ADMIN_TOKEN/,
      );
      await expect(
        clusterAdminCommand('activate', ['two', '--server', one.url], { WEFT_PROXY_ADMIN_TOKEN: 'wfa_no' }),
      ).rejects.toThrow(/403 FORBIDDEN/);
      await expect(clusterAdminCommand('activate', ['two'], env)).rejects.toThrow(/--server/);
      expect(two.instances.state).toBe('draining');
      expect(await clusterAdminCommand('activate', ['two', '--server', one.url], env)).toMatch(
        /^instance two \(.*\) is now active$/,
      );
      expect(await clusterAdminCommand('activate', ['two', '--server', one.url], env)).toMatch(
        /already active/,
      );
      await until('two to learn it is active', () => two.instances.state === 'active');
      await beats(3);
      expect(two.instances.state).toBe('active');
      expect(await clusterAdminCommand('drain', ['one', '--server', two.url], env)).toMatch(
        /is now draining/,
      );
      await until('one to learn it is draining', () => one.instances.state === 'draining');
    });

    it('theSupervisorKeepsAnInstanceTheOperatorActivatedWhileItDrained', async () => {
      // `weft-proxy cluster --external` on a database of its own: two idle instances, one
      // drained (Eq. 8), then activated again by the operator before its transfers ended.
      const databaseUrl = await cluster.createDatabase();
      const sql = connect(databaseUrl, 2);
      await migratePostgres(sql);
      for (const id of ['x', 'y'])
        await sql`
          INSERT INTO proxy_instances (id, url, started_ms, heartbeat_ms, available_bps, measured_bps, active_transfers)
          VALUES (${id}, ${`http://${id}.invalid`}, 1, (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::bigint,
                  1000000, 1000000, 1)`;
      const said: string[] = [];
      const supervisor = new ClusterSupervisor({
        config: parseConfig({
          databaseUrl,
          cluster: { aliveMs: 600_000, sustainMs: 0, cooldownMs: 600_000, drainTimeoutMs: 0 },
        }),
        instances: 1,
        max: 3,
        external: true,
        log: pino({ level: 'silent' }),
        say: (line) => said.push(line),
      });
      try {
        await supervisor.tick();
        const drained = (await liveInstances(sql, 600_000)).find((r) => r.state === 'draining');
        expect(drained).toBeDefined();
        const id = drained!.id;
        expect(said).toEqual([expect.stringContaining(`draining ${id}`)]);
        expect(await setInstanceState(sql, id, 'active')).toMatchObject({ changed: true });
        // Its transfers end and its drain time is up (0): it is not stopped, being active again.
        await sql`UPDATE proxy_instances SET active_transfers = 0`;
        await supervisor.tick();
        await supervisor.tick();
        expect(said.slice(1)).toEqual([`cluster: ${id} was activated again: kept`]);
      } finally {
        await supervisor.stop();
        await sql.end();
      }
    });
  },
);
