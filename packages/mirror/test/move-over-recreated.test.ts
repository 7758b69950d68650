/**
 * A member renames a conflicted copy the engine wrote on their cloud; before the rename
 * is applied, another member's identical copy (same name, same content) is written there
 * again by the engine. The rename's bookkeeping took that new file for the renamed one (same
 * content) and moved its book row away: the re-created copy stayed on that cloud unknown to
 * the books, the verification took it for an echo of our own write, and a later engine
 * found it and sent it everywhere — the five-minute e2e's trees differed by that one file
 * at the end. The engine's own write after the move was read is not what the member moved.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { type Body, type Entry, MemoryProvider, type WriteOptions } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { text, treeOf } from './helpers.ts';

/** A cloud on which the engine's conflicted copies land a little later than elsewhere. */
class Late extends MemoryProvider {
  override async write(path: string, body: Body, options?: WriteOptions): Promise<Entry> {
    if (path.includes('conflicted copy')) await new Promise((r) => setTimeout(r, 30));
    return super.write(path, body, options);
  }
}

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

describe('a rename on the origin and the engine re-creating the same file there', () => {
  it('the rename moves the member s file; what the engine wrote afterwards is deleted like the rest', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const ann = new MemoryProvider({ name: 'ann' });
    const ben = new Late({ name: 'ben' });
    const cat = new MemoryProvider({ name: 'cat' });
    const make = (options: { concurrency?: number; drainBudgetMs?: number } = {}): MirrorEngine =>
      new MirrorEngine({
        shareId: 's',
        db,
        now: () => Date.UTC(2026, 10, 21, 12, 0, 0),
        ...options,
        replicas: [
          { id: 'a', member: 'ann', provider: ann, root: '' },
          { id: 'b', member: 'ben', provider: ben, root: '' },
          { id: 'c', member: 'cat', provider: cat, root: '' },
        ],
      });
    await ann.write('x.txt', text('v0\n'));
    await make().quiesce();
    // Three concurrent edits; one entry at a time from here.
    await ann.write('x.txt', text('v0\nann\n'));
    await ben.write('x.txt', text('v0\nben\n'));
    await cat.write('x.txt', text('v0\ncat\n'));
    const engine = make({ concurrency: 1, drainBudgetMs: 0 });
    await engine.step(); // ann's edit wins x.txt; ben and cat get conflicted copies of it
    const copies = [...(await treeOf(ben, '')).keys()].filter((k) => k.includes('conflicted copy'));
    expect(copies).toHaveLength(1);
    const copy = copies[0] as string;
    // Ben renames the copy on his cloud.
    await ben.move(copy, 'kept.txt');
    await engine.quiesce();
    const trees = await Promise.all([treeOf(ann, ''), treeOf(ben, ''), treeOf(cat, '')]);
    expect(trees[1]).toEqual(trees[0]);
    expect(trees[2]).toEqual(trees[0]);
    expect([...trees[0].keys()]).toContain('kept.txt');
    expect([...trees[0].keys()]).not.toContain(copy);
    // A new engine (nothing of ours in memory) finds nothing new either.
    const again = make();
    await again.quiesce();
    expect(again.stats.ingested).toBe(0);
  });
});
