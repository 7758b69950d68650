import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { MemoryProvider } from '@weft/providers';
import { MirrorEngine } from '../src/engine.ts';
import { migrate } from '../src/store.ts';
import { readText, text, treeOf } from './helpers.ts';

const ROOTS = ['', 'Shared/team', 'weft', 'x/y/z'];
const MEMBERS = ['alice', 'bob', 'carol', 'dave'];

interface Setup {
  db: Database.Database;
  providers: MemoryProvider[];
  engine: MirrorEngine;
  make: () => MirrorEngine;
}

const open: Database.Database[] = [];
afterEach(() => {
  for (const db of open.splice(0)) db.close();
});

function setup(options: { maxChangeLog?: number; noMove?: boolean; frozenClock?: boolean } = {}): Setup {
  const db = new Database(':memory:');
  open.push(db);
  migrate(db);
  let clock = Date.UTC(2026, 10, 21, 12, 0, 0);
  const providers = MEMBERS.map(
    (m) => new MemoryProvider({ name: m, maxChangeLog: options.maxChangeLog, now: () => clock }),
  );
  if (options.noMove) {
    const p = providers[3] as MemoryProvider & { features: { move: false } };
    Object.assign(p, { features: { ...p.features, move: false } });
  }
  const make = (): MirrorEngine =>
    new MirrorEngine({
      shareId: 's1',
      db,
      now: () => (options.frozenClock ? clock : (clock += 1000)),
      replicas: providers.map((p, i) => ({
        id: `r${i}`,
        member: MEMBERS[i] ?? '',
        provider: p,
        root: ROOTS[i] ?? '',
      })),
    });
  return { db, providers, engine: make(), make };
}

function path(i: number, rel: string): string {
  const root = ROOTS[i] ?? '';
  return root === '' ? rel : `${root}/${rel}`;
}

async function expectConverged(s: Setup): Promise<Map<string, string>> {
  const trees = await Promise.all(s.providers.map((p, i) => treeOf(p, ROOTS[i] ?? '')));
  for (const t of trees.slice(1)) expect([...t]).toEqual([...(trees[0] ?? [])]);
  return trees[0] ?? new Map();
}

describe('mirror engine on memory replicas', () => {
  it('seeds every replica from the others at first start, merging and keeping conflicts', async () => {
    const s = setup();
    const [a, b, c] = s.providers as [MemoryProvider, MemoryProvider, MemoryProvider];
    await a.write(path(0, 'docs/a.txt'), text('from alice'));
    await b.write(path(1, 'docs/b.txt'), text('from bob'));
    await c.write(path(2, 'docs/a.txt'), text('carol also has an a.txt'));
    await s.engine.quiesce();
    const tree = await expectConverged(s);
    // The copy is stamped with its log entry's time (this clock ticks a second per read).
    expect([...tree.keys()]).toEqual([
      'docs',
      expect.stringMatching(/^docs\/a \(conflicted copy 2026-11-21 1200\d\d from alice\)\.txt$/),
      'docs/a.txt',
      'docs/b.txt',
    ]);
    // The later entry in the share's log stays in place; the earlier one is the copy.
    expect(await readText(s.providers[3] as MemoryProvider, path(3, 'docs/a.txt'))).toBe(
      'carol also has an a.txt',
    );
  });

  it('reports progress while a joining member is seeded', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const a = new MemoryProvider();
    const b = new MemoryProvider();
    for (let i = 0; i < 20; i++) await a.write(`docs/f${i}.txt`, text(`${i}`));
    const seen: { applied: number; pending: number }[] = [];
    const engine = new MirrorEngine({
      shareId: 'join',
      db,
      onProgress: (p) => seen.push(p),
      replicas: [
        { id: 'a', member: 'ann', provider: a, root: '' },
        { id: 'b', member: 'ben', provider: b, root: 'joined' },
      ],
    });
    await engine.quiesce();
    expect(seen.at(-1)).toEqual({ applied: 21, pending: 0 });
    expect(seen.map((p) => p.applied)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
    expect((await treeOf(b, 'joined')).size).toBe(21);
  });

  it('propagates creates, edits, deletes and moves; moves are native moves', async () => {
    const s = setup();
    const [a, b, , d] = s.providers as MemoryProvider[] as [
      MemoryProvider,
      MemoryProvider,
      MemoryProvider,
      MemoryProvider,
    ];
    await s.engine.quiesce();
    await a.write(path(0, 'p/one.txt'), text('1'));
    await a.write(path(0, 'p/q/two.txt'), text('2'));
    await s.engine.quiesce();
    await b.write(path(1, 'p/one.txt'), text('1 edited by bob'));
    await s.engine.quiesce();
    expect(await readText(d, path(3, 'p/one.txt'))).toBe('1 edited by bob');
    await d.move(path(3, 'p/q'), path(3, 'p/r'));
    await s.engine.quiesce();
    expect(s.engine.stats.nativeMoves).toBe(3);
    await a.move(path(0, 'p/one.txt'), path(0, 'p/uno.txt'));
    await s.engine.quiesce();
    expect(s.engine.stats.nativeMoves).toBe(6);
    let tree = await expectConverged(s);
    expect([...tree.keys()]).toEqual(['p', 'p/r', 'p/r/two.txt', 'p/uno.txt']);
    await b.remove(path(1, 'p/r'));
    await s.engine.quiesce();
    tree = await expectConverged(s);
    expect([...tree.keys()]).toEqual(['p', 'p/uno.txt']);
    expect(s.engine.stats.conflicts).toBe(0);
  });

  it('a provider without server-side move gets upload + delete', async () => {
    const s = setup({ noMove: true });
    const [a] = s.providers as [MemoryProvider];
    await a.write(path(0, 'd/f.txt'), text('f'));
    await s.engine.quiesce();
    await a.move(path(0, 'd'), path(0, 'e'));
    await s.engine.quiesce();
    const tree = await expectConverged(s);
    expect([...tree.keys()]).toEqual(['e', 'e/f.txt']);
    expect(s.engine.stats.nativeMoves).toBe(2);
  });

  it('a concurrent edit becomes a conflicted copy on every replica', async () => {
    const s = setup();
    const [a, b, c] = s.providers as [MemoryProvider, MemoryProvider, MemoryProvider];
    await a.write(path(0, 'r.txt'), text('v0'));
    await s.engine.quiesce();
    await b.write(path(1, 'r.txt'), text('bob'));
    await c.write(path(2, 'r.txt'), text('carol'));
    await s.engine.quiesce();
    const tree = await expectConverged(s);
    // The stamp is the engine's clock when it read bob's version (this clock ticks per call).
    expect([...tree.keys()]).toEqual([
      expect.stringMatching(/^r \(conflicted copy 2026-11-21 1200\d\d from bob\)\.txt$/),
      'r.txt',
    ]);
    expect(await readText(a, path(0, 'r.txt'))).toBe('carol');
    expect(s.engine.stats.conflicts).toBeGreaterThan(0);
  });

  it('two versions conflicting in the same second get two different copies', async () => {
    const s = setup({ frozenClock: true });
    const [a, b, c] = s.providers as [MemoryProvider, MemoryProvider, MemoryProvider];
    await a.write(path(0, 'p.txt'), text('v0'));
    await s.engine.quiesce();
    await b.write(path(1, 'p.txt'), text('b1'));
    await a.write(path(0, 'p.txt'), text('a1'));
    await s.engine.step();
    await c.write(path(2, 'p.txt'), text('c1'));
    await a.write(path(0, 'p.txt'), text('a2'));
    await s.engine.quiesce();
    const tree = await expectConverged(s);
    const contents = await Promise.all([...tree.keys()].map((k) => readText(a, path(0, k))));
    // b1 was in place everywhere when alice wrote a2 over it: superseded, not lost.
    expect(contents.sort()).toEqual(['a1', 'a2', 'c1']);
    expect([...tree.keys()].filter((k) => k.includes('conflicted copy')).sort()).toEqual([
      'p (conflicted copy 2026-11-21 120000 from alice 2).txt',
      'p (conflicted copy 2026-11-21 120000 from alice).txt',
    ]);
  });

  it('an edit wins over a concurrent delete of its folder', async () => {
    const s = setup();
    const [a, b] = s.providers as [MemoryProvider, MemoryProvider];
    await a.write(path(0, 'd/keep.txt'), text('v0'));
    await a.write(path(0, 'd/other.txt'), text('o'));
    await s.engine.quiesce();
    await a.remove(path(0, 'd'));
    await b.write(path(1, 'd/keep.txt'), text('v1 by bob'));
    await s.engine.quiesce();
    const tree = await expectConverged(s);
    expect([...tree.keys()]).toEqual(['d', 'd/keep.txt']);
    expect(await readText(a, path(0, 'd/keep.txt'))).toBe('v1 by bob');
  });

  it('an edit inside a folder moved concurrently elsewhere is kept', async () => {
    for (const order of ['move-first', 'edit-first'] as const) {
      const s = setup();
      const [a, b] = s.providers as [MemoryProvider, MemoryProvider];
      await a.write(path(0, 'd/f.txt'), text('v0'));
      await s.engine.quiesce();
      const [mover, editor, mi, ei] = order === 'move-first' ? [a, b, 0, 1] : [b, a, 1, 0];
      await mover.move(path(mi, 'd'), path(mi, 'moved'));
      await editor.write(path(ei, 'd/f.txt'), text('edited'));
      await s.engine.quiesce();
      const tree = await expectConverged(s);
      const all = [...tree.values()];
      expect(all.filter((v) => v !== 'dir').length).toBeGreaterThanOrEqual(2);
      const texts = await Promise.all(
        [...tree].filter(([, v]) => v !== 'dir').map(([k]) => readText(a, path(0, k))),
      );
      expect(texts, order).toContain('edited');
    }
  });

  it('echo suppression: sustained edits on one replica are propagated once each, never back', async () => {
    const s = setup();
    const [a] = s.providers as [MemoryProvider];
    await s.engine.quiesce();
    const base = s.engine.stats.ingested;
    for (let i = 0; i < 30; i++) {
      await a.write(path(0, 'hot.txt'), text(`edit ${i}`));
      await a.write(path(0, `cold-${i % 3}.txt`), text(`c ${i}`));
      await s.engine.step();
    }
    await s.engine.quiesce();
    // 60 edits from the feed plus 'hot.txt' never bounced: nothing else entered the log.
    expect(s.engine.stats.ingested - base).toBe(60);
    expect(s.engine.stats.echoes).toBeGreaterThanOrEqual(60 * 3);
    expect(await s.engine.step()).toBe(0);
    await expectConverged(s);
  });

  it('restart resumes from persisted cursors without re-copying; a feed reset re-lists', async () => {
    const s = setup({ maxChangeLog: 5 });
    const [a, b] = s.providers as [MemoryProvider, MemoryProvider];
    for (let i = 0; i < 4; i++) await a.write(path(0, `f${i}.txt`), text(`${i}`));
    await s.engine.quiesce();
    const second = s.make();
    expect(await second.step()).toBe(0);
    expect(second.stats.relistings).toBe(0);
    // Beyond the feed's memory while the engine was down: cursor expired → re-listing.
    for (let i = 0; i < 10; i++) await b.write(path(1, `g${i}.txt`), text(`g${i}`));
    await b.remove(path(1, 'f0.txt'));
    await second.quiesce();
    expect(second.stats.relistings).toBeGreaterThan(0);
    const tree = await expectConverged(s);
    expect(tree.has('f0.txt')).toBe(false);
    expect(tree.size).toBe(3 + 10);
  });
});

describe('feeds listing a folder move child-first (Dropbox)', () => {
  it('is still one native folder move', async () => {
    const db = new Database(':memory:');
    open.push(db);
    migrate(db);
    const a = new MemoryProvider({ name: 'a' });
    const b = new MemoryProvider({ name: 'b' });
    // Reorder each feed page the way Dropbox does: deletes of children before their folder.
    const changes = a.changes.bind(a);
    Object.assign(a, {
      changes: async (cursor: string, o?: { limit?: number }) => {
        const page = await changes(cursor, o);
        const out = [...page.changes];
        for (let i = 0; i < out.length; i++) {
          const c = out[i];
          if (c?.type !== 'delete') continue;
          const kids = childrenBefore(c.path);
          out.splice(i, 0, ...kids.map((p) => ({ type: 'delete' as const, path: p })));
          i += kids.length;
        }
        return { ...page, changes: out };
      },
    });
    const engine = new MirrorEngine({
      shareId: 's',
      db,
      replicas: [
        { id: 'a', member: 'ann', provider: a, root: '' },
        { id: 'b', member: 'ben', provider: b, root: '' },
      ],
    });
    await a.write('d/x.txt', text('x'));
    await a.write('d/y/z.txt', text('z'));
    await engine.quiesce();
    await a.move('d', 'e');
    await engine.quiesce();
    expect([...(await treeOf(b, '')).keys()]).toEqual(['e', 'e/x.txt', 'e/y', 'e/y/z.txt']);
    expect(engine.stats.nativeMoves).toBe(1);
  });
});

/** What was below `dir` in this test before it moved, deepest first as Dropbox lists it. */
function childrenBefore(dir: string): string[] {
  return ['d/y/z.txt', 'd/y', 'd/x.txt'].filter((p) => p.startsWith(dir + '/'));
}
