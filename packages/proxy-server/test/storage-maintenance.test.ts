/**
 * The proxy's maintenance of a redundant object tier (issue #17, storage-maintenance.ts),
 * on five directory backends with an injected clock and timers (nothing waits on the wall
 * clock): the scrub runs on its schedule, paced to the configured bytes per second, its
 * figures counted in Prometheus metrics; the last run survives a restart and sets the next
 * one; a damaged fragment is found and repaired; one job at a time; close aborts a running
 * scrub; a backend replaced with progress; the orphan sweep after each scrub, paced,
 * counted and remembered (or turned off).
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError } from '../src/errors.ts';
import type { ScrubSchedule, StorageMaintenance } from '../src/storage-maintenance.ts';
import { pseudoRandom, tempDir } from './helpers.ts';
import { FakeClock, fsTier, HOUR, KiB, maintenanceOf } from './maintenance-shared.ts';

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
});

async function rig(schedule: ScrubSchedule = { intervalMs: 24 * HOUR, bytesPerSecond: 0 }, base?: string) {
  const root = base ?? (await tempDir('weft-maint-'));
  const dirs = [0, 1, 2, 3, 4].map((i) => nodePath.join(root, `b${i}`));
  const dir = nodePath.join(root, 'tier');
  const tier = await fsTier(dirs, { idPrefix: 'b', dir, maxShardBytes: 64 * KiB, private: true });
  const clock = new FakeClock();
  const registry = new Registry();
  const m = maintenanceOf(tier, clock, { dir, schedule, registry });
  closers.push(async () => {
    await m.close();
    await tier.close();
  });
  return { root, dirs, tier, clock, registry, m };
}

async function metric(registry: Registry, name: string): Promise<number> {
  const text = await registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line ? Number(line.split(' ').at(-1)) : NaN;
}

/** Let the job's promises run until it ends, firing timers (its pacing sleeps) as they come due. */
async function runJob(m: StorageMaintenance, clock: FakeClock): Promise<void> {
  for (let i = 0; i < 10_000 && m.currentJob()?.state === 'running'; i++) {
    await new Promise((r) => setImmediate(r));
    // No timer due: the job waits on file I/O, which a loaded machine makes slow.
    if (m.currentJob()?.state === 'running' && !clock.fireNext()) await new Promise((r) => setTimeout(r, 5));
  }
  await m.settled();
}

describe('StorageMaintenance', () => {
  it('scrubsOnItsScheduleCountsTheFiguresAndRemembersTheLastRunAcrossARestart', async () => {
    const r = await rig();
    await r.tier.write('small', Buffer.from('hello'));
    await r.tier.write('large', pseudoRandom(200 * KiB, 3));
    const t0 = r.clock.t;
    await r.m.start();
    // Never scrubbed: the first run is one interval after start, not at once.
    expect((await r.m.adminStatus()).scrub.nextRunMs).toBe(t0 + 24 * HOUR);
    expect(r.m.currentJob()).toBeUndefined();
    expect(r.clock.fireNext()).toBe(true);
    expect(r.clock.t).toBe(t0 + 24 * HOUR);
    expect(r.m.currentJob()).toMatchObject({ kind: 'scrub', trigger: 'schedule', state: 'running' });
    await runJob(r.m, r.clock);
    const job = r.m.currentJob()!;
    expect(job).toMatchObject({ state: 'done', scrub: { blobsChecked: 7, missing: 0, corrupt: 0 } });
    expect(await metric(r.registry, 'weft_redundant_scrub_blobs_checked_total')).toBe(7);
    expect(await metric(r.registry, 'weft_redundant_scrub_missing_total')).toBe(0);
    expect(await metric(r.registry, 'weft_redundant_scrub_last_run_timestamp_seconds')).toBe(
      job.finishedMs! / 1000,
    );
    expect(
      (await r.registry.metrics()).includes(
        'weft_redundant_scrub_runs_total{result="done",trigger="schedule"} 1',
      ),
    ).toBe(true);
    // The next one an interval after this one ended.
    expect((await r.m.adminStatus()).scrub).toMatchObject({
      nextRunMs: job.finishedMs! + 24 * HOUR,
      last: { id: job.id },
    });

    // A restart (new maintenance on the same tier folder) keeps that date.
    await r.m.close();
    expect(r.clock.pending).toBe(0);
    const clock2 = new FakeClock();
    clock2.t = job.finishedMs! + HOUR;
    const again = maintenanceOf(r.tier, clock2, {
      dir: nodePath.join(r.root, 'tier'),
      schedule: { intervalMs: 24 * HOUR, bytesPerSecond: 0 },
    });
    closers.push(() => again.close());
    await again.start();
    expect((await again.adminStatus()).scrub.nextRunMs).toBe(job.finishedMs! + 24 * HOUR);
    expect((await again.adminStatus()).scrub.last?.id).toBe(job.id);
  });

  it('pacesTheScrubToTheConfiguredBytesPerSecond', async () => {
    const r = await rig({ intervalMs: 0, bytesPerSecond: 100 * KiB });
    await r.tier.write('large', pseudoRandom(600 * KiB, 4));
    await r.m.start();
    expect((await r.m.adminStatus()).scrub.nextRunMs).toBeUndefined(); // interval 0: no schedule
    const started = r.clock.t;
    r.m.startScrub({}, 'admin');
    await runJob(r.m, r.clock);
    const job = r.m.currentJob()!;
    expect(job.state).toBe('done');
    const bytes = job.scrub!.bytesRead;
    expect(bytes).toBeGreaterThan(600 * KiB);
    // It ended exactly when the bytes read, at 100 KiB/s, allowed (the clock moved only by its sleeps).
    expect(job.finishedMs! - started).toBeCloseTo((bytes / (100 * KiB)) * 1000, 3);
    expect(await metric(r.registry, 'weft_redundant_scrub_bytes_read_total')).toBe(bytes);
  });

  it('findsAndRepairsAMissingFragmentAndRunsOneJobAtATime', async () => {
    const r = await rig();
    const data = pseudoRandom(300 * KiB, 5);
    await r.tier.write('large', data);
    await r.m.start();
    const loc = (await r.tier.store.locations((await r.tier.store.objectOf('large'))!))[2]!;
    const dir = r.dirs[Number(loc.backend.slice(1))]!;
    const blobDir = nodePath.join(dir, '.weft-redundant');
    const [sub] = await fsp.readdir(blobDir);
    const [file] = await fsp.readdir(nodePath.join(blobDir, sub!));
    await fsp.rm(nodePath.join(blobDir, sub!, file!));
    r.m.startScrub({}, 'admin');
    expect(() => r.m.startScrub({}, 'admin')).toThrow(ApiError);
    await expect(
      r.m.startReplace('b0', { id: 'b9', type: 'fs', dir: nodePath.join(r.root, 'b9') }),
    ).rejects.toThrow(/a scrub is running/);
    await runJob(r.m, r.clock);
    expect(r.m.currentJob()).toMatchObject({
      state: 'done',
      scrub: { missing: 1, repaired: 1, unrepairable: 0 },
    });
    expect(await metric(r.registry, 'weft_redundant_scrub_repaired_total')).toBe(1);
    expect(await fsp.readdir(nodePath.join(blobDir, sub!))).toEqual([file]);
    // An operator's scrub also moves the schedule on.
    expect((await r.m.adminStatus()).scrub.nextRunMs).toBe(r.m.currentJob()!.finishedMs! + 24 * HOUR);
  });

  it('closeAbortsARunningScrubAndLeavesNoTimer', async () => {
    const r = await rig({ intervalMs: HOUR, bytesPerSecond: 1 });
    await r.tier.write('large', pseudoRandom(200 * KiB, 6));
    await r.m.start();
    r.m.startScrub({}, 'admin');
    // Paced at 1 byte/s, it sleeps after its first blob (on the fake clock, forever).
    await expect.poll(() => r.clock.pending, { timeout: 30_000 }).toBe(1);
    expect(r.m.currentJob()!.scrub!.blobsChecked).toBe(1);
    await r.m.close();
    expect(r.m.currentJob()).toMatchObject({ state: 'aborted', error: 'the server is shutting down' });
    expect(r.clock.pending).toBe(0);
    expect(await metric(r.registry, 'weft_redundant_scrub_last_run_timestamp_seconds')).toBe(0);
  });

  it('replacesABackendWithProgressAndRefusesBadRequests', async () => {
    const r = await rig();
    const data = pseudoRandom(300 * KiB, 7);
    await r.tier.write('large', data);
    await r.tier.write('small', Buffer.from('x'));
    await r.m.start();
    const onB1 = (await r.tier.store.objectIds('b1')).length;
    await expect(
      r.m.startReplace('nope', { id: 'b9', type: 'fs', dir: nodePath.join(r.root, 'b9') }),
    ).rejects.toThrow(/no backend nope/);
    await expect(
      r.m.startReplace('b1', { id: 'b2', type: 'fs', dir: nodePath.join(r.root, 'b9') }),
    ).rejects.toThrow(/already in the set/);
    const job = await r.m.startReplace('b1', { id: 'b9', type: 'fs', dir: nodePath.join(r.root, 'b9') });
    expect(job).toMatchObject({
      kind: 'replace',
      state: 'running',
      replace: { from: 'b1', to: 'b9', total: onB1 },
    });
    await runJob(r.m, r.clock);
    expect(r.m.currentJob()).toMatchObject({
      state: 'done',
      replace: { done: onB1, total: onB1 },
      note: expect.stringContaining('in place of b1'),
    });
    expect(r.tier.backendIds()).toEqual(['b0', 'b2', 'b3', 'b4', 'b9']);
    const status = await r.m.adminStatus();
    expect(status.backends.find((b) => b.id === 'b9')!.blobs).toBe(onB1);
    expect(status.objects).toMatchObject({ total: 2, whole: 2 });
    expect((await r.registry.metrics()).includes('weft_redundant_replace_objects{of="done"} ' + onB1)).toBe(
      true,
    );
  });

  it('sweepsOrphansAfterEachScrubPacedCountedAndRemembered', async () => {
    const r = await rig({
      intervalMs: 24 * HOUR,
      bytesPerSecond: 0,
      orphanDeletesPerSecond: 2,
      orphanGraceMs: HOUR,
    });
    const data = pseudoRandom(200 * KiB, 7);
    await r.tier.write('large', data);
    // Blobs no placement refers to, as a write killed between its uploads and its commit
    // leaves them: three old ones, and one a minute old when the sweep runs (the test's clock).
    const orphan = async (backend: number, n: number, ageMs: number): Promise<string> => {
      const id = `${n}`.repeat(32).slice(0, 32);
      const dir = nodePath.join(r.dirs[backend]!, '.weft-redundant', id.slice(0, 2));
      await fsp.mkdir(dir, { recursive: true });
      const file = nodePath.join(dir, `${id}.f0`);
      await fsp.writeFile(file, pseudoRandom(1000, n));
      const at = new Date(r.clock.t - ageMs);
      await fsp.utimes(file, at, at);
      return file;
    };
    const old = [await orphan(0, 1, 2 * HOUR), await orphan(1, 2, 2 * HOUR), await orphan(3, 3, 30 * HOUR)];
    const young = await orphan(4, 4, 60_000 - 24 * HOUR); // a minute old when the scrub runs
    await r.m.start();
    expect(r.clock.fireNext()).toBe(true); // the scheduled scrub, then the sweep
    await runJob(r.m, r.clock);
    const job = r.m.currentJob()!;
    expect(job).toMatchObject({
      state: 'done',
      note: expect.stringContaining('3 unreferenced blobs deleted'),
    });
    for (const f of old) await expect(fsp.stat(f)).rejects.toThrow(/ENOENT/);
    await fsp.stat(young);
    // Paced: three deletes at two a second (the clock moved only by the sweep's waits).
    expect(job.finishedMs! - job.startedMs).toBe(1000);
    expect(await metric(r.registry, 'weft_redundant_orphan_sweep_removed_total')).toBe(3);
    expect(await metric(r.registry, 'weft_redundant_orphan_sweep_orphan_bytes_total')).toBe(3000);
    expect(await metric(r.registry, 'weft_redundant_orphan_sweep_young_total')).toBe(1);
    const last = r.m.lastSweep()!;
    expect(await metric(r.registry, 'weft_redundant_orphan_sweep_last_run_timestamp_seconds')).toBe(
      last.finishedMs / 1000,
    );
    // Referenced blobs untouched: the file reads back.
    const chunks: Buffer[] = [];
    for await (const c of await r.tier.read('large')) chunks.push(Buffer.from(c));
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    // The last sweep survives a restart.
    await r.m.close();
    const again = maintenanceOf(r.tier, r.clock, {
      dir: nodePath.join(r.root, 'tier'),
      schedule: { intervalMs: 24 * HOUR, bytesPerSecond: 0 },
      timers: new FakeClock(),
    });
    closers.push(() => again.close());
    await again.start();
    expect(again.lastSweep()).toMatchObject({ finishedMs: last.finishedMs, report: { removed: 3 } });
  });

  it('sweepsNothingWhenTurnedOff', async () => {
    const r = await rig({ intervalMs: 0, bytesPerSecond: 0, sweepOrphans: false });
    const dir = nodePath.join(r.dirs[0]!, '.weft-redundant', 'ab');
    await fsp.mkdir(dir, { recursive: true });
    const file = nodePath.join(dir, `ab${'0'.repeat(30)}.r0`);
    await fsp.writeFile(file, 'x');
    const at = new Date(r.clock.t - 10 * HOUR);
    await fsp.utimes(file, at, at);
    await r.m.start();
    r.m.startScrub({}, 'admin');
    await runJob(r.m, r.clock);
    expect(r.m.currentJob()).toMatchObject({ state: 'done' });
    expect(r.m.currentJob()!.note).toBeUndefined();
    await fsp.stat(file);
    expect(r.m.lastSweep()).toBeUndefined();
  });
});
