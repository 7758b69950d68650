/**
 * A member joining a share that already ran gets the share's tree (seeding), merged with
 * what their folder already holds; watched replicas (ChangeWaiter: Dropbox longpoll, the
 * proxy's feed) are read only when their watcher reports changes.
 */
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider } from '@weft/providers';
import { type ChangeWaiter, MirrorEngine, type ReplicaConfig } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { readText, text, treeOf } from './helpers.ts';

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

function db(): Database.Database {
  const d = new Database(':memory:');
  open.push(d);
  migrate(d);
  return d;
}

describe('joining a running share', () => {
  it('seeds the joiner with the share tree and merges its own files, conflicts kept', async () => {
    const d = db();
    const a = new MemoryProvider({ name: 'a' });
    const b = new MemoryProvider({ name: 'b' });
    const c = new MemoryProvider({ name: 'c' });
    let clock = Date.UTC(2026, 10, 21, 12, 0, 0);
    const ra: ReplicaConfig = { id: 'a', member: 'ann', provider: a, root: 'team' };
    const rb: ReplicaConfig = { id: 'b', member: 'ben', provider: b, root: '' };
    const now = () => (clock += 1000);
    for (let i = 0; i < 5; i++) await a.write(`team/docs/f${i}.txt`, text(`v${i}`));
    await a.write('team/same.txt', text('same'));
    await a.write('team/clash.txt', text('share version'));
    await new MirrorEngine({ shareId: 's', db: d, now, replicas: [ra, rb] }).quiesce();
    expect((await treeOf(b, '')).size).toBe(8);

    // Cat joins later with a folder that already holds files.
    await c.write('cat/same.txt', text('same'));
    await c.write('cat/clash.txt', text('cat version'));
    await c.write('cat/only-cat.txt', text('mine'));
    const progress: { applied: number; pending: number }[] = [];
    const engine = new MirrorEngine({
      shareId: 's',
      db: d,
      now,
      onProgress: (p) => progress.push(p),
      replicas: [ra, rb, { id: 'c', member: 'cat', provider: c, root: 'cat' }],
    });
    await engine.quiesce();
    expect(engine.seeded).toBe(8); // docs, 5 files, same.txt, clash.txt
    expect(progress.at(-1)?.pending).toBe(0);
    const trees = await Promise.all([treeOf(a, 'team'), treeOf(b, ''), treeOf(c, 'cat')]);
    expect([...(trees[1] ?? [])]).toEqual([...(trees[0] ?? [])]);
    expect([...(trees[2] ?? [])]).toEqual([...(trees[0] ?? [])]);
    const names = [...(trees[0] ?? new Map()).keys()];
    expect(names).toContain('only-cat.txt');
    const copies = names.filter((n) => n.startsWith('clash (conflicted copy'));
    expect(copies).toHaveLength(1);
    // Cat's version stays in place (later in the log); the share's is the copy.
    expect(await readText(a, 'team/clash.txt')).toBe('cat version');
    expect(await readText(a, `team/${copies[0]}`)).toBe('share version');
    expect(await readText(c, 'cat/same.txt')).toBe('same');
  });
});

describe('watched replicas', () => {
  it('reads a watched feed only after its watcher reports changes', async () => {
    const d = db();
    const a = new MemoryProvider({ name: 'a' });
    const b = new MemoryProvider({ name: 'b' });
    let release: (() => void) | undefined;
    let calls = 0;
    const waiter: ChangeWaiter = (_cursor, signal) =>
      new Promise((resolve, reject) => {
        calls += 1;
        release = () => resolve({ changes: true });
        signal.addEventListener('abort', () => reject(new Error('aborted')));
      });
    const changesCalls = { n: 0 };
    const counted = new Proxy(a, {
      get(target, prop, receiver) {
        if (prop === 'changes') {
          return (...args: Parameters<MemoryProvider['changes']>) => {
            changesCalls.n += 1;
            return target.changes(...args);
          };
        }
        return Reflect.get(target, prop, receiver) as unknown;
      },
    });
    const engine = new MirrorEngine({
      shareId: 'w',
      db: d,
      pollIntervalMs: 20,
      replicas: [
        { id: 'a', member: 'ann', provider: counted, root: '', waitForChanges: waiter },
        { id: 'b', member: 'ben', provider: b, root: '' },
      ],
    });
    await engine.quiesce(); // first start: both listed, cursors saved
    engine.start();
    await new Promise((r) => setTimeout(r, 150));
    const before = changesCalls.n;
    expect(before).toBe(0); // watched, nothing reported: the feed is not polled
    await a.write('x.txt', text('hello'));
    await new Promise((r) => setTimeout(r, 100));
    expect(await b.stat('x.txt').catch(() => undefined)).toBeUndefined();
    release?.();
    for (let i = 0; i < 100 && !(await b.stat('x.txt').catch(() => undefined)); i++)
      await new Promise((r) => setTimeout(r, 20));
    await engine.stop();
    expect(await readText(b, 'x.txt')).toBe('hello');
    expect(changesCalls.n).toBeGreaterThan(0);
    expect(calls).toBeGreaterThanOrEqual(1);
  });
});
