/**
 * A proxy whose object tier was one directory (`objectTier: { type: 'fs' }`) or an S3
 * bucket (the suite's real s3proxy), restarted on the same data with
 * `objectTier: { type: 'redundant', migrateFrom: <the old tier> }` (issue #17,
 * docs/redundancy.md): the files stored before keep downloading (whole and by
 * range, packs of small files too) while the background migration moves every object into
 * placement and empties the old directory; an upload and a delete meanwhile behave; after
 * the move the scrub finds every blob, and the old objects are read with one backend lost (the large, striped
 * ones with two lost); GC frees a
 * deleted file's object from the tier.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { S3Provider } from '@weft/providers';
import { MigratingRedundantProvider, scrub } from '@weft/providers/redundant';
import { pseudoRandom, sha, startTestServer, tempDir, TestClient, uploadLarge } from './helpers.ts';

const MiB = 1024 * 1024;
const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const s of stops.reverse()) await s().catch(() => undefined);
});

/** Files below `dir`, recursively. */
async function filesUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (d: string): Promise<void> => {
    for (const e of await fsp.readdir(d, { withFileTypes: true }).catch(() => [])) {
      if (e.isDirectory()) await walk(nodePath.join(d, e.name));
      else out.push(nodePath.join(d, e.name));
    }
  };
  await walk(dir);
  return out;
}

/** The old tier: its config before, its `migrateFrom`, and what it holds (object keys). */
function legacyTier(kind: 'fs' | 's3', dataDir: string) {
  if (kind === 'fs') {
    const dir = nodePath.join(dataDir, 'objects');
    return {
      objectTier: undefined,
      migrateFrom: { type: 'fs' as const },
      keys: async () => (await filesUnder(dir)).filter((f) => !f.includes('.weft-fs')),
    };
  }
  const s3 = inject('proxyS3');
  const config = {
    type: 's3' as const,
    bucket: s3.bucket,
    prefix: `migrate-${Date.now()}`,
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: s3.forcePathStyle,
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
  };
  return {
    objectTier: config,
    migrateFrom: config,
    keys: async () => {
      const p = new S3Provider({
        bucket: config.bucket,
        prefix: config.prefix,
        endpoint: config.endpoint,
        region: config.region,
        forcePathStyle: true,
        credentials: { accessKeyId: config.accessKeyId, secretAccessKey: config.secretAccessKey },
      });
      const out: string[] = [];
      for await (const e of p.list('', { recursive: true })) if (e.kind === 'file') out.push(e.path);
      await p.close?.();
      return out;
    },
  };
}

describe.each(['fs', 's3'] as const)('switching the object tier from %s to the redundant tier', (kind) => {
  it('keeps serving old objects and moves them into placement in the background', async () => {
    const dataDir = await tempDir('weft-proxy-migrate-');
    const legacy = legacyTier(kind, dataDir);
    const common = {
      dataDir,
      versions: { retentionDays: 0 },
      gcGraceMs: 0,
      adminToken: 'migrate-admin-token-0123456789',
      packs: { targetBytes: 64 * 1024, timeoutMs: 100, fsCopy: 'drop' as const },
    };
    const before = await startTestServer({
      ...common,
      ...(legacy.objectTier ? { objectTier: legacy.objectTier } : {}),
    });
    const c1 = await TestClient.enrol(before, 'mig', 'dev');
    const old = new Map<string, Buffer>();
    for (let i = 0; i < 4; i++) {
      const data = pseudoRandom(3 * MiB + i * 1000, 40 + i);
      old.set(`big/${i}.bin`, data);
      expect(await uploadLarge(c1, `big/${i}.bin`, data)).toMatchObject({ status: 'applied' });
    }
    const small: Record<string, Buffer> = {};
    for (let i = 0; i < 20; i++) small[`small/${i}.txt`] = pseudoRandom(3000 + i, 90 + i);
    await c1.putSmall(small);
    for (const [p, d] of Object.entries(small)) old.set(p, d);
    await before.packer!.flush();
    await before.close();
    const legacyBefore = await legacy.keys();
    expect(legacyBefore.length).toBeGreaterThanOrEqual(5); // four objects, at least one pack

    const roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(dataDir, `backend${i}`));
    const after = await startTestServer({
      ...common,
      objectTier: {
        type: 'redundant',
        backends: roots.map((dir, i) => ({ id: `d${i}`, type: 'fs' as const, dir })),
        thresholdBytes: 256 * 1024,
        maxShardBytes: 512 * 1024,
        probeIntervalMs: 0,
        migrateFrom: legacy.migrateFrom,
      },
    });
    stops.push(() => after.stop());
    const tier = after.objects;
    expect(tier).toBeInstanceOf(MigratingRedundantProvider);
    if (!(tier instanceof MigratingRedundantProvider)) return;
    const c2 = await TestClient.enrol(after, 'mig', 'dev2');
    // Served straight away, whatever the migration has reached.
    for (const [p, d] of old) {
      await after.store.relay.forget(sha(d));
      expect(sha(await c2.bytes(p)), p).toBe(sha(d));
    }
    const part = await c2.get('big/2.bin', 'bytes=1000000-1999999');
    expect(part.status).toBe(206);
    expect(
      Buffer.from(await part.arrayBuffer()).equals(old.get('big/2.bin')!.subarray(1_000_000, 2_000_000)),
    ).toBe(true);
    // Changes meanwhile.
    const fresh = pseudoRandom(2 * MiB + 7, 77);
    expect(await uploadLarge(c2, 'big/new.bin', fresh)).toMatchObject({ status: 'applied' });
    old.set('big/new.bin', fresh);
    await c2.ops({ op: 'delete', path: 'big/0.bin' });
    const deleted = old.get('big/0.bin')!;
    old.delete('big/0.bin');

    await expect.poll(() => tier.migration().state, { timeout: 60_000 }).toBe('done');
    expect(tier.migration().moved).toBeGreaterThanOrEqual(legacyBefore.length);
    expect(await legacy.keys()).toEqual([]);
    expect(await scrub(tier, { repair: false })).toMatchObject({ missing: 0, corrupt: 0, unrepairable: 0 });
    // Every old object is in placement now. A replicated object (r = 2: packs of small
    // files) survives one lost backend and a striped one (RS(3, 2): the large files) two —
    // placement may put a small object's two copies on any two backends, so two lost are
    // asked of the striped files only.
    await fsp.rm(roots[3]!, { recursive: true });
    for (const [p, d] of old) {
      await after.store.relay.forget(sha(d));
      expect(sha(await c2.bytes(p)), `${p} after the move, one backend lost`).toBe(sha(d));
    }
    await fsp.rm(roots[0]!, { recursive: true });
    for (const [p, d] of old) {
      if (!p.startsWith('big/')) continue;
      await after.store.relay.forget(sha(d));
      expect(sha(await c2.bytes(p)), `${p} after the move, two backends lost`).toBe(sha(d));
    }
    // The deleted file's object goes at GC, from the tier.
    const key = `objects/${sha(deleted).slice(0, 2)}/${sha(deleted).slice(2, 4)}/${sha(deleted)}`;
    expect(await tier.store.objectOf(key)).toBeDefined();
    await after.gc(0);
    expect(await tier.store.objectOf(key)).toBeUndefined();
  });
});
