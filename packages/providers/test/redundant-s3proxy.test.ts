/**
 * The redundant tier with real S3 backends (issue #17): one s3proxy of its own (objects on
 * disk) and the suite's shared s3proxy, beside three directories. The own s3proxy is
 * stopped — a real, sustained outage (connections refused) — while files are read and
 * written; it is started again on the same port over the same data, the outage log is
 * replayed, the scrub finds everything, and the replayed fragments on S3 serve reads with
 * two directory backends down.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { collect } from '../src/body.ts';
import { FsProvider } from '../src/adapters/fs.ts';
import { S3Provider } from '../src/adapters/s3.ts';
import { openRedundantProvider, scrub, type RedundantProvider } from '../src/redundant/index.ts';
import { OutageProvider } from '../src/testing/outage.ts';
import { type RunningS3Proxy, startS3Proxy } from '../src/testing/s3proxy.ts';

const KiB = 1024;
let own: RunningS3Proxy | undefined;
let tier: RedundantProvider | undefined;
afterAll(async () => {
  await tier?.close();
  await own?.stop();
});

describe('redundant tier over s3proxy and directories', () => {
  it('rides out a stopped s3proxy and replays its log when it is back', async () => {
    const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-s3-'));
    const s3data = nodePath.join(dir, 's3data');
    await fsp.mkdir(s3data);
    own = await startS3Proxy({ dataDir: s3data, bucket: 'own' });
    const port = Number(new URL(own.endpoint).port);
    const secret = own.secretAccessKey;
    const shared = inject('s3');
    const s3 = (e: Omit<RunningS3Proxy, 'stop'> | typeof shared, prefix: string): S3Provider =>
      new S3Provider({ ...e, credentials: e, prefix });
    const dirs = await Promise.all(
      [2, 3, 4].map(async (i) => {
        const root = nodePath.join(dir, `backend${i}`);
        await fsp.mkdir(root);
        return new OutageProvider(await FsProvider.open({ root }));
      }),
    );
    tier = openRedundantProvider({
      backends: [
        { id: 's3-own', provider: s3(own, 'tier') },
        { id: 's3-shared', provider: s3(shared, `redundant/${randomBytes(6).toString('hex')}`) },
        ...dirs.map((provider, i) => ({ id: `dir${i + 2}`, provider })),
      ],
      dir: nodePath.join(dir, 'tier'),
      thresholdBytes: 64 * KiB,
      maxShardBytes: 64 * KiB,
      hedgeAfterMs: 500,
      probeIntervalMs: 0,
    });
    const files = new Map<string, Buffer>();
    for (let i = 0; i < 6; i++) {
      const data = randomBytes(i % 2 ? 2000 + i : 300 * KiB + i);
      files.set(`before/${i}`, data);
      await tier.write(`before/${i}`, data);
    }
    const check = async (): Promise<void> => {
      for (const [p, d] of files) expect((await collect(await tier!.read(p))).equals(d), p).toBe(true);
    };

    await own.stop();
    own = undefined;
    await check();
    for (let i = 0; i < 6; i++) {
      const data = randomBytes(i % 2 ? 1500 + i : 200 * KiB + i);
      files.set(`during/${i}`, data);
      await tier.write(`during/${i}`, data);
    }
    await tier.remove('before/0');
    files.delete('before/0');
    await check();
    expect((await tier.health()).find((h) => h.id === 's3-own')?.state).toBe('down');
    expect(await tier.store.logCount('s3-own')).toBeGreaterThan(0);
    await tier.probe();
    expect(await tier.store.logCount('s3-own')).toBeGreaterThan(0);

    own = await startS3Proxy({ dataDir: s3data, bucket: 'own', port, secretAccessKey: secret });
    await tier.probe();
    expect((await tier.health()).find((h) => h.id === 's3-own')).toMatchObject({
      state: 'available',
      owed: 0,
    });
    expect(await scrub(tier)).toMatchObject({ missing: 0, corrupt: 0, unrepairable: 0, skipped: 0 });

    // Striped files now need the fragments replayed onto S3: two directories go down.
    dirs[0]!.goDown();
    dirs[1]!.goDown();
    for (const [p, d] of files) {
      if (d.length < 64 * KiB) continue;
      expect((await collect(await tier.read(p))).equals(d), p).toBe(true);
    }
  }, 240_000);
});
