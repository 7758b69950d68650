/**
 * The proxy's object tier on five real backends (issue #17, docs/redundancy.md): two
 * s3proxy buckets (the run's shared s3proxy and one of its own, objects on disk), a
 * directory, and the Dropbox and Drive emulators used as blob stores through the real
 * adapters (a hidden `.weft-redundant` folder in each account; Dropbox with an access
 * token, Drive with a refresh token redeemed at the emulator's OAuth endpoint), all given
 * in the proxy's `objectTier` config. A device syncs small files (packed into the tier,
 * their filesystem copies dropped) and large ones (RS(3, 2) stripes) while first the own
 * s3proxy is stopped (connections refused) and then the Dropbox emulator answers every
 * request with 503 (its outage mode: a fault rule with no count), each for several
 * rounds of writes, overwrites, deletes and reads of everything (the relay cache emptied
 * first, so large reads come from the tier). Every read succeeds, every write is kept;
 * when both come back their outage logs replay and the scrub finds nothing missing. Then
 * bytes flipped in a fragment on the directory backend are read around, found and
 * repaired; the Dropbox backend is replaced by a new directory and rebuilt there, and
 * every file reads back with the Dropbox emulator gone and the own s3proxy stopped again.
 *
 * CI: 2 rounds per outage, 10 small and 2 large (≤ 1.5 MiB) files per round; WEFT_FULL=1:
 * 4 rounds, 30 small and 4 large (≤ 12 MiB) files per round (every file is read back each
 * round, so the reads grow with the rounds: up to an hour on a loaded 2-core machine).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { ProxyClient } from '@weft/core';
import { DropboxEmulator } from '@weft/cloud-emulators/dropbox';
import { GDriveEmulator } from '@weft/cloud-emulators/gdrive';
import { DropboxProvider, FsProvider, GDriveProvider, collect, type Provider } from '@weft/providers';
import {
  blobKey,
  RedundantProvider,
  replaceBackend,
  scrub,
  type ReplaceProgress,
} from '@weft/providers/redundant';
import { type RunningS3Proxy, startS3Proxy } from '@weft/providers/testing';
import { type RunningProxyServer, startProxyServer } from '@weft/proxy-server';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { type Device, prng, remoteTree, sorted, startDevice, tempDir } from '../src/harness.ts';

const FULL = process.env.WEFT_FULL === '1';
const ROUNDS = FULL ? 4 : 2;
const SMALL = FULL ? 30 : 10;
const LARGE = FULL ? 4 : 2;
const LARGE_MAX = FULL ? 12 * 1024 * 1024 : 1536 * 1024;
const KiB = 1024;

const cleanup: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

/** A refresh token from an emulator's OAuth endpoints (authorization-code grant, as a person signs in). */
async function refreshTokenFrom(base: string, authorize: string, token: string): Promise<string> {
  const redirect = 'http://127.0.0.1:9/callback';
  const q = new URLSearchParams({ client_id: 'weft-e2e', redirect_uri: redirect, response_type: 'code' });
  const res = await fetch(`${base}${authorize}?${q}`, { redirect: 'manual' });
  const code = new URL(res.headers.get('location')!).searchParams.get('code')!;
  const form = new URLSearchParams({
    grant_type: 'authorization_code',
    code,
    client_id: 'weft-e2e',
    redirect_uri: redirect,
  });
  const t = (await (await fetch(`${base}${token}`, { method: 'POST', body: form })).json()) as {
    refresh_token: string;
  };
  return t.refresh_token;
}

/** Files under `.weft-redundant/` of a backend. */
async function blobCount(p: Provider): Promise<number> {
  let n = 0;
  for await (const e of p.list('.weft-redundant', { recursive: true })) if (e.kind === 'file') n += 1;
  return n;
}

describe('redundant object tier on five backends through the proxy', () => {
  it(
    'rides out one then two backends down, replays, repairs a flipped fragment and rebuilds a replaced backend',
    async () => {
      const base = await tempDir('redundant5');
      const shared = inject('s3');
      const ownData = nodePath.join(base, 's3own');
      await fsp.mkdir(ownData);
      let own: RunningS3Proxy | undefined = await startS3Proxy({ dataDir: ownData, bucket: 'own' });
      cleanup.push(async () => own?.stop());
      const ownPort = Number(new URL(own.endpoint).port);
      const ownSecret = own.secretAccessKey;
      const dropbox = await new DropboxEmulator().start();
      cleanup.push(() => dropbox.close());
      const drive = await new GDriveEmulator().start();
      cleanup.push(() => drive.close());
      const driveRefresh = await refreshTokenFrom(drive.url, '/o/oauth2/v2/auth', '/token');
      const disk = nodePath.join(base, 'disk');

      const server: RunningProxyServer = await startProxyServer({
        dataDir: nodePath.join(base, 'proxy'),
        port: 0,
        logLevel: 'warn',
        gcGraceMs: 0,
        gcIntervalMs: 0,
        versions: { retentionDays: 0 },
        smallFileBytes: 512 * KiB,
        packs: { targetBytes: 64 * KiB, timeoutMs: 200, fsCopy: 'drop' },
        objectTier: {
          type: 'redundant',
          backends: [
            {
              id: 's3-shared',
              type: 's3',
              bucket: shared.bucket,
              prefix: `redundant5-${randomBytes(4).toString('hex')}`,
              endpoint: shared.endpoint,
              forcePathStyle: true,
              accessKeyId: shared.accessKeyId,
              secretAccessKey: shared.secretAccessKey,
            },
            {
              id: 's3-own',
              type: 's3',
              bucket: 'own',
              endpoint: own.endpoint,
              forcePathStyle: true,
              accessKeyId: own.accessKeyId,
              secretAccessKey: ownSecret,
            },
            { id: 'disk', type: 'fs', dir: disk },
            { id: 'dropbox', type: 'dropbox', baseUrl: dropbox.url, accessToken: dropbox.accessToken },
            {
              id: 'drive',
              type: 'gdrive',
              rootUrl: drive.url,
              refreshToken: driveRefresh,
              clientId: 'weft-e2e',
              tokenUrl: `${drive.url}/token`,
            },
          ],
          thresholdBytes: 256 * KiB,
          // Two backends down at once: a replicated object (a pack) survives that only with
          // three replicas (r − 1 ≥ 2), as a striped one does with m = 2. With r = 2 a pack
          // whose two replicas sat on s3-own and Dropbox was unreadable (a WEFT_FULL run).
          replicas: 3,
          maxShardBytes: 128 * KiB,
          hedgeAfterMs: 1000,
          probeIntervalMs: 300,
        },
      });
      cleanup.push(() => server.close());
      const tier = server.objects;
      expect(tier).toBeInstanceOf(RedundantProvider);
      if (!(tier instanceof RedundantProvider)) return;

      const device: Device = await startDevice(
        { url: server.url, adminToken: server.adminToken, dataDir: '', s3Prefix: '', close: async () => {} },
        'laptop',
      );
      cleanup.push(() => device.stop());
      const reader = new ProxyClient({
        baseUrl: server.url,
        token: (await server.enrol('alice', 'reader')).token,
      });

      const rand = prng(17);
      const expected = new Map<string, Buffer>();
      let made = 0;
      const put = async (rel: string, data: Buffer): Promise<void> => {
        const abs = nodePath.join(device.folder, rel);
        await fsp.mkdir(nodePath.dirname(abs), { recursive: true });
        await fsp.writeFile(abs, data);
        expected.set(rel, data);
      };
      /** One round: new small and large files, an overwrite and a delete, synced. */
      const writeRound = async (label: string): Promise<void> => {
        for (let i = 0; i < SMALL; i++)
          await put(`${label}/s${made++}.txt`, randomBytes(500 + Math.floor(rand() * 16 * KiB)));
        for (let i = 0; i < LARGE; i++)
          await put(
            `${label}/big${made++}.bin`,
            randomBytes(600 * KiB + Math.floor(rand() * (LARGE_MAX - 600 * KiB))),
          );
        const older = [...expected.keys()].filter((p) => !p.startsWith(`${label}/`));
        if (older.length > 2) {
          const victim = older[Math.floor(rand() * older.length)]!;
          await fsp.rm(nodePath.join(device.folder, victim));
          expected.delete(victim);
          const changed = older.find((p) => p !== victim && p.includes('big'));
          if (changed) await put(changed, randomBytes(700 * KiB + made));
        }
        await device.engine.syncNow();
        await device.engine.waitIdle();
        await server.gc(0);
      };
      /** Every file, listed and read through the proxy, with the relay cache emptied first. */
      const readAll = async (when: string): Promise<void> => {
        const want = new Map([...expected].map(([p, d]) => [p, sha(d)]));
        const tree = await remoteTree(reader);
        expect(sorted(new Map([...tree].filter(([, v]) => v !== 'dir'))), when).toEqual(sorted(want));
        for (const [p, d] of expected) {
          await server.store.relay.forget(sha(d));
          const got = await collect((await reader.download(p)).body);
          expect(got.equals(d), `${p} ${when}`).toBe(true);
        }
        const big = [...expected].find(([p]) => p.includes('big'));
        if (big) {
          const part = await collect(
            (await reader.download(big[0], { offset: 300_000, length: 200_000 })).body,
          );
          expect(part.equals(big[1].subarray(300_000, 500_000)), `range ${when}`).toBe(true);
        }
      };
      const stateOf = async (id: string) => (await tier.health()).find((h) => h.id === id)?.state;

      // All up.
      await writeRound('up');
      await readAll('all up');
      expect((await tier.store.objectIds()).length).toBeGreaterThan(0);

      // One down for a sustained time: the own s3proxy stopped (connections refused).
      await own.stop();
      own = undefined;
      for (let r = 0; r < ROUNDS; r++) {
        await writeRound(`one${r}`);
        await readAll(`s3-own down, round ${r}`);
      }
      expect(await stateOf('s3-own')).toBe('down');
      expect(await tier.store.logCount('s3-own')).toBeGreaterThan(0);

      // Two down: the Dropbox emulator in outage mode too (503 on every request, as Dropbox
      // answers when it is unavailable).
      dropbox.faults.add({ action: { kind: 'status', status: 503 } });
      for (let r = 0; r < ROUNDS; r++) {
        await writeRound(`two${r}`);
        await readAll(`s3-own and dropbox down, round ${r}`);
      }
      expect(await stateOf('dropbox')).toBe('down');
      expect(await tier.store.logCount('dropbox')).toBeGreaterThan(0);
      expect(tier.metrics.degradedReads).toBeGreaterThan(0);

      // Both back: the probes find them, their logs replay, the scrub finds everything.
      own = await startS3Proxy({
        dataDir: ownData,
        bucket: 'own',
        port: ownPort,
        secretAccessKey: ownSecret,
      });
      dropbox.faults.clear();
      await expect
        .poll(async () => (await tier.health()).every((h) => h.state === 'available' && h.owed === 0), {
          timeout: 120_000,
        })
        .toBe(true);
      expect(tier.metrics.replayed).toBeGreaterThan(0);
      const clean = await scrub(tier, { repair: false });
      expect(clean).toMatchObject({ missing: 0, corrupt: 0, skipped: 0, unrepairable: 0 });
      expect(clean.blobsChecked).toBeGreaterThan(0);
      await readAll('after replay');
      const dbx = new DropboxProvider({ token: dropbox.accessToken, baseUrl: dropbox.url });
      expect(await blobCount(dbx)).toBeGreaterThan(0);
      const drv = new GDriveProvider({ token: drive.accessToken, rootUrl: drive.url });
      expect(await blobCount(drv)).toBeGreaterThan(0);

      // Bytes flipped in a fragment on the directory backend: read around, found, repaired.
      const [bigPath, bigData] = [...expected].find(([p]) => p.includes('big'))!;
      const objs = await Promise.all(
        (await tier.store.objectIds('disk')).map(async (id) => (await tier.store.object(id))!),
      );
      const striped = objs.find((o) => o.layout === 'striped' && o.sha256 === sha(bigData));
      expect(striped, 'the large file has a fragment on the directory backend').toBeDefined();
      const slot = (await tier.store.locations(striped!.id)).find((l) => l.backend === 'disk')!.slot;
      const file = nodePath.join(disk, ...blobKey(striped!, slot).split('/'));
      const good = await fsp.readFile(file);
      const bad = Buffer.from(good);
      bad[64 + 1000] = bad[64 + 1000]! ^ 0x5a;
      await fsp.writeFile(file, bad);
      await server.store.relay.forget(sha(bigData));
      expect((await collect((await reader.download(bigPath)).body)).equals(bigData)).toBe(true);
      const repaired = await scrub(tier);
      expect(repaired).toMatchObject({ corrupt: 1, repaired: 1, missing: 0, unrepairable: 0 });
      expect((await fsp.readFile(file)).equals(good)).toBe(true);

      // Dropbox replaced by a new directory, rebuilt from the others.
      const spareDir = nodePath.join(base, 'spare');
      await fsp.mkdir(spareDir);
      const spare = await FsProvider.open({ root: spareDir, portable: false });
      const held = (await tier.store.objectIds('dropbox')).length;
      expect(held).toBeGreaterThan(0);
      const progress: ReplaceProgress[] = [];
      expect(
        await replaceBackend(tier, 'dropbox', { id: 'spare', provider: spare }, (p) => progress.push(p)),
      ).toBe(held);
      expect(progress.at(-1)).toMatchObject({ done: held, total: held });
      expect(tier.backendIds()).not.toContain('dropbox');
      expect(await tier.store.objectIds('spare')).toHaveLength(held);
      await dropbox.close();
      await own.stop();
      own = undefined;
      await tier.probe('s3-own');
      expect(await stateOf('s3-own')).toBe('down');
      await readAll('dropbox replaced, s3-own down');
      expect(await scrub(tier, { repair: false })).toMatchObject({ missing: 0, corrupt: 0, unrepairable: 0 });
    },
    FULL ? 3_600_000 : 600_000,
  );
});

function sha(d: Buffer): string {
  return createHash('sha256').update(d).digest('hex');
}
