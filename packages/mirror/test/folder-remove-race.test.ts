/**
 * Applying a folder delete, the engine removes the files the deleter had, then the folder
 * itself — and the clouds remove a folder with whatever is in it. A save landing in the
 * folder between the engine's last look and its removal must not go with it (the
 * four-cloud bench lost two saves this way).
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { type Entry, MemoryProvider, type TransferOptions } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { readText, text, treeOf } from './helpers.ts';

/**
 * A cloud on which someone saves right before the engine's first call that takes folder `d`
 * away (a remove or a move of it) is carried out, or right before a hidden folder is removed.
 */
class Racing extends MemoryProvider {
  beforeFolderGoes: (() => Promise<void>) | undefined;
  beforeHiddenRemoved: (() => Promise<void>) | undefined;
  private async fire(which: 'beforeFolderGoes' | 'beforeHiddenRemoved'): Promise<void> {
    const h = this[which];
    this[which] = undefined;
    await h?.();
  }
  /** Where the engine last set a folder aside. */
  setAside: string | undefined;
  override async move(from: string, to: string, options?: TransferOptions): Promise<Entry> {
    if (from === 'd') await this.fire('beforeFolderGoes');
    if (to.includes('.weft-removing-')) this.setAside = to;
    return super.move(from, to, options);
  }
  override async remove(
    path: string,
    options?: { ifRevision?: string; signal?: AbortSignal },
  ): Promise<void> {
    if (path === 'd') await this.fire('beforeFolderGoes');
    if (path.includes('.weft-removing-')) await this.fire('beforeHiddenRemoved');
    return super.remove(path, options);
  }
}

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

async function setup(parkSettleMs?: number) {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  const ann = new Racing({ name: 'ann' });
  const ben = new MemoryProvider({ name: 'ben' });
  const make = (): MirrorEngine =>
    new MirrorEngine({
      shareId: 's',
      db,
      ...(parkSettleMs !== undefined ? { parkSettleMs } : {}),
      replicas: [
        { id: 'r0', member: 'ann', provider: ann, root: '' },
        { id: 'r1', member: 'ben', provider: ben, root: '' },
      ],
    });
  const engine = make();
  await ann.write('d/x.txt', text('x\n'));
  await engine.quiesce();
  await ben.remove('d');
  return { ann, ben, engine, make };
}

describe('removing a folder someone saves into at that instant', () => {
  it('a save landing just before the folder goes is kept and reaches everyone', async () => {
    const { ann, ben, engine } = await setup();
    ann.beforeFolderGoes = () => ann.write('d/new.txt', text('saved meanwhile\n')).then(() => undefined);
    await engine.quiesce();
    const trees = await Promise.all([treeOf(ann, ''), treeOf(ben, '')]);
    expect([...trees[0].keys()]).toEqual(['d', 'd/new.txt']);
    expect(trees[1]).toEqual(trees[0]);
    expect(await readText(ben, 'd/new.txt')).toBe('saved meanwhile\n');
  });

  it('a save landing after it was set aside stays where it was saved', async () => {
    const { ann, ben, engine } = await setup();
    ann.beforeHiddenRemoved = () => ann.write('d/late.txt', text('late\n')).then(() => undefined);
    await engine.quiesce();
    const trees = await Promise.all([treeOf(ann, ''), treeOf(ben, '')]);
    expect([...trees[0].keys()]).toEqual(['d', 'd/late.txt']);
    expect(trees[1]).toEqual(trees[0]);
  });

  it('a save already on its way into the folder, landing after it was set aside, is put back', async () => {
    // Clouds that address folders by id (Drive, OneDrive items) take a save into a folder
    // the client resolved before the engine set it aside: it lands in the hidden folder.
    const { ann, ben, engine } = await setup();
    await engine.step(); // reads ben's delete, empties d on ann and sets it aside
    const hidden = ann.setAside;
    expect(hidden).toBeDefined();
    await ann.write(`${hidden}/inflight.txt`, text('was on its way\n'));
    await engine.quiesce();
    const trees = await Promise.all([treeOf(ann, ''), treeOf(ben, '')]);
    expect([...trees[0].keys()]).toEqual(['d', 'd/inflight.txt']);
    expect(trees[1]).toEqual(trees[0]);
    expect(await readText(ben, 'd/inflight.txt')).toBe('was on its way\n');
  });

  it('a running engine removes a set-aside folder once settled, without a quiesce', async () => {
    const { ann, engine } = await setup(0);
    await engine.step();
    expect(ann.setAside).toBeDefined();
    expect([...(await treeOf(ann, '')).keys()]).toEqual([]);
    await expect(ann.stat(ann.setAside ?? '')).rejects.toThrow();
  });

  it('a folder an engine set aside before it stopped short is settled by the next engine', async () => {
    const { ann, ben, engine, make } = await setup();
    await engine.step();
    const hidden = ann.setAside ?? '';
    expect(hidden).not.toBe('');
    await ann.write(`${hidden}/inflight.txt`, text('was on its way\n'));
    // The process dies here (no stop(): the set-aside folder is not settled). Another
    // engine starts on the same books.
    await make().quiesce();
    const trees = await Promise.all([treeOf(ann, ''), treeOf(ben, '')]);
    expect([...trees[0].keys()]).toEqual(['d', 'd/inflight.txt']);
    expect(trees[1]).toEqual(trees[0]);
  });

  it('an empty folder left set aside by an engine that stopped short is removed by the next', async () => {
    const { ann, engine, make } = await setup();
    await engine.step();
    const hidden = ann.setAside ?? '';
    expect((await ann.stat(hidden)).kind).toBe('dir');
    await make().quiesce();
    await expect(ann.stat(hidden)).rejects.toThrow();
    expect([...(await treeOf(ann, '')).keys()]).toEqual([]);
  });

  it('with nothing racing, the folder is gone everywhere and nothing hidden is left', async () => {
    const { ann, ben, engine } = await setup();
    await engine.quiesce();
    expect([...(await treeOf(ann, '')).keys()]).toEqual([]);
    expect([...(await treeOf(ben, '')).keys()]).toEqual([]);
  });
});
