/**
 * The local trash is purged (issue #19): by age and by size, oldest first, never touching
 * anything outside the trash directory or anything in it the trash did not make. The clock
 * is injected: nothing sleeps.
 */
import * as fsp from 'node:fs/promises';
import * as os from 'node:os';
import * as nodePath from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startAgent } from '../src/agent.ts';
import { Trash } from '../src/local-fs.ts';
import { memorySecretStore } from '../src/secret-store.ts';
import {
  DAY_MS,
  TRASH_CAP_CEILING_BYTES,
  TrashItemGoneError,
  TrashJanitor,
  automaticTrashCap,
  listTrashSlots,
  parseTrashSlot,
  planPurge,
  purgeTrash,
  trashSlotName,
} from '../src/trash-purge.ts';

const T0 = Date.parse('2026-10-01T12:00:00.000Z');
const roots: string[] = [];
afterEach(async () => {
  for (const r of roots.splice(0)) await fsp.rm(r, { recursive: true, force: true });
});

async function setup(): Promise<{ root: string; folder: string; trashDir: string; outside: string }> {
  const root = await fsp.mkdtemp(nodePath.join(os.tmpdir(), 'weft-trash-'));
  roots.push(root);
  const folder = nodePath.join(root, 'Weft');
  const outside = nodePath.join(root, 'outside');
  await fsp.mkdir(folder);
  await fsp.mkdir(outside);
  await fsp.writeFile(nodePath.join(outside, 'precious.txt'), 'do not touch');
  return { root, folder, trashDir: nodePath.join(root, 'state', 'trash'), outside };
}

/** A trash whose clock the test sets. */
function clockedTrash(dir: string): { trash: Trash; at: (ms: number) => void } {
  let now = T0;
  return { trash: new Trash(dir, { now: () => now }), at: (ms) => void (now = ms) };
}

async function trashFile(trash: Trash, folder: string, rel: string, bytes: number): Promise<string> {
  const abs = nodePath.join(folder, rel);
  await fsp.mkdir(nodePath.dirname(abs), { recursive: true });
  await fsp.writeFile(abs, Buffer.alloc(bytes, 7));
  const dest = await trash.keep(abs, rel);
  if (!dest) throw new Error('not trashed');
  return dest;
}

const exists = (p: string): Promise<boolean> =>
  fsp.lstat(p).then(
    () => true,
    () => false,
  );

describe('trash slot names', () => {
  it('carry the time they were trashed; other names are not slots', () => {
    const name = trashSlotName(T0, 'a1b2c3');
    expect(name).toBe('2026-10-01T12-00-00-000Z-a1b2c3');
    expect(parseTrashSlot(name)).toBe(T0);
    for (const other of [
      '..',
      'notes.txt',
      '2026-10-01T12-00-00-000Z',
      '2026-13-45T99-00-00-000Z-a1b2c3',
      '-rf',
    ])
      expect(parseTrashSlot(other)).toBeUndefined();
  });
});

describe('Trash.keepCopy', () => {
  it('of a file that does not exist (a new download) keeps nothing and leaves no empty slot', async () => {
    const { folder, trashDir } = await setup();
    const { trash } = clockedTrash(trashDir);
    expect(await trash.keepCopy(nodePath.join(folder, 'new.txt'), 'sub/new.txt')).toBeUndefined();
    expect(await fsp.readdir(trashDir).catch(() => [])).toEqual([]);
    await fsp.writeFile(nodePath.join(folder, 'old.txt'), 'v1');
    const kept = await trash.keepCopy(nodePath.join(folder, 'old.txt'), 'old.txt');
    expect(await fsp.readFile(kept ?? '', 'utf8')).toBe('v1');
    expect(await fsp.readdir(trashDir)).toHaveLength(1);
  });
});

describe('planPurge', () => {
  const slot = (name: string, days: number, bytes: number) => ({
    name,
    trashedAtMs: T0 - days * DAY_MS,
    bytes,
  });

  it('removes what is older than the age limit and keeps the rest', () => {
    const slots = [slot('a', 31, 10), slot('b', 29, 10), slot('c', 0, 10)];
    expect(planPurge(slots, { maxAgeMs: 30 * DAY_MS, maxBytes: Infinity }, T0).map((s) => s.name)).toEqual([
      'a',
    ]);
  });

  it('then removes the oldest until the rest fits the cap', () => {
    const slots = [slot('new', 1, 300), slot('old', 3, 100), slot('mid', 2, 200)];
    expect(planPurge(slots, { maxAgeMs: 30 * DAY_MS, maxBytes: 350 }, T0).map((s) => s.name)).toEqual([
      'old',
      'mid',
    ]);
    expect(planPurge(slots, { maxAgeMs: 30 * DAY_MS, maxBytes: 600 }, T0)).toEqual([]);
    // An item larger than the cap goes too (the cap is a promise about disk use).
    expect(planPurge(slots, { maxAgeMs: 30 * DAY_MS, maxBytes: 100 }, T0).map((s) => s.name)).toEqual([
      'old',
      'mid',
      'new',
    ]);
  });

  it('an item from the future (the clock went back) counts as new', () => {
    expect(planPurge([slot('x', -5, 1)], { maxAgeMs: DAY_MS, maxBytes: Infinity }, T0)).toEqual([]);
  });
});

describe('purgeTrash on disk', () => {
  it('old items go, recent ones stay; the default age is 30 days', async () => {
    const { folder, trashDir } = await setup();
    const { trash, at } = clockedTrash(trashDir);
    at(T0 - 31 * DAY_MS);
    const old = await trashFile(trash, folder, 'docs/old.txt', 10);
    at(T0 - 29 * DAY_MS);
    const recent = await trashFile(trash, folder, 'docs/recent.txt', 10);
    at(T0);
    expect(await trash.purge()).toBe(1);
    expect(await exists(old)).toBe(false);
    expect(await exists(recent)).toBe(true);
    // A day later the other one is past 30 days too.
    at(T0 + 2 * DAY_MS);
    expect(await trash.purge()).toBe(1);
    expect(await listTrashSlots(trashDir)).toEqual([]);
  });

  it('the size cap removes the oldest first', async () => {
    const { folder, trashDir } = await setup();
    const { trash, at } = clockedTrash(trashDir);
    at(T0 - 3 * DAY_MS);
    const a = await trashFile(trash, folder, 'a.bin', 1000);
    at(T0 - 2 * DAY_MS);
    const b = await trashFile(trash, folder, 'b.bin', 2000);
    at(T0 - DAY_MS);
    const c = await trashFile(trash, folder, 'c.bin', 3000);
    const result = await purgeTrash(trashDir, { maxAgeMs: 30 * DAY_MS, maxBytes: 3500 }, T0);
    expect(result).toMatchObject({ freedBytes: 3000, keptBytes: 3000, kept: 1 });
    expect([await exists(a), await exists(b), await exists(c)]).toEqual([false, false, true]);
  });

  it('a restore of a purged item fails clearly and writes nothing; a kept one comes back', async () => {
    const { folder, trashDir } = await setup();
    const { trash, at } = clockedTrash(trashDir);
    at(T0 - 40 * DAY_MS);
    const gone = await trashFile(trash, folder, 'report.txt', 5);
    at(T0 - DAY_MS);
    const kept = await trashFile(trash, folder, 'plan.txt', 5);
    at(T0);
    await trash.purge();
    const target = nodePath.join(folder, 'report.txt');
    const failed = trash.restore(gone, target);
    await expect(failed).rejects.toThrow(TrashItemGoneError);
    await expect(failed).rejects.toThrow(
      /report\.txt is no longer in the trash \(trashed 2026-08-22T12:00:00\.000Z\): items are purged after/,
    );
    expect(await exists(target)).toBe(false);

    await trash.restore(kept, nodePath.join(folder, 'plan.txt'));
    expect(await fsp.readFile(nodePath.join(folder, 'plan.txt'))).toEqual(Buffer.alloc(5, 7));
    expect(await listTrashSlots(trashDir)).toEqual([]);
    // Restoring never overwrites, and takes only items of this trash.
    const again = await trashFile(trash, folder, 'x.txt', 1);
    await fsp.writeFile(nodePath.join(folder, 'x.txt'), 'new');
    await expect(trash.restore(again, nodePath.join(folder, 'x.txt'))).rejects.toThrow(/something is there/);
    await expect(trash.restore(nodePath.join(folder, 'x.txt'), nodePath.join(folder, 'y'))).rejects.toThrow(
      /not an item of the trash/,
    );
  });

  it('touches nothing outside the trash, nor anything in it the trash did not make', async () => {
    const { root, folder, trashDir, outside } = await setup();
    const { trash, at } = clockedTrash(trashDir);
    at(T0 - 60 * DAY_MS);
    // A real slot holding a symlink to a folder outside (a trashed symlink), and a big file.
    const slotItem = await trashFile(trash, folder, 'big.bin', 10);
    const slotDir = nodePath.join(
      trashDir,
      nodePath.relative(trashDir, slotItem).split(nodePath.sep)[0] ?? '',
    );
    await fsp.symlink(outside, nodePath.join(slotDir, 'link-out'));
    await fsp.symlink(nodePath.join(outside, 'precious.txt'), nodePath.join(slotDir, 'file-link'));
    // Hostile entries directly in the trash directory.
    const oldName = trashSlotName(T0 - 90 * DAY_MS, 'ffffff');
    await fsp.symlink(outside, nodePath.join(trashDir, oldName)); // a symlink named like an old slot
    await fsp.writeFile(
      nodePath.join(trashDir, trashSlotName(T0 - 90 * DAY_MS, 'eeeeee')),
      'a file, not a slot',
    );
    for (const name of ['..weird', '-rf', 'new\nline', ' space', 'notes']) {
      await fsp.mkdir(nodePath.join(trashDir, name));
      await fsp.writeFile(nodePath.join(trashDir, name, 'inside'), 'x');
    }
    const before = await fsp.readdir(trashDir);
    at(T0);
    // Age and a cap of 0: everything the trash made must go, and only that.
    const result = await purgeTrash(trashDir, { maxAgeMs: DAY_MS, maxBytes: 0 }, T0);
    expect(result.removed).toEqual([nodePath.basename(slotDir)]);
    // The slot's symlinks were counted as links, never as what they point to.
    expect(result.freedBytes).toBeLessThan(10 + 2 * 4096);
    expect(await fsp.readFile(nodePath.join(outside, 'precious.txt'), 'utf8')).toBe('do not touch');
    expect((await fsp.readdir(trashDir)).sort()).toEqual(
      before.filter((n) => n !== nodePath.basename(slotDir)).sort(),
    );
    expect(await fsp.readdir(root)).toEqual(expect.arrayContaining(['Weft', 'outside', 'state']));
    // A restore through the symlinked "slot" is refused, not followed.
    await expect(
      trash.restore(nodePath.join(trashDir, oldName, 'precious.txt'), nodePath.join(folder, 'p.txt')),
    ).rejects.toThrow(/not an item of the trash/);
    expect(await exists(nodePath.join(outside, 'precious.txt'))).toBe(true);
  });

  it('the automatic cap is min(10 % of the disk, 10 GiB), for a folder not made yet too', async () => {
    const { trashDir } = await setup();
    const s = await fsp.statfs(os.tmpdir());
    expect(await automaticTrashCap(nodePath.join(trashDir, 'not', 'yet'))).toBe(
      Math.min(Math.floor(s.blocks * s.bsize * 0.1), TRASH_CAP_CEILING_BYTES),
    );
  });
});

describe('TrashJanitor', () => {
  it('purges at start, on its timer, and after a pass that trashed something; settings apply at the next run', async () => {
    const { folder, trashDir } = await setup();
    let now = T0;
    const trash = new Trash(trashDir, { now: () => now });
    let tick: (() => void) | undefined;
    let maxBytes = Infinity;
    const janitor = new TrashJanitor({
      dir: trashDir,
      now: () => now,
      policy: () => ({ maxAgeMs: 30 * DAY_MS, maxBytes }),
      every: (ms, fn) => {
        expect(ms).toBe(3_600_000);
        tick = fn;
        return { dispose: () => (tick = undefined) };
      },
    });
    now = T0 - 45 * DAY_MS;
    const ancient = await trashFile(trash, folder, 'ancient.txt', 1);
    now = T0 - 10 * DAY_MS;
    const a = await trashFile(trash, folder, 'a.txt', 100);
    now = T0;
    expect((await janitor.start())?.removed).toHaveLength(1);
    expect(await exists(ancient)).toBe(false);

    // A pass that trashed nothing: no purge.
    expect(await janitor.afterPass()).toBeUndefined();
    // A pass that trashed something: purged, with the cap as set now.
    maxBytes = 150;
    const b = await trashFile(trash, folder, 'b.txt', 100);
    expect((await janitor.afterPass())?.removed).toHaveLength(1);
    expect([await exists(a), await exists(b)]).toEqual([false, true]);

    // The hourly timer: 21 days on, b is past 30 days.
    now = T0 + 31 * DAY_MS;
    tick?.();
    await janitor.run();
    expect(await exists(b)).toBe(false);
    await janitor.stop();
    expect(tick).toBeUndefined();
  });
});

describe('the agent', () => {
  it('purges the trash when it starts (a 40-day-old item goes, a new one stays)', async () => {
    const { root, trashDir } = await setup();
    const oldSlot = nodePath.join(trashDir, trashSlotName(Date.now() - 40 * DAY_MS, 'abcdef'));
    const newSlot = nodePath.join(trashDir, trashSlotName(Date.now() - DAY_MS, 'abcdef'));
    for (const s of [oldSlot, newSlot]) {
      await fsp.mkdir(s, { recursive: true });
      await fsp.writeFile(nodePath.join(s, 'file.txt'), 'old version');
    }
    const agent = await startAgent({
      folder: nodePath.join(root, 'Weft'),
      stateDir: nodePath.join(root, 'state'),
      secrets: memorySecretStore(),
      watch: false,
    });
    try {
      await expect.poll(() => exists(oldSlot), { timeout: 10_000 }).toBe(false);
      expect(await exists(newSlot)).toBe(true);
    } finally {
      await agent.stop();
    }
  });
});
