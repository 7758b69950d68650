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
  override async move(from: string, to: string, options?: TransferOptions): Promise<Entry> {
    if (from === 'd') await this.fire('beforeFolderGoes');
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

async function setup() {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  const ann = new Racing({ name: 'ann' });
  const ben = new MemoryProvider({ name: 'ben' });
  const engine = new MirrorEngine({
    shareId: 's',
    db,
    replicas: [
      { id: 'r0', member: 'ann', provider: ann, root: '' },
      { id: 'r1', member: 'ben', provider: ben, root: '' },
    ],
  });
  await ann.write('d/x.txt', text('x\n'));
  await engine.quiesce();
  await ben.remove('d');
  return { ann, ben, engine };
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

  it('with nothing racing, the folder is gone everywhere and nothing hidden is left', async () => {
    const { ann, ben, engine } = await setup();
    await engine.quiesce();
    expect([...(await treeOf(ann, '')).keys()]).toEqual([]);
    expect([...(await treeOf(ben, '')).keys()]).toEqual([]);
  });
});
