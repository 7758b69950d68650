/**
 * A running engine stops between log entries, not after its whole backlog: a proxy that
 * shuts down with thousands of entries pending must not wait minutes for them (the four-cloud
 * e2e's restart once waited 140 s while the people were paused). And one round applies
 * entries for a bounded time only, then reads the feeds again, so a long backlog does not
 * leave every replica's changes unread meanwhile. What is left is persisted and resumed.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { type Body, type Entry, MemoryProvider, type WriteOptions } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { text, treeOf } from './helpers.ts';

/** A cloud whose writes take a while, with a hook on the first one. */
class Slow extends MemoryProvider {
  onWrite: (() => void) | undefined;
  writes = 0;
  override async write(path: string, body: Body, options?: WriteOptions): Promise<Entry> {
    this.writes += 1;
    const h = this.onWrite;
    this.onWrite = undefined;
    h?.();
    await new Promise((r) => setTimeout(r, 5));
    return super.write(path, body, options);
  }
}

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

async function setup(options: { drainBudgetMs?: number } = {}) {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  const ann = new MemoryProvider({ name: 'ann' });
  const ben = new Slow({ name: 'ben' });
  const make = (): MirrorEngine =>
    new MirrorEngine({
      shareId: 's',
      db,
      concurrency: 4,
      pollIntervalMs: 10,
      ...options,
      replicas: [
        { id: 'r0', member: 'ann', provider: ann, root: '' },
        { id: 'r1', member: 'ben', provider: ben, root: '' },
      ],
    });
  for (let i = 0; i < 200; i++) await ann.write(`f${i}.txt`, text(`file ${i}\n`));
  return { ann, ben, make };
}

describe('stopping and bounded drains', () => {
  it('stop() returns after the entries in flight, leaving the rest pending for the next engine', async () => {
    const { ann, ben, make } = await setup();
    const engine = make();
    let stopped: Promise<void> | undefined;
    ben.onWrite = () => {
      stopped = engine.stop();
    };
    engine.start();
    await new Promise<void>((resolve) => {
      const t = setInterval(() => {
        if (stopped) {
          clearInterval(t);
          resolve();
        }
      }, 1);
    });
    await stopped;
    expect(await engine.pendingCount()).toBeGreaterThan(100);
    expect(ben.writes).toBeLessThan(50);
    await make().quiesce();
    expect(await treeOf(ben, '')).toEqual(await treeOf(ann, ''));
  });

  it('one round applies entries for drainBudgetMs at most, the next round goes on', async () => {
    const { ann, ben, make } = await setup({ drainBudgetMs: 0 });
    const engine = make();
    await engine.step();
    // With no budget, a round applies what it started with its first batch only.
    expect(await engine.pendingCount()).toBeGreaterThan(0);
    await engine.quiesce();
    expect(await engine.pendingCount()).toBe(0);
    expect(await treeOf(ben, '')).toEqual(await treeOf(ann, ''));
  });
});

describe('a restart with entries still pending at their origin', () => {
  it('a folder moved on the origin meanwhile moves everywhere, nothing comes back at the old path', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const ann = new MemoryProvider({ name: 'ann' });
    const ben = new MemoryProvider({ name: 'ben' });
    const make = (options: { concurrency?: number; drainBudgetMs?: number } = {}): MirrorEngine =>
      new MirrorEngine({
        shareId: 's',
        db,
        ...options,
        replicas: [
          { id: 'r0', member: 'ann', provider: ann, root: '', relistOnStart: true },
          { id: 'r1', member: 'ben', provider: ben, root: '' },
        ],
      });
    await make().quiesce();
    for (const n of ['a', 'b', 'c']) await ann.write(`d/${n}.txt`, text(`${n}\n`));
    // One round reads the folder and its files, applies one entry, and the process stops.
    const first = make({ concurrency: 1, drainBudgetMs: 0 });
    await first.step();
    await first.stop();
    expect(await first.pendingCount()).toBeGreaterThan(0);
    // While it is down, ann moves the folder.
    await ann.move('d', 'e');
    await make().quiesce();
    const trees = await Promise.all([treeOf(ann, ''), treeOf(ben, '')]);
    expect([...trees[0].keys()]).toEqual(['e', 'e/a.txt', 'e/b.txt', 'e/c.txt']);
    expect(trees[1]).toEqual(trees[0]);
  });
});
