/**
 * Selective sync under random histories (support/fake-cloud.ts): device `a` keeps editing,
 * moving and deleting across a small tree while device `b` saves files and, before they are
 * synced, changes which folders it leaves out. After each round settles: `a` and the server
 * agree (nothing `b` left out was deleted remotely); every file `b` saved is in Weft storage;
 * `b` holds exactly the server's tree minus the folders it leaves out;
 * taking every folder back brings `b` level with the server. Replayable from the seed.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FakeCloud, prng, sha256, sorted } from './support/fake-cloud.ts';

let cloud: FakeCloud | undefined;
afterEach(async () => {
  await cloud?.close();
  cloud = undefined;
});

const within = (p: string, q: string): boolean => p === q || p.startsWith(q + '/');

async function history(seed: number, rounds: number): Promise<void> {
  const rnd = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  cloud = new FakeCloud();
  const a = await cloud.addDevice('a');
  const b = await cloud.addDevice('b');
  for (const f of ['A/x/1.txt', 'A/y/2.txt', 'A/3.txt', 'B/z/4.txt', 'B/5.txt', 'C/6.txt', 'top.txt'])
    await a.write(f, `${f} v0`);
  await cloud.settle();
  const written: string[] = [];
  for (let round = 0; round < rounds; round++) {
    const tree = await a.kinds();
    const dirs = [...tree].filter(([, k]) => k === 'dir').map(([p]) => p);
    const files = [...tree].filter(([, k]) => k === 'file').map(([p]) => p);
    const what = rnd();
    if (what < 0.35 || files.length === 0) {
      const dir = dirs.length > 0 && rnd() < 0.8 ? pick(dirs) + '/' : '';
      await a.write(`${dir}n${round}.txt`, `new ${round}`);
    } else if (what < 0.6) {
      await a.write(pick(files), `edit ${round}`);
    } else if (what < 0.75) {
      const f = pick(files);
      await a.mv(f, `${dirs.length > 0 ? pick(dirs) + '/' : ''}m${round}.txt`);
    } else if (what < 0.85 && dirs.length > 0) {
      const d = pick(dirs);
      const to = `${d.includes('/') ? d.slice(0, d.lastIndexOf('/')) + '/' : ''}R${round}`;
      if (!tree.has(to)) await a.mv(d, to);
    } else {
      await a.rm(pick(files));
    }
    // b saves a file it has not synced yet, then (sometimes) changes its choice of folders:
    // the file must reach the server even when its folder is left out at once.
    const bDirs = [...(await b.kinds())].filter(([, k]) => k === 'dir').map(([p]) => p);
    if (bDirs.length > 0 && rnd() < 0.5) {
      const content = `from b ${seed}/${round}`;
      await b.write(`${pick(bDirs)}/b${round}.txt`, content);
      written.push(sha256(content));
    }
    if (rnd() < 0.7) {
      const serverDirs = [...cloud.serverTree()].filter(([, h]) => h === 'dir').map(([p]) => p);
      const chosen = serverDirs.filter(() => rnd() < 0.3);
      b.engine.setExcludedFolders(chosen);
    }
    await cloud.settle();
    await cloud.settle();
    const label = `seed ${seed} round ${round}`;
    const server = cloud.serverTree();
    expect(sorted(await a.tree()), label).toEqual(sorted(server));
    const held = new Set(server.values());
    // (Only this round's: a later round's edit or delete on `a` may rightly replace it.)
    for (const h of written.splice(0)) expect(held.has(h), `${label}: b's file kept`).toBe(true);
    const out = b.engine.selective.current.deselected();
    expect(b.engine.selective.current.inState('leaving'), label).toEqual([]);
    const expected = new Map([...server].filter(([p]) => !out.some((q) => within(p, q))));
    expect(sorted(await b.tree()), label).toEqual(sorted(expected));
  }
  b.engine.setExcludedFolders([]);
  await cloud.settle();
  expect(sorted(await b.tree())).toEqual(sorted(cloud.serverTree()));
  expect(sorted(await a.tree())).toEqual(sorted(cloud.serverTree()));
}

describe('selective sync: random histories', () => {
  const seeds = Number(process.env.WEFT_SELECTIVE_SEEDS ?? 6);
  it.each(Array.from({ length: seeds }, (_, i) => i + 1))('seed %i', async (seed) => {
    await history(seed, 12);
  });
});
