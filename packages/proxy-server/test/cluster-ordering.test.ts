/**
 * Ordering across proxy instances (issue #18; src/cluster/ordering.ts): two servers on one
 * PostgreSQL, one filesystem tier and one object tier, four writers (two on each) writing,
 * making, moving and deleting the same few paths at once. The op logs of both servers
 * (config opLogFile) are merged and checked the way scheduler.test.ts checks one process:
 * related operations (same path, one inside the other, either end of a move) never ran at
 * once whichever server ran them, and the one that ran first has the smaller change seq —
 * the outcome is a serial order. And the index agrees with the filesystem tier afterwards
 * (reconciliation changes no file), as after any serial order.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FileOp } from '@weft/wire';
import { FencedError } from '../src/cluster/lease.ts';
import { postgresBinaries, type RunningPostgres, startPostgres } from '../src/testing/postgres.ts';
import { startTestServer, tempDir, TestClient } from './helpers.ts';
import { adminSql } from './pg-admin.ts';
import { forwarder } from './tcp-hop.ts';

const bins = postgresBinaries();

interface Logged {
  i: string;
  ns: string;
  p: string[];
  a: number;
  s: number;
  e: number;
  q: number[];
}

const related = (x: string, y: string): boolean => x === y || x.startsWith(y + '/') || y.startsWith(x + '/');

/** Violations of stop-and-wait across the merged logs (empty: none). */
function violations(ops: Logged[]): string[] {
  const out: string[] = [];
  const sorted = [...ops].sort((x, y) => x.s - y.s || x.e - y.e);
  const show = (o: Logged): string => `${o.i} [${o.p.join(' → ')}] ${o.s}–${o.e} seq ${o.q.join(',') || '-'}`;
  for (let m = 0; m < sorted.length; m++)
    for (let n = m + 1; n < sorted.length; n++) {
      const [x, y] = [sorted[m]!, sorted[n]!];
      if (!x.p.some((px) => y.p.some((py) => related(px, py)))) continue;
      if (y.s < x.e) out.push(`ran at once: ${show(x)} and ${show(y)}`);
      else if (
        Math.max(0, ...x.q) > 0 &&
        Math.max(0, ...y.q) > 0 &&
        Math.max(...x.q) >= Math.min(...y.q.filter((q) => q > 0))
      )
        out.push(`applied out of order: ${show(x)} ran first, ${show(y)} has the smaller seq`);
    }
  return out;
}

/** A small deterministic generator (tests repeat). */
function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

const FILES = ['a/f.txt', 'a/b/g.txt', 'c.txt', 'm/f.txt', 'a/b/h.txt'];
const DIRS = ['a', 'a/b', 'm', 'm/b'];
const MOVES: [string, string][] = [
  ['a', 'm'],
  ['m', 'a'],
  ['a/b', 'm/b'],
  ['m/b', 'a/b'],
  ['c.txt', 'a/c.txt'],
  ['a/c.txt', 'c.txt'],
  ['a/f.txt', 'm/f.txt'],
];
const DELETES = ['a/b', 'm', 'c.txt', 'a/f.txt', 'a'];

describe.skipIf('missing' in bins)(
  `ordering across proxy instances${'missing' in bins ? ` (skipped: ${bins.missing})` : ''}`,
  () => {
    let cluster: RunningPostgres;
    let shared: string;
    let one: Awaited<ReturnType<typeof startTestServer>>;
    let two: Awaited<ReturnType<typeof startTestServer>>;
    let tiers: Parameters<typeof startTestServer>[0] & { databaseUrl: string };

    beforeAll(async () => {
      cluster = await startPostgres(adminSql);
      const databaseUrl = await cluster.createDatabase();
      shared = await tempDir('weft-pg-order-');
      tiers = {
        databaseUrl,
        fsTierDir: nodePath.join(shared, 'fs'),
        objectTier: { type: 'fs' as const, dir: nodePath.join(shared, 'objects') },
        adminToken: 'wfa_shared-admin-token',
        shares: { enabled: false },
      };
      one = await startTestServer({
        ...tiers,
        instanceId: 'one',
        opLogFile: nodePath.join(shared, 'one.log'),
      });
      two = await startTestServer({
        ...tiers,
        instanceId: 'two',
        opLogFile: nodePath.join(shared, 'two.log'),
      });
    });
    afterAll(async () => {
      await one?.stop();
      await two?.stop();
      await cluster?.stop();
      await fsp.rm(shared, { recursive: true, force: true });
    });

    it('relatedOperationsThroughTwoServersApplyInOneSerialOrder', async () => {
      const first = await TestClient.enrol(one, 'ord', 'w0');
      const writers = [
        first,
        new TestClient(one.url, (await TestClient.enrol(one, 'ord', 'w1')).token),
        new TestClient(two.url, (await TestClient.enrol(two, 'ord', 'w2')).token),
        new TestClient(two.url, (await TestClient.enrol(two, 'ord', 'w3')).token),
      ];
      await first.ops(...DIRS.map((path): FileOp => ({ op: 'mkdir', path })));
      const N = 30;
      await Promise.all(
        writers.map(async (c, w) => {
          const rnd = prng(17 + w);
          const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)]!;
          for (let i = 0; i < N; i++) {
            const r = rnd();
            if (r < 0.4) await c.putSmall({ [pick(FILES)]: `w${w} #${i}` });
            else if (r < 0.6) {
              const [from, to] = pick(MOVES);
              await c.ops({ op: 'move', from, to });
            } else if (r < 0.8) await c.ops({ op: 'mkdir', path: pick(DIRS) });
            else await c.ops({ op: 'delete', path: pick(DELETES) });
          }
        }),
      );
      const logged: Logged[] = [];
      for (const f of ['one.log', 'two.log'])
        for (const line of (await fsp.readFile(nodePath.join(shared, f), 'utf8')).split('\n'))
          if (line) logged.push(JSON.parse(line) as Logged);
      const ours = logged.filter((o) => o.ns === 'ord');
      // Every operation of both servers was logged, and both servers did take part.
      expect(ours.length).toBe(DIRS.length + writers.length * N);
      expect(new Set(ours.map((o) => o.i))).toEqual(new Set(['one', 'two']));
      expect(violations(ours)).toEqual([]);
      // The index agrees with the filesystem tier, as after any serial order: reconciliation
      // (which takes the tier for the truth) changes no file and no path. (It may re-date a
      // folder whose mtime moved with its children; that is not a disagreement.)
      const index = async (): Promise<string[]> =>
        (await one.store.meta.listEntries('ord', '', true)).map(
          (e) => `${e.path} ${e.kind} ${e.sha256 ?? ''}`,
        );
      const before = await index();
      await two.store.reconcile('ord');
      expect(await index()).toEqual(before);
    });
    it('anInstanceCutFromPostgresRefusesWritesThenTakesThemAgain', async () => {
      const hop = await forwarder(cluster.port);
      const three = await startTestServer({
        ...tiers,
        databaseUrl: tiers.databaseUrl.replace(`:${cluster.port}/`, `:${hop.port}/`),
        instanceId: 'three',
        cluster: { leaseTtlMs: 1000, leaseRenewMs: 200 },
      });
      try {
        const c = new TestClient(three.url, (await TestClient.enrol(one, 'cut', 'c')).token);
        expect((await c.ops({ op: 'mkdir', path: 'before' }))[0]?.status).toBe('applied');
        hop.cut();
        let refused: Response | undefined;
        for (let k = 0; !refused && k < 100; k++) {
          const res = await fetch(`${three.url}/v1/ops`, {
            method: 'POST',
            headers: c.headers({ 'content-type': 'application/json' }),
            body: JSON.stringify({ ops: [{ op: 'mkdir', path: `during${k}` }] }),
            signal: AbortSignal.timeout(2000),
          }).catch(() => undefined);
          if (res?.status === 503) refused = res;
          else await new Promise((r) => setTimeout(r, 100));
        }
        expect(refused?.headers.get('retry-after')).toBe('1');
        expect(await refused?.json()).toMatchObject({ error: { code: 'SLOW_DOWN' } });
        expect(three.cluster.reachable()).toBe(false);
        hop.heal();
        let back = false;
        for (let k = 0; !back && k < 100; k++) {
          back = await c.ops({ op: 'mkdir', path: 'after' }).then(
            (r) => r[0]?.status === 'applied',
            () => false,
          );
          if (!back) await new Promise((r) => setTimeout(r, 100));
        }
        expect(back).toBe(true);
        const paths = (await one.store.meta.listEntries('cut', '', true)).map((e) => e.path);
        expect(paths).toEqual(expect.arrayContaining(['before', 'after']));
      } finally {
        hop.heal();
        await three.stop();
        hop.close();
      }
    });

    it('oneOfTheTwoIsTheControllerAndOnlyItsControllerWritesGoThrough', async () => {
      const roles = [one, two].map((s) => s.cluster.isController());
      expect(roles.filter(Boolean)).toHaveLength(1);
      const [leader, other] = roles[0] ? [one, two] : [two, one];
      for (const [s, v] of [
        [leader, 1],
        [other, 0],
      ] as const) {
        const text = await (await fetch(`${s.url}/metrics`)).text();
        expect(text).toContain(`weft_cluster_controller{instance="${s.cluster.instanceId}"} ${v}`);
      }
      // The refcount recount is the controller's: refused elsewhere, in the database.
      await expect(other.store.meta.recomputeRefcounts(Date.now())).rejects.toBeInstanceOf(FencedError);
      await leader.store.meta.recomputeRefcounts(Date.now());
    });
    it('whenAnInstanceLeavesTheControllerReconcilesWhatItLeftHalfDone', async () => {
      const [leader, other] = one.cluster.isController() ? [one, two] : [two, one];
      // A file on the shared filesystem tier that no one recorded: what an instance killed
      // between writing the tier and recording it leaves behind.
      const file = nodePath.join(shared, 'fs', one.store.nsPath('ord', 'left-behind.txt'));
      await fsp.writeFile(file, 'written, never recorded');
      const recorded = async (): Promise<boolean> =>
        (await leader.store.meta.listEntries('ord', '', true)).some((e) => e.path === 'left-behind.txt');
      expect(await recorded()).toBe(false);
      await other.stop();
      let found = false;
      for (let k = 0; !found && k < 150; k++) {
        found = await recorded();
        if (!found) await new Promise((r) => setTimeout(r, 100));
      }
      expect(found).toBe(true);
      expect(leader.cluster.isController()).toBe(true);
    });
  },
);
