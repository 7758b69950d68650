/**
 * `weft-proxy cluster` end to end (src/cluster/supervisor.ts): the command runs two instances
 * on a real PostgreSQL (src/testing/postgres.ts) as child processes, adds a third when both are
 * congested (Eq. 7) and drains it when all are idle (Eq. 8), runs the operator hook on both,
 * and restarts a child killed with SIGKILL. The load figures are injected through the config:
 * a declared capacity of 4 kB/s per instance, which scraping /metrics a few times a second
 * exceeds, and which nothing exceeds once the scraping stops. Heartbeats, windows and the
 * sustain and cooldown times are scaled down (200 ms, 1 s) so the test takes seconds.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { createInterface } from 'node:readline';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { liveInstances } from '../src/cluster/registry.ts';
import { connect, migratePostgres, type Sql } from '../src/store/postgres-db.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { tempDir } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();
const BIN = nodePath.resolve(import.meta.dirname, '../bin/weft-proxy.mjs');

describe.skipIf('missing' in bins)(
  `weft-proxy cluster${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let pg: RunningPostgres;
    let dir: string;
    let sql: Sql;
    let proc: ChildProcess | undefined;
    const lines: string[] = [];

    beforeAll(async () => {
      pg = await startPostgres(adminSql);
      const databaseUrl = await pg.createDatabase();
      sql = connect(databaseUrl, 1);
      await migratePostgres(sql);
      dir = await tempDir('weft-cluster-cmd-');
      await fsp.writeFile(
        nodePath.join(dir, 'proxy.json'),
        JSON.stringify({
          databaseUrl,
          dataDir: nodePath.join(dir, 'data'),
          adminToken: 'wfa_cluster-command-test',
          logLevel: 'warn',
          shares: { enabled: false },
          cluster: {
            heartbeatMs: 200,
            aliveMs: 3000,
            windowMs: 1000,
            capacityBps: 4000,
            thetaCongested: 0.2,
            thetaIdle: 0.7,
            sustainMs: 600,
            cooldownMs: 600,
            drainTimeoutMs: 30_000,
            onScale: `echo "$WEFT_SCALE $WEFT_SCALE_INSTANCE $WEFT_SCALE_COUNT" >> ${nodePath.join(dir, 'hook.log')}`,
          },
        }),
      );
    });
    afterAll(async () => {
      if (proc && proc.exitCode === null) proc.kill('SIGKILL');
      await sql?.end();
      await pg?.stop();
      if (dir) await fsp.rm(dir, { recursive: true, force: true });
    });

    async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, ms = 60_000) {
      const end = Date.now() + ms;
      for (;;) {
        const v = await fn();
        if (v !== undefined) return v;
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}; output:\n${lines.join('\n')}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
    const line = (re: RegExp, from = 0) =>
      until(
        String(re),
        () =>
          lines
            .slice(from)
            .map((l) => re.exec(l))
            .find((m) => m) ?? undefined,
      );
    const live = () => liveInstances(sql, 3000);

    it('addsUnderLoadDrainsWhenIdleAndRestartsACrashedInstance', { timeout: 120_000 }, async () => {
      proc = spawn(
        process.execPath,
        [BIN, 'cluster', '--instances', '2', '--max', '3', '--config', nodePath.join(dir, 'proxy.json')],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      createInterface({ input: proc.stdout! }).on('line', (l) => lines.push(l));
      createInterface({ input: proc.stderr! }).on('line', (l) => lines.push(`stderr: ${l}`));
      const rows = await until('two instances', async () => {
        const r = await live();
        return r.length === 2 && r.every((x) => x.url) ? r : undefined;
      });
      expect(rows.map((r) => r.state)).toEqual(['active', 'active']);

      // Load on both: every instance congested → a third is added.
      let loading = true;
      const load = (async () => {
        while (loading) {
          const urls = (await live()).map((r) => r.url);
          await Promise.all(
            urls.map((u) =>
              fetch(`${u}/metrics`).then(
                (r) => r.text(),
                () => '',
              ),
            ),
          );
          await new Promise((r) => setTimeout(r, 150));
        }
      })();
      const added = await line(/^cluster: adding (\S+): all 2 congested/);
      const third = added[1]!;
      await until('three instances', async () => ((await live()).length === 3 ? true : undefined));
      loading = false;
      await load;

      // Idle: the newest (all declare the same BW_o) is drained, then stopped; two remain.
      const drainAt = lines.length;
      expect((await line(/^cluster: draining (\S+): all 3 idle/, drainAt))[1]).toBe(third);
      await line(new RegExp(`^cluster: stopped ${third}`), drainAt);
      await until('two again', async () => ((await live()).length === 2 ? true : undefined));
      const hook = await until('hook log', async () => {
        const t = await fsp.readFile(nodePath.join(dir, 'hook.log'), 'utf8').catch(() => '');
        return t.includes('down') ? t : undefined;
      });
      expect(hook.trim().split('\n')).toEqual([`up ${third} 3`, `down ${third} 2`]);

      // A child killed with SIGKILL comes back with the same id.
      const victim = rows[0]!.id;
      const pid = Number((await line(new RegExp(`^cluster: started ${victim} \\(pid (\\d+)\\)`)))[1]);
      const before = lines.length;
      process.kill(pid, 'SIGKILL');
      await line(new RegExp(`^cluster: ${victim} exited \\(SIGKILL\\): restarting`), before);
      await line(new RegExp(`^cluster: started ${victim} \\(pid \\d+\\)`), before);
      await until('victim back', async () => {
        const r = (await live()).find((x) => x.id === victim);
        return r && r.startedMs > rows[0]!.startedMs ? r : undefined;
      });
      // No scaling happened meanwhile (one instance restarting is not a reason to add).
      expect(lines.filter((l) => l.startsWith('cluster: adding'))).toHaveLength(1);

      const exited = new Promise<number | null>((r) => proc!.once('exit', (code) => r(code)));
      proc.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(await live()).toEqual([]);
    });
  },
);
