/**
 * The redundant tier's placement store on PostgreSQL (store/placement-postgres.ts): the
 * placement store suite (the same the SQLite store runs); fenced writes refused without the
 * controller lease, nothing changed; and a replay of the shared outage log whose controller
 * is "killed" midway (its backend write hangs, its lease passes to another): the next
 * controller finishes the log from what was persisted, each entry leaves the log once, the
 * old controller's late write changes nothing (its fenced bookkeeping is refused), and
 * afterwards a scrub finds nothing missing or corrupt and no blob is unreferenced. Real
 * PostgreSQL (src/testing/postgres.ts) and directory backends; skipped with the reason only
 * where the machine has no PostgreSQL server.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, FsProvider, type Provider } from '@weft/providers';
import { runPlacementStoreSuite } from '@weft/providers/conformance';
import {
  openRedundantProvider,
  type RedundantProvider,
  replayOutageLog,
  scrub,
  sweepOrphans,
} from '@weft/providers/redundant';
import { FencedError } from '../src/cluster/lease.ts';
import { PostgresPlacementStore } from '../src/store/placement-postgres.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { pseudoRandom, tempDir } from './helpers.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();
const KiB = 1024;

describe.skipIf('missing' in bins)(
  `redundant placement store on PostgreSQL${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let cluster: RunningPostgres;
    let suiteUrl: string;
    let admin: postgres.Sql;

    beforeAll(async () => {
      cluster = await startPostgres(adminSql);
      suiteUrl = await cluster.createDatabase();
      // The schema once, so each suite test only empties the tables.
      await (await PostgresPlacementStore.open(suiteUrl)).close();
      admin = postgres(suiteUrl, { max: 1, onnotice: () => undefined });
    });
    afterAll(async () => {
      await admin?.end();
      await cluster?.stop();
    });

    runPlacementStoreSuite('PostgreSQL', async () => {
      await admin`TRUNCATE redundant_entries, redundant_locations, redundant_objects, redundant_outage_log, redundant_backend_state, redundant_job_records RESTART IDENTITY`;
      return PostgresPlacementStore.open(suiteUrl, 2);
    });

    it('refusesFencedWritesWithoutTheLeaseAndChangesNothing', async () => {
      const url = await cluster.createDatabase();
      const store = await PostgresPlacementStore.open(url, 2);
      try {
        const id = 'f'.repeat(32);
        await store.commitFile(
          'x',
          {
            row: {
              id,
              size: 1,
              sha256: 'a'.repeat(64),
              layout: 'replicated',
              k: 1,
              m: 0,
              shard_bytes: 0,
              shard_sha: null,
            },
            locations: [{ slot: 0, backend: 'b0', blob_sha256: 'a'.repeat(64), state: 'owed' }],
          },
          {},
          1,
          [{ backend: 'b0', slot: 0, blobKey: 'k' }],
        );
        let holder = true;
        store.fence = async (tx) => {
          // Inside the write's own transaction, as ClusterRole.fence does.
          await tx`SELECT 1`;
          if (!holder) throw new FencedError('not the controller');
        };
        const [entry] = await store.logPending('b0');
        holder = false;
        await expect(store.setLocation(id, 0, { state: 'ok' }, { fenced: true })).rejects.toBeInstanceOf(
          FencedError,
        );
        await expect(store.logDone(entry!.seq, { fenced: true })).rejects.toBeInstanceOf(FencedError);
        await expect(store.logClear('b0', { fenced: true })).rejects.toBeInstanceOf(FencedError);
        expect((await store.locations(id))[0]!.state).toBe('owed');
        expect(await store.logCount('b0')).toBe(1);
        // A foreground write (a read that found a blob bad) is no background job: not fenced.
        await store.setLocation(id, 0, { state: 'bad' });
        holder = true;
        await store.setLocation(id, 0, { state: 'ok' }, { fenced: true });
        await store.logDone(entry!.seq, { fenced: true });
        expect((await store.locations(id))[0]!.state).toBe('ok');
        expect(await store.logCount()).toBe(0);
      } finally {
        await store.close();
      }
    });

    it('aControllerKilledMidReplayIsFinishedByTheNextWithNothingLostOrDoubled', async () => {
      const url = await cluster.createDatabase();
      const base = await tempDir('weft-placement-pg-');
      const roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(base, `d${i}`));
      const open: RedundantProvider[] = [];
      // One "instance": its own pool on the shared database and its own view of the backends.
      const instance = async (wrap?: (id: string, p: Provider) => Provider) => {
        const store = await PostgresPlacementStore.open(url, 2);
        let holder = false;
        store.fence = async () => {
          if (!holder) throw new FencedError('not the controller');
        };
        const backends = await Promise.all(
          roots.map(async (root, i) => {
            const p = await FsProvider.open({ root, portable: false, maxJournal: 100 });
            return { id: `d${i}`, provider: wrap ? wrap(`d${i}`, p) : p };
          }),
        );
        const tier = openRedundantProvider({
          backends,
          dir: await tempDir('weft-placement-pg-tier-'),
          store,
          thresholdBytes: 64 * KiB,
          maxShardBytes: 32 * KiB,
          probeIntervalMs: 0,
        });
        await tier.ready();
        tier.maintains = () => holder;
        open.push(tier);
        return { tier, lease: (v: boolean) => (holder = v) };
      };
      try {
        const writer = await instance();
        // d0 is down for the writer: what d0 should hold goes to the shared outage log.
        writer.tier.markDown('d0');
        const files = new Map<string, Buffer>();
        for (let i = 0; i < 4; i++) {
          files.set(`small-${i}`, pseudoRandom(3 * KiB + i, i));
          files.set(`large-${i}`, pseudoRandom(100 * KiB + i, 10 + i));
        }
        for (const [p, data] of files) await writer.tier.write(p, data, { size: data.length });
        await writer.tier.remove('large-3');
        files.delete('large-3');
        const logged = await writer.tier.store.logCount('d0');
        // Four striped objects owe d0 a fragment each; the deleted one's delete follows its put.
        expect(logged).toBeGreaterThanOrEqual(5);
        expect((await writer.tier.store.logPending('d0')).map((r) => r.op)).toContain('delete');
        // The writer is no controller: it does not replay (its probe finds d0, nothing happens).
        await writer.tier.probe('d0');
        expect(await writer.tier.store.logCount('d0')).toBe(logged);
        expect(writer.tier.metrics.replayed).toBe(0);

        // The first controller replays until its second write to d0, which never returns.
        let entered!: () => void;
        const hung = new Promise<void>((r) => (entered = r));
        let release!: () => void;
        const gate = new Promise<void>((r) => (release = r));
        let writes = 0;
        const first = await instance((id, p) =>
          id !== 'd0'
            ? p
            : new Proxy(p, {
                get(target, key) {
                  if (key === 'write')
                    return async (...args: Parameters<Provider['write']>) => {
                      if (++writes === 2) {
                        entered();
                        await gate;
                      }
                      return target.write(...args);
                    };
                  const v = Reflect.get(target, key) as unknown;
                  return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
                },
              }),
        );
        first.lease(true);
        const firstRun = replayOutageLog(first.tier, 'd0');
        await hung;
        expect(first.tier.metrics.replayed).toBe(1);
        // "Killed": it stops answering and its lease passes to the next controller.
        first.lease(false);
        const next = await instance();
        next.lease(true);
        await replayOutageLog(next.tier, 'd0');
        expect(await next.tier.store.logCount()).toBe(0);
        // Every entry left the log once: one by the first controller, the rest by the next.
        expect(first.tier.metrics.replayed + next.tier.metrics.replayed).toBe(logged);
        // The old controller wakes up: its write lands (the same bytes), its bookkeeping is refused.
        release();
        await expect(firstRun).rejects.toBeInstanceOf(FencedError);
        expect(first.tier.metrics.replayed).toBe(1);

        // Nothing referenced is missing, nothing is corrupt, no blob is unreferenced.
        const report = await scrub(next.tier, { repair: false });
        expect(report).toMatchObject({ missing: 0, corrupt: 0, skipped: 0, unrepairable: 0 });
        expect(report.objects).toBe(files.size);
        const swept = await sweepOrphans(next.tier, { graceMs: 0, dryRun: true });
        expect(swept.orphans).toBe(0);
        for (const id of await next.tier.store.objectIds())
          for (const l of await next.tier.store.locations(id)) expect(l.state, `${id}/${l.slot}`).toBe('ok');
        // Every file reads back whole through each instance.
        for (const [p, data] of files) {
          expect((await collect(await writer.tier.read(p))).equals(data), p).toBe(true);
          expect((await collect(await next.tier.read(p))).equals(data), p).toBe(true);
        }
      } finally {
        for (const t of open) await t.close();
        await fsp.rm(base, { recursive: true, force: true });
      }
    });
  },
);
