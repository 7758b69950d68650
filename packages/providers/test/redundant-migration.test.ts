/**
 * Switching an existing single-backend store to the redundant tier (issue #17): the old
 * store (a directory) behind a MigratingRedundantProvider keeps serving its objects (read
 * whole and by range, stat, list) while new writes, overwrites and deletes go on; the
 * migration moves every object into placement (size and SHA-256 checked) and empties the
 * old store; stopped half-way and reopened, it resumes. The proxy with a migrating object
 * tier: packages/proxy-server/test/redundant-migration.test.ts.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collect } from '../src/body.ts';
import { FsProvider } from '../src/adapters/fs.ts';
import { MemoryProvider } from '../src/adapters/memory.ts';
import { NotFoundError } from '../src/errors.ts';
import type { Provider } from '../src/provider.ts';
import {
  MigratingRedundantProvider,
  type MigrationStatus,
  openRedundantProvider,
  scrub,
} from '../src/redundant/index.ts';

const KiB = 1024;
const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close().catch(() => undefined);
});

async function files(p: Provider): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of p.list('', { recursive: true })) if (e.kind === 'file') out.push(e.path);
  } catch (e) {
    if (!(e instanceof NotFoundError)) throw e;
  }
  return out.sort();
}

async function rig() {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-migrate-'));
  const legacyRoot = nodePath.join(dir, 'objects');
  await fsp.mkdir(legacyRoot);
  const legacy = await FsProvider.open({ root: legacyRoot });
  const old = new Map<string, Buffer>();
  for (let i = 0; i < 12; i++) {
    const data = randomBytes(i % 3 === 0 ? 150 * KiB + i : 1000 + i * 37);
    old.set(`objects/${i % 4}/o${i}`, data);
    await legacy.write(`objects/${i % 4}/o${i}`, data);
  }
  const backends = [0, 1, 2, 3, 4].map((i) => ({ id: `m${i}`, provider: new MemoryProvider() }));
  const openTier = async (): Promise<MigratingRedundantProvider> => {
    const tier = openRedundantProvider({
      backends,
      dir: nodePath.join(dir, 'tier'),
      thresholdBytes: 64 * KiB,
      maxShardBytes: 32 * KiB,
      probeIntervalMs: 0,
      legacy: await FsProvider.open({ root: legacyRoot }),
    }) as MigratingRedundantProvider;
    open.push({ close: () => tier.close() });
    return tier;
  };
  return { legacy, old, openTier };
}

describe('redundant tier, migration from a single store', () => {
  it('serves the old objects, takes writes and deletes, then moves everything in', async () => {
    const { legacy, old, openTier } = await rig();
    const tier = await openTier();
    expect(tier).toBeInstanceOf(MigratingRedundantProvider);
    // Served from the old store before anything moved.
    for (const [p, d] of old) {
      expect((await collect(await tier.read(p))).equals(d), p).toBe(true);
      expect((await tier.stat(p)).size).toBe(d.length);
    }
    const big = [...old.entries()].find(([, d]) => d.length > 100 * KiB)!;
    expect(
      (await collect(await tier.read(big[0], { offset: 5000, length: 70_000 }))).equals(
        big[1].subarray(5000, 75_000),
      ),
    ).toBe(true);
    expect(await files(tier)).toEqual([...old.keys()].sort());
    // Changes meanwhile: a new object, an overwrite and a delete of old ones.
    const fresh = randomBytes(90 * KiB);
    await tier.write('objects/new', fresh);
    const over = randomBytes(2000);
    await tier.write('objects/1/o1', over);
    old.set('objects/1/o1', over);
    await tier.remove('objects/2/o2');
    old.delete('objects/2/o2');
    old.set('objects/new', fresh);
    await expect(tier.stat('objects/2/o2')).rejects.toBeInstanceOf(NotFoundError);
    await expect(tier.remove('objects/2/o2')).rejects.toBeInstanceOf(NotFoundError);
    expect(await files(tier)).toEqual([...old.keys()].sort());

    const seen: MigrationStatus[] = [];
    const status = await tier.migrate({ onProgress: (s) => seen.push(s) });
    expect(status).toMatchObject({ state: 'done', moved: 10, found: 10 });
    expect(seen.at(-1)).toEqual(status);
    expect(await files(legacy)).toEqual([]);
    for (const [p, d] of old) {
      expect((await collect(await tier.read(p))).equals(d), p).toBe(true);
      // In placement now: the tier's own namespace has it.
      expect(await tier.store.objectOf(p), p).toBeDefined();
    }
    expect(await scrub(tier, { repair: false })).toMatchObject({ missing: 0, corrupt: 0, objects: old.size });
    // A second pass finds nothing to do.
    expect(await tier.migrate()).toMatchObject({ state: 'done', found: 0 });
  });

  it('resumes after being stopped half-way', async () => {
    const { legacy, old, openTier } = await rig();
    const first = await openTier();
    const stop = new AbortController();
    const halfway = await first.migrate({
      signal: stop.signal,
      onProgress: (s) => {
        if (s.moved === 5) stop.abort();
      },
    });
    expect(halfway).toMatchObject({ state: 'failed', moved: 5 });
    expect(await files(legacy)).toHaveLength(7);
    await first.close();
    const again = await openTier();
    for (const [p, d] of old) expect((await collect(await again.read(p))).equals(d), p).toBe(true);
    again.startMigration();
    await expect.poll(() => again.migration().state, { timeout: 20_000 }).toBe('done');
    expect(again.migration()).toMatchObject({ moved: 7 });
    expect(await files(legacy)).toEqual([]);
    for (const [p, d] of old) expect((await collect(await again.read(p))).equals(d), p).toBe(true);
    expect(await scrub(again, { repair: false })).toMatchObject({ missing: 0, corrupt: 0, objects: 12 });
  });
});
