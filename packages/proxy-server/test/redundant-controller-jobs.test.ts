/**
 * The redundant tier's controller-only jobs handed from one controller to the next (issues
 * #17, #18), on one real PostgreSQL placement store (store/placement-postgres.ts) and five
 * directory backends, each "instance" with its own pool, tier folder and controller flag:
 * - the scrub schedule's record is the store's: a controller taking over after another
 *   scrubbed neither scrubs again at once nor restarts the interval, and reports the last
 *   scrub and orphan sweep the other one ran;
 * - the orphan sweep deletes only under the lease's fence: a controller whose in-memory flag
 *   still says "controller" (paused past its lease) deletes nothing;
 * - a backend replacement stopped with its controller is resumed by the next one by itself,
 *   from the placement, when the new backend is in that one's config; one without it says so
 *   in its status.
 * Skipped with the reason only where the machine has no PostgreSQL server.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { FsProvider } from '@weft/providers';
import { sweepOrphans } from '@weft/providers/redundant';
import { FencedError } from '../src/cluster/lease.ts';
import type { Provider } from '@weft/providers';
import type { RedundantBackendConfig } from '../src/redundant-tier.ts';
import { PostgresPlacementStore } from '../src/store/placement-postgres.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { pseudoRandom, tempDir } from './helpers.ts';
import { FakeClock, fsTier, HOUR, KiB, maintenanceOf } from './maintenance-shared.ts';
import { adminSql } from './pg-admin.ts';

const bins = postgresBinaries();

describe.skipIf('missing' in bins)(
  `redundant tier controller jobs across instances${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let cluster: RunningPostgres;
    const closers: (() => Promise<void>)[] = [];
    beforeAll(async () => {
      cluster = await startPostgres(adminSql);
    });
    afterEach(async () => {
      for (const c of closers.splice(0).reverse()) await c();
    });
    afterAll(async () => {
      await cluster?.stop();
    });

    /** One "instance" on the shared database and backends: its own pool, tier folder and role. */
    const instance = async (
      url: string,
      roots: readonly string[],
      clock: FakeClock,
      extra: {
        configured?: RedundantBackendConfig[];
        open?: (c: RedundantBackendConfig) => Promise<Provider>;
      } = {},
    ) => {
      const store = await PostgresPlacementStore.open(url, 2);
      const role = { holder: false };
      store.fence = async (tx) => {
        await tx`SELECT 1`;
        if (!role.holder) throw new FencedError('not the controller');
      };
      const dir = await tempDir('weft-ctl-jobs-tier-');
      const tier = await fsTier(roots, { idPrefix: 'd', dir, store, maxShardBytes: 32 * KiB });
      await tier.ready();
      tier.maintains = () => role.holder;
      const m = maintenanceOf(tier, clock, {
        dir,
        schedule: {
          intervalMs: 24 * HOUR,
          bytesPerSecond: 0,
          orphanGraceMs: HOUR,
          orphanDeletesPerSecond: 0,
        },
        ...(extra.open ? { openBackend: extra.open } : {}),
        ...(extra.configured ? { configured: extra.configured } : {}),
        runScheduled: () => role.holder,
      });
      closers.push(async () => {
        await m.close();
        await tier.close();
        await store.close();
      });
      return { tier, m, role };
    };

    const backends = async (): Promise<string[]> => {
      const base = await tempDir('weft-ctl-jobs-');
      closers.push(() => fsp.rm(base, { recursive: true, force: true }));
      return [0, 1, 2, 3, 4].map((i) => nodePath.join(base, `d${i}`));
    };

    /** An unreferenced blob on backend `root`, `ageMs` old on `clock`. */
    const orphan = async (root: string, n: number, ageMs: number, clock: FakeClock): Promise<string> => {
      const id = `${n}`.repeat(32).slice(0, 32);
      const dir = nodePath.join(root, '.weft-redundant', id.slice(0, 2));
      await fsp.mkdir(dir, { recursive: true });
      const file = nodePath.join(dir, `${id}.f0`);
      await fsp.writeFile(file, pseudoRandom(1000, n));
      const at = new Date(clock.t - ageMs);
      await fsp.utimes(file, at, at);
      return file;
    };

    it('theNextControllerContinuesTheScrubScheduleInsteadOfScrubbingAgain', async () => {
      const url = await cluster.createDatabase();
      const roots = await backends();
      const clockA = new FakeClock();
      const clockB = new FakeClock();
      const a = await instance(url, roots, clockA);
      const b = await instance(url, roots, clockB);
      a.role.holder = true;
      await a.tier.write('large', pseudoRandom(100 * KiB, 1));
      const gone = await orphan(roots[2]!, 7, 30 * HOUR, clockA);
      const t0 = clockA.t;
      await a.m.start();
      await b.m.start();
      expect((await b.m.adminStatus()).scrub.last).toBeUndefined();
      expect((await a.m.adminStatus()).scrub.nextRunMs).toBe(t0 + 24 * HOUR);
      // A looks every minute; a look before the interval is up does not scrub.
      expect(clockA.fireNext()).toBe(true);
      await vi.waitFor(async () => expect(clockA.pending).toBe(1));
      expect(a.m.currentJob()).toBeUndefined();
      // A scrubs on its schedule (and sweeps after it), one interval after start.
      clockA.t = t0 + 24 * HOUR;
      expect(clockA.fireNext()).toBe(true);
      await vi.waitFor(() => expect(a.m.currentJob()?.state).toBe('done'), { timeout: 20_000 });
      await a.m.settled();
      const scrubbed = a.m.currentJob()!;
      expect(scrubbed.note).toContain('1 unreferenced blobs deleted');
      await expect(fsp.stat(gone)).rejects.toThrow(/ENOENT/);

      // A is gone; B takes the role. Its timer (set when it started, from no record) fires at
      // the same moment A scrubbed: it reads the record, does not scrub, continues A's schedule.
      await a.m.close();
      a.role.holder = false;
      b.role.holder = true;
      clockB.t = clockA.t;
      expect(clockB.fireNext()).toBe(true);
      await vi.waitFor(async () =>
        expect((await b.m.adminStatus()).scrub.nextRunMs).toBe(scrubbed.finishedMs! + 24 * HOUR),
      );
      expect(b.m.currentJob()).toBeUndefined();
      expect((await b.m.adminStatus()).scrub.last).toMatchObject({ id: scrubbed.id, state: 'done' });
      expect(b.m.lastSweep()).toMatchObject({ report: { removed: 1 } });
      // One interval after A's scrub, B scrubs.
      clockB.t = scrubbed.finishedMs! + 24 * HOUR;
      expect(clockB.fireNext()).toBe(true);
      await vi.waitFor(() => expect(b.m.currentJob()?.state).toBe('done'), { timeout: 20_000 });
      await b.m.settled();
      expect(b.m.currentJob()!.id).not.toBe(scrubbed.id);
      expect(JSON.parse((await b.tier.store.jobRecord('last-scrub'))!)).toMatchObject({
        id: b.m.currentJob()!.id,
      });
    });

    it('aControllerWithoutTheLeaseDeletesNoOrphanWhateverItsFlagSays', async () => {
      const url = await cluster.createDatabase();
      const roots = await backends();
      const clock = new FakeClock();
      const a = await instance(url, roots, clock);
      await a.tier.write('small', pseudoRandom(3 * KiB, 2));
      const files = [
        await orphan(roots[0]!, 1, 2 * HOUR, clock),
        await orphan(roots[3]!, 2, 2 * HOUR, clock),
      ];
      // Paused past its lease: its in-memory flag still says controller, the database does not.
      a.tier.maintains = () => true;
      a.role.holder = false;
      await expect(sweepOrphans(a.tier, { graceMs: HOUR, now: clock.now })).rejects.toBeInstanceOf(
        FencedError,
      );
      for (const f of files) await fsp.stat(f);
      // With the lease it sweeps them, the referenced blobs untouched.
      a.role.holder = true;
      const report = await sweepOrphans(a.tier, { graceMs: HOUR, now: clock.now });
      expect(report).toMatchObject({ orphans: 2, removed: 2 });
      for (const f of files) await expect(fsp.stat(f)).rejects.toThrow(/ENOENT/);
      const chunks: Buffer[] = [];
      for await (const c of await a.tier.read('small')) chunks.push(Buffer.from(c));
      expect(Buffer.concat(chunks).equals(pseudoRandom(3 * KiB, 2))).toBe(true);
    });

    it('aReplacementStoppedWithItsControllerIsResumedByTheNextFromThePlacement', async () => {
      const url = await cluster.createDatabase();
      const roots = await backends();
      const newDir = nodePath.join(nodePath.dirname(roots[0]!), 'd5');
      const d5: RedundantBackendConfig = { id: 'd5', type: 'fs', dir: newDir };
      // A's new backend hangs on its third write until released.
      let entered!: () => void;
      const hung = new Promise<void>((r) => (entered = r));
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let writes = 0;
      const hanging = async (c: RedundantBackendConfig): Promise<Provider> => {
        const p = await FsProvider.open({ root: newDir, portable: false, maxJournal: 100 });
        expect(c.id).toBe('d5');
        return new Proxy(p, {
          get(target, key) {
            if (key === 'write')
              return async (...args: Parameters<Provider['write']>) => {
                if (++writes === 3) {
                  entered();
                  await gate;
                }
                return target.write(...args);
              };
            const v = Reflect.get(target, key) as unknown;
            return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
          },
        });
      };
      const clockA = new FakeClock();
      const a = await instance(url, roots, clockA, { open: hanging });
      a.role.holder = true;
      const files = new Map<string, Buffer>();
      for (let i = 0; i < 6; i++) files.set(`f${i}`, pseudoRandom(3 * KiB + (i % 2) * 90 * KiB, 20 + i));
      for (const [p, data] of files) await a.tier.write(p, data, { size: data.length });
      const onD1 = (await a.tier.store.objectIds('d1')).length;
      expect(onD1).toBeGreaterThanOrEqual(3);
      await a.m.start();
      await a.m.startReplace('d1', d5);
      await hung;
      // A is killed: it loses the role, stops; its late writes are refused by the fence.
      a.role.holder = false;
      const closing = a.m.close();
      release();
      await closing;
      expect(a.m.currentJob()?.state).not.toBe('done');
      expect(JSON.parse((await a.tier.store.jobRecord('replace'))!)).toMatchObject({ from: 'd1', to: 'd5' });
      const left = (await a.tier.store.objectIds('d1')).length;
      expect(left).toBeGreaterThan(0);
      expect(left).toBeLessThan(onD1);

      // C takes the role without d5 in its config: it cannot resume, and says so.
      const clockC = new FakeClock();
      const c = await instance(url, roots, clockC);
      c.role.holder = true;
      await c.m.start();
      const shown = (await c.m.adminStatus()).job;
      expect(shown).toMatchObject({ kind: 'replace', state: 'failed', error: expect.stringContaining('d5') });
      c.role.holder = false;

      // B takes the role with d5 in its config (in place of d1): it resumes by itself.
      const clockB = new FakeClock();
      const b = await instance(url, roots, clockB, {
        configured: [...roots.map((dir, i) => ({ id: `d${i}`, type: 'fs' as const, dir })), d5],
      });
      await b.m.start();
      expect(b.m.currentJob()).toBeUndefined();
      b.role.holder = true;
      // Its look a minute later, now as the controller, finds the record.
      expect(clockB.fireNext()).toBe(true);
      expect(clockB.t).toBe(clockC.t + 60_000);
      await vi.waitFor(() => expect(b.m.currentJob()?.kind).toBe('replace'));
      await vi.waitFor(() => expect(b.m.currentJob()?.state).toBe('done'), { timeout: 20_000 });
      await b.m.settled();
      expect(b.m.currentJob()!.replace).toMatchObject({ from: 'd1', to: 'd5', done: left, total: left });
      expect(await b.tier.store.objectIds('d1')).toEqual([]);
      expect(await b.tier.store.jobRecord('replace')).toBeUndefined();
      for (const [p, data] of files) {
        const chunks: Buffer[] = [];
        for await (const ch of await b.tier.read(p)) chunks.push(Buffer.from(ch));
        expect(Buffer.concat(chunks).equals(data)).toBe(true);
      }
      // Nothing on d1 is needed any more: every location is elsewhere, d5 holds what d1 did.
      const ids = await b.tier.store.objectIds('d5');
      expect(ids.length).toBe(onD1);
    });
  },
);
