/**
 * Random operation storms (create, modify, rename, move folders, delete) on two devices
 * at once converge to identical trees with nothing lost: every version a device held that
 * the other side had not seen is present at the end, in place or as a conflicted copy.
 */
import { afterEach, describe, expect, inject, it } from 'vitest';
import {
  type Device,
  type TestProxy,
  localTree,
  prng,
  remoteTree,
  settle,
  sorted,
  startDevice,
  startTestProxy,
} from '../src/harness.ts';
import { randomOp, unsyncedContents } from '../src/storm-ops.ts';

describe('operation storms', () => {
  let proxy: TestProxy | undefined;
  const devices: Device[] = [];

  afterEach(async () => {
    for (const d of devices.splice(0)) await d.stop();
    await proxy?.close();
  });

  // Live: both engines also react to the server's feed (the real WebSocket) in the
  // background, racing the storm's edits (timing-dependent: a failing seed may not replay
  // exactly). Interleaved storms — each device syncing only when told, one history per seed —
  // run by the hundred against the in-memory server: packages/core/test/fake-cloud-random.test.ts.
  const seeds = process.env.WEFT_FULL ? [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] : [11, 12, 13];
  const modes = ['live'] as const;
  // The object tier (fs default or s3proxy) alternates with the seed: both are covered.
  const cases = modes.flatMap((mode) => seeds.map((seed) => [mode, seed, seed % 2 ? 'fs' : 's3'] as const));
  it.each(cases)(
    'two devices converge with nothing lost (%s, seed %i, object tier %s)',
    async (mode, seed, tier) => {
      proxy = await startTestProxy(tier === 'fs' ? 'fs' : inject('s3'));
      const log: string[] = [];
      const traced = (who: string) => (event: string, detail: unknown) =>
        log.push(`${who} ${event} ${JSON.stringify(detail)}`);
      const engine = { liveFeed: mode === 'live' };
      devices.push(
        await startDevice(proxy, 'laptop', {
          engine: { ...engine, trace: process.env.WEFT_DEBUG ? traced('A') : undefined },
        }),
        await startDevice(proxy, 'desktop', {
          engine: { ...engine, trace: process.env.WEFT_DEBUG ? traced('B') : undefined },
        }),
      );
      const [a, b] = devices as [Device, Device];
      const rnd = prng(seed);
      for (let round = 0; round < 12; round++) {
        for (let i = 0; i < 6; i++) await randomOp(a, rnd, `A${round}.${i}`, log);
        for (let i = 0; i < 6; i++) await randomOp(b, rnd, `B${round}.${i}`, log);
        // Sometimes sync in between, in a random order, so edits interleave with pulls.
        if (rnd() < 0.6) {
          const d = rnd() < 0.5 ? a : b;
          log.push(`${d === a ? 'A' : 'B'} SYNC`);
          await d.engine.syncNow();
        }
      }
      // Measure at a quiet moment: no pass running on either device (a pass caught between
      // writing a download and recording it would make synced content look unsynced).
      const quiesce = async (): Promise<void> => {
        a.engine.pause();
        b.engine.pause();
        await a.engine.waitIdle();
        await b.engine.waitIdle();
      };
      await quiesce();
      const mustSurvive = new Set([...(await unsyncedContents(a)), ...(await unsyncedContents(b))]);
      const beforeA = await localTree(a.folder);
      const beforeB = await localTree(b.folder);
      a.engine.resume();
      b.engine.resume();
      log.push('SETTLE');
      await settle([a, b]);
      await quiesce();
      const ta = await localTree(a.folder);
      const tb = await localTree(b.folder);
      if (process.env.WEFT_DEBUG) {
        const show = (m: Map<string, string>): string =>
          sorted(m)
            .map(([k, v]) => `${k}=${v.slice(0, 6)}`)
            .join(' ');
        process.stderr.write(`A: ${show(ta)}\nB: ${show(tb)}\nR: ${show(await remoteTree(a.client))}\n`);
        process.stderr.write(
          `A ops ${JSON.stringify(a.engine.journal.pendingOps())}\nB ops ${JSON.stringify(b.engine.journal.pendingOps())}\n`,
        );
        let cur = 0;
        for (;;) {
          const page = await a.client.changes(cur);
          for (const c of page.changes) process.stderr.write(`FEED ${JSON.stringify(c)}\n`);
          cur = page.cursor;
          if (!page.hasMore) break;
        }
        process.stderr.write(
          `A rows ${JSON.stringify(a.engine.journal.allFiles().map((r) => [r.path, r.hash?.slice(0, 6), r.syncedRev, r.syncedHash?.slice(0, 6)]))}\n`,
        );
        process.stderr.write(
          `B rows ${JSON.stringify(b.engine.journal.allFiles().map((r) => [r.path, r.hash?.slice(0, 6), r.syncedRev, r.syncedHash?.slice(0, 6)]))}\n`,
        );
        process.stderr.write(
          `A status ${JSON.stringify(a.engine.getStatus().recent.slice(0, 200).reverse())}\nB status ${JSON.stringify(b.engine.getStatus().recent.slice(0, 200).reverse())}\n`,
        );
      }
      if (process.env.WEFT_DEBUG)
        process.stderr.write(
          `A error ${String(a.engine.error)}\nB error ${String(b.engine.error)}\n` +
            (a.engine.error as Error | undefined)?.stack +
            '\n',
        );
      if (process.env.WEFT_DEBUG) process.stderr.write(log.join('\n') + '\n');
      expect(sorted(ta)).toEqual(sorted(tb));
      expect(sorted(await remoteTree(a.client))).toEqual(sorted(ta));
      const finalContents = new Set(ta.values());
      const lost = [...mustSurvive].filter((h) => !finalContents.has(h));
      if (process.env.WEFT_DEBUG && lost.length > 0) {
        for (const h of lost) {
          const where = [...beforeA]
            .filter(([, v]) => v === h)
            .map(([k]) => `A:${k}`)
            .concat([...beforeB].filter(([, v]) => v === h).map(([k]) => `B:${k}`));
          process.stderr.write(`LOST ${h.slice(0, 6)} was at ${where.join(', ')}\n`);
        }
      }
      expect(lost).toEqual([]);
    },
  );
});
