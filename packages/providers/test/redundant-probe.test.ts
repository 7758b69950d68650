/**
 * The redundant tier's health probe over directory backends (issue #17): a backend whose
 * folder is gone (deleted, or a mount point with nothing mounted) is down, not "answering
 * with not found"; it is up again once the folder is back, and what it missed meanwhile
 * is replayed. Also the directory provider on its own: a missing root is unavailable.
 */
import { randomBytes } from 'node:crypto';
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { collect } from '../src/body.ts';
import { FsProvider } from '../src/adapters/fs.ts';
import { NotFoundError, TransientError } from '../src/errors.ts';
import { openRedundantProvider, type RedundantProvider } from '../src/redundant/index.ts';

const KiB = 1024;
const open: RedundantProvider[] = [];
afterEach(async () => {
  for (const t of open.splice(0)) await t.close().catch(() => undefined);
});

async function rig(): Promise<{ tier: RedundantProvider; roots: string[] }> {
  const dir = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-redundant-probe-'));
  const roots = [0, 1, 2, 3, 4].map((i) => nodePath.join(dir, `backend${i}`));
  const providers = await Promise.all(roots.map((root) => FsProvider.open({ root })));
  const tier = openRedundantProvider({
    backends: providers.map((provider, i) => ({ id: `b${i}`, provider })),
    dir: nodePath.join(dir, 'tier'),
    thresholdBytes: 64 * KiB,
    maxShardBytes: 32 * KiB,
    probeIntervalMs: 0,
  });
  open.push(tier);
  return { tier, roots };
}

const stateOf = async (tier: RedundantProvider, id: string): Promise<string | undefined> =>
  (await tier.health()).find((h) => h.id === id)?.state;

describe('redundant tier probe, directory backends', () => {
  it('counts a deleted backend folder as down, and replays to it when it is back', async () => {
    const { tier, roots } = await rig();
    const data = randomBytes(200 * KiB);
    await tier.write('a.bin', data);
    await fsp.rm(roots[1]!, { recursive: true });
    await tier.probe();
    expect(await stateOf(tier, 'b1')).toBe('down');
    expect(await stateOf(tier, 'b0')).toBe('available');
    // Reads go around it; a write meanwhile is logged for it.
    expect((await collect(await tier.read('a.bin'))).equals(data)).toBe(true);
    await tier.write('b.bin', randomBytes(10 * KiB));
    await tier.write('c.bin', randomBytes(100 * KiB));
    const owed = (await tier.health()).find((h) => h.id === 'b1')!.owed;
    expect(owed).toBeGreaterThan(0);
    await FsProvider.open({ root: roots[1]! }); // the folder is back (empty)
    await tier.probe();
    expect(await stateOf(tier, 'b1')).toBe('available');
    expect((await tier.health()).find((h) => h.id === 'b1')!.owed).toBe(0);
  });

  it('counts an empty mount point (the folder there, its contents not) as down', async () => {
    const { tier, roots } = await rig();
    await tier.write('a.bin', randomBytes(200 * KiB));
    // What an unmounted disk looks like: the mount point is an empty folder.
    await fsp.rm(roots[2]!, { recursive: true });
    await fsp.mkdir(roots[2]!);
    await tier.probe();
    expect(await stateOf(tier, 'b2')).toBe('down');
  });
});

describe('directory provider with its root gone', () => {
  it('answers unavailable, not "not found", and not found again once the root is back', async () => {
    const root = nodePath.join(await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-fs-root-')), 'r');
    const p = await FsProvider.open({ root });
    await expect(p.stat('nothing.txt')).rejects.toBeInstanceOf(NotFoundError);
    await fsp.rm(root, { recursive: true });
    await expect(p.stat('nothing.txt')).rejects.toBeInstanceOf(TransientError);
    await expect(p.read('nothing.txt')).rejects.toBeInstanceOf(TransientError);
    await FsProvider.open({ root });
    await expect(p.stat('nothing.txt')).rejects.toBeInstanceOf(NotFoundError);
  });
});
